package operator_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	return port
}

func testOptions(t *testing.T) *options.Options {
	o := options.New()
	o.MetricsPort = freePort(t)
	o.HealthProbePort = freePort(t)
	o.LeaderElectionNamespace = "default"
	o.LeaderElectionName = "test-leader-election"
	o.LeaderElectionLeaseDuration = 3 * time.Second
	o.LeaderElectionRenewDeadline = 2 * time.Second
	o.LeaderElectionRetryPeriod = 250 * time.Millisecond
	o.LogOutputPaths = filepath.Join(t.TempDir(), "log.json")
	return o
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

type running struct {
	op     *operator.Operator
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, o *options.Options) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, cp.Config, o)
	require.NoError(t, err)
	r := &running{op: op, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- op.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			assert.NoError(t, err)
			close(r.done)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("operator did not shut down")
	}
}

func elected(r *running) bool {
	select {
	case <-r.op.Elected():
		return true
	default:
		return false
	}
}

func lease(t *testing.T, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, l))
	return l
}

// TestProbesMetricsAndLeaderHandover runs two replicas: the first leads and
// serves probes and metrics; when it stops it releases the Lease and the
// second takes over without waiting for the Lease to expire.
func TestProbesMetricsAndLeaderHandover(t *testing.T) {
	o1 := testOptions(t)
	first := start(t, o1)
	require.Eventually(t, func() bool { return elected(first) }, 20*time.Second, 50*time.Millisecond)

	probe := "http://127.0.0.1:" + strconv.Itoa(o1.HealthProbePort)
	require.Eventually(t, func() bool { c, _ := get(probe + "/healthz"); return c == http.StatusOK }, 10*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { c, _ := get(probe + "/readyz"); return c == http.StatusOK }, 10*time.Second, 50*time.Millisecond)
	code, body := get("http://127.0.0.1:" + strconv.Itoa(o1.MetricsPort) + "/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `karpenter_build_info{commit="unknown",goarch=`)
	assert.Contains(t, body, "karpenter_cluster_state_synced")

	holder := lease(t, "test-leader-election").Spec.HolderIdentity
	require.NotNil(t, holder)
	require.NotEmpty(t, *holder)

	second := start(t, testOptions(t))
	time.Sleep(time.Second)
	assert.False(t, elected(second), "only one replica leads")

	start := time.Now()
	first.stop(t)
	require.Eventually(t, func() bool { return elected(second) }, 10*time.Second, 50*time.Millisecond)
	t.Logf("hand-over took %s", time.Since(start))
	newHolder := lease(t, "test-leader-election").Spec.HolderIdentity
	require.NotNil(t, newHolder)
	assert.NotEqual(t, *holder, *newHolder)

	// Logs are JSON with upstream's keys.
	data, err := os.ReadFile(o1.LogOutputPaths)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"message":`)
	assert.Contains(t, string(data), `"commit":"unknown"`)
}

func TestLeaderElectionDisabled(t *testing.T) {
	o := testOptions(t)
	o.DisableLeaderElection = true
	o.LeaderElectionName = "never-created"
	r := start(t, o)
	require.Eventually(t, func() bool { return elected(r) }, 10*time.Second, 50*time.Millisecond)
	l := &coordinationv1.Lease{}
	err := cp.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "never-created"}, l)
	assert.Error(t, err)

	// The recorder writes core/v1 Events from "karpenter", as kubectl
	// describe shows them.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "events-test"}}
	require.NoError(t, cp.Client.Create(context.Background(), ns))
	r.op.EventRecorder.Event(ns, corev1.EventTypeNormal, "Nominated", "hello")
	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		if err := cp.Client.List(context.Background(), events); err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "events-test" && e.Reason == "Nominated" && e.Source.Component == "karpenter" {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)
}

// TestHoldLeadership: a replica with a hold does not take a free lease
// until the hold is released, while its manager runs (a standby warming
// its caches); and a replica that leads hands over to a warm standby.
func TestHoldLeadership(t *testing.T) {
	o := testOptions(t)
	o.LeaderElectionName = "test-hold-leadership"
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, cp.Config, o)
	require.NoError(t, err)
	ready := make(chan struct{})
	op.HoldLeadership(ready)
	r := &running{op: op, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- op.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })

	probe := "http://127.0.0.1:" + strconv.Itoa(o.HealthProbePort)
	require.Eventually(t, func() bool { c, _ := get(probe + "/healthz"); return c == http.StatusOK }, 20*time.Second, 50*time.Millisecond,
		"the manager runs while leadership is held")
	time.Sleep(2 * time.Second)
	assert.False(t, elected(r), "no lease while held")
	l := &coordinationv1.Lease{}
	err = cp.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: o.LeaderElectionName}, l)
	assert.True(t, apierrors.IsNotFound(err), "the held replica did not create the lease: %v", err)

	close(ready)
	require.Eventually(t, func() bool { return elected(r) }, 20*time.Second, 50*time.Millisecond)
}
