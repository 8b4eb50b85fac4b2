package garbagecollection_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/garbagecollection"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// nodeClaim creates a NodeClaim with the given provider ID, optionally
// marked Registered.
func nodeClaim(t *testing.T, ctx context.Context, name, providerID string, registered bool) *v1.NodeClaim {
	t.Helper()
	nc := testutil.SpotNodeClaim(name)
	require.NoError(t, cp.Client.Create(ctx, nc))
	nc.Status.ProviderID = providerID
	if registered {
		nc.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.Now()}}
	}
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	return nc
}

func node(t *testing.T, ctx context.Context, name, providerID string, ready corev1.ConditionStatus) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	require.NoError(t, cp.Client.Create(ctx, n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	require.NoError(t, cp.Client.Status().Update(ctx, n))
}

func exists(t *testing.T, ctx context.Context, name string) bool {
	t.Helper()
	err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, &v1.NodeClaim{})
	require.NoError(t, client.IgnoreNotFound(err))
	return err == nil
}

func TestGarbageCollection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fakecloud.New(clk)
	gc := garbagecollection.NewController(cp.Client, cloud, garbagecollection.Options{Clock: clk})

	// NodeClaims.
	alive := cloud.AddInstance("alive", metav1.NewTime(clk.Now().Add(-time.Hour)))
	nodeClaim(t, ctx, "alive", alive, true)
	nodeClaim(t, ctx, "orphan", fakecloud.ProviderIDPrefix+"orphan", true)
	nodeClaim(t, ctx, "orphan-notready", fakecloud.ProviderIDPrefix+"orphan-notready", true)
	node(t, ctx, "orphan-notready", fakecloud.ProviderIDPrefix+"orphan-notready", corev1.ConditionFalse)
	nodeClaim(t, ctx, "orphan-ready", fakecloud.ProviderIDPrefix+"orphan-ready", true)
	node(t, ctx, "orphan-ready", fakecloud.ProviderIDPrefix+"orphan-ready", corev1.ConditionTrue)
	nodeClaim(t, ctx, "unregistered", fakecloud.ProviderIDPrefix+"unregistered", false)

	// Instances.
	leaked := cloud.AddInstance("leaked", metav1.NewTime(clk.Now().Add(-time.Minute)))
	node(t, ctx, "leaked", leaked, corev1.ConditionTrue) // joined, but its NodeClaim is gone
	fresh := cloud.AddInstance("fresh", metav1.NewTime(clk.Now().Add(-5*time.Second)))
	inFlight := cloud.AddInstance("in-flight", metav1.NewTime(clk.Now().Add(-time.Minute)))
	nodeClaim(t, ctx, "in-flight", "", false) // launched, provider ID not stored yet

	require.NoError(t, gc.Reconcile(ctx))

	require.True(t, exists(t, ctx, "alive"))
	require.False(t, exists(t, ctx, "orphan"), "instance vanished and no node: collected")
	require.False(t, exists(t, ctx, "orphan-notready"), "instance vanished and node not ready: collected")
	require.True(t, exists(t, ctx, "orphan-ready"), "a Ready node proves the machine is alive")
	require.True(t, exists(t, ctx, "unregistered"), "only registered nodeclaims are collected")

	// Only the old, unclaimed instance is terminated (Delete starts it),
	// and its orphaned Node goes with it.
	require.Equal(t, 1, cloud.DeleteCalls)
	require.True(t, apierrors.IsNotFound(cp.Client.Get(ctx, client.ObjectKey{Name: "leaked"}, &corev1.Node{})),
		"the leaked instance's Node is deleted")
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "orphan-ready"}, &corev1.Node{}), "other Nodes stay")
	require.Empty(t, cloud.DeletedIDs)
	require.True(t, cloud.Has(alive))
	require.True(t, cloud.Has(fresh))
	require.True(t, cloud.Has(inFlight))

	// The next pass finds the leak terminating and finishes it; the fresh
	// instance is collected once past the grace period.
	clk.Step(time.Minute)
	require.NoError(t, gc.Reconcile(ctx))
	require.False(t, cloud.Has(leaked))
	require.Equal(t, []string{leaked}, cloud.DeletedIDs)
	require.Equal(t, 3, cloud.DeleteCalls, "leaked finished, fresh started")
	require.True(t, cloud.Has(fresh), "first Delete only starts termination")
	require.True(t, cloud.Has(inFlight))
	require.True(t, cloud.Has(alive))
}

// TestLoopSurvivesPanic: a pass that panics is logged with its stack and
// the ticker loop runs the next pass, which collects the leak.
func TestLoopSurvivesPanic(t *testing.T) {
	logs := &testutil.Logs{}
	ctx, cancel := context.WithTimeout(logs.Context(context.Background()), time.Minute)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fakecloud.New(clk)
	leaked := cloud.AddInstance(testutil.UniqueName("leaked"), metav1.NewTime(clk.Now().Add(-time.Hour)))
	panicked := false
	cloud.BeforeList = func() {
		cloud.Lock()
		first := !panicked
		panicked = true
		cloud.Unlock()
		if first {
			panic("injected")
		}
	}
	gc := garbagecollection.NewController(cp.Client, cloud, garbagecollection.Options{Clock: clk, Interval: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- gc.Start(ctx) }()
	require.Eventually(t, func() bool { return !cloud.Has(leaked) }, 30*time.Second, 10*time.Millisecond,
		"passes after the panic still run")
	cancel()
	require.NoError(t, <-done)
	lines := logs.Matching("Observed a panic")
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], "stacktrace")
	require.Contains(t, lines[0], "injected")
}

// TestInstanceWithoutCreationTime: an unclaimed instance the provider gives
// no creation time for is not taken for an old leak; its age counts from
// the first pass that saw it.
func TestInstanceWithoutCreationTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fakecloud.New(clk)
	gc := garbagecollection.NewController(cp.Client, cloud, garbagecollection.Options{Clock: clk})
	undated := cloud.AddInstance(testutil.UniqueName("undated"), metav1.Time{})

	require.NoError(t, gc.Reconcile(ctx))
	clk.Step(garbagecollection.DefaultLeakGracePeriod / 2)
	require.NoError(t, gc.Reconcile(ctx))
	require.Zero(t, cloud.DeleteCalls, "first seen less than the grace period ago")

	clk.Step(garbagecollection.DefaultLeakGracePeriod)
	require.NoError(t, gc.Reconcile(ctx))
	require.Equal(t, 1, cloud.DeleteCalls, "terminated once the grace period has passed since first seen")
	require.True(t, cloud.Has(undated), "first Delete only starts termination")
}
