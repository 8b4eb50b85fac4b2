package pod_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-go/karpenter/pkg/controllers/metrics/pod"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// TestStartupSeries follows a pod from pending to Ready: while it waits the
// unbound, unstarted and undecided gauges run (the provisioning ones from
// the round that found it a place), the first decision is observed, and
// binding and readiness observe the bound and startup durations, from
// creation and from the schedulable time, and end the gauges.
func TestStartupSeries(t *testing.T) {
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "startup", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	require.NoError(t, cp.Client.Create(ctx, p))
	created := p.CreationTimestamp.Time
	clk := clocktesting.NewFakeClock(created.Add(10 * time.Second))
	cluster := state.NewCluster(clk, cp.Client, state.Options{})
	c := pod.NewController(cp.Client, cluster, clk)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "startup"}}
	labels := []string{"startup", "default"}

	// Seen provisionable at +10s, no decision yet.
	cluster.AckPods(p)
	res, err := c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.NotZero(t, res.RequeueAfter, "a waiting pod's gauges are refreshed")
	assert.Equal(t, 10.0, testutil.ToFloat64(metrics.PodsUnboundTimeSeconds.WithLabelValues(labels...)))
	assert.Equal(t, 10.0, testutil.ToFloat64(metrics.PodsUnstartedTimeSeconds.WithLabelValues(labels...)))
	assert.Equal(t, 1, testutil.CollectAndCount(metrics.PodsProvisioningSchedulingUndecidedTimeSeconds))
	assert.Zero(t, testutil.CollectAndCount(metrics.PodsProvisioningUnboundTimeSeconds), "no round found it a place yet")

	// A round finds it a place at +15s.
	decisions := histogramCount(t, metrics.PodsSchedulingDecisionDurationSeconds)
	clk.SetTime(created.Add(15 * time.Second))
	cluster.MarkPodSchedulingDecisions(map[types.NamespacedName]bool{req.NamespacedName: true})
	assert.Equal(t, decisions+1, histogramCount(t, metrics.PodsSchedulingDecisionDurationSeconds))
	clk.SetTime(created.Add(20 * time.Second))
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, testutil.CollectAndCount(metrics.PodsProvisioningSchedulingUndecidedTimeSeconds))
	assert.Equal(t, 5.0, testutil.ToFloat64(metrics.PodsProvisioningUnboundTimeSeconds.WithLabelValues(labels...)))

	// Bound at +30s and Ready at +40s.
	bound, started := histogramCount(t, metrics.PodsBoundDurationSeconds), histogramCount(t, metrics.PodsProvisioningStartupDurationSeconds)
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(p), p))
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(30 * time.Second))},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(40 * time.Second))},
	}
	require.NoError(t, cp.Client.Status().Update(ctx, p))
	clk.SetTime(created.Add(45 * time.Second))
	res, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter, "a started pod is not refreshed")
	assert.Equal(t, bound+1, histogramCount(t, metrics.PodsBoundDurationSeconds))
	assert.Equal(t, started+1, histogramCount(t, metrics.PodsProvisioningStartupDurationSeconds))
	for _, g := range []*prometheus.GaugeVec{metrics.PodsUnboundTimeSeconds, metrics.PodsUnstartedTimeSeconds, metrics.PodsProvisioningUnboundTimeSeconds, metrics.PodsProvisioningUnstartedTimeSeconds} {
		assert.Zero(t, testutil.CollectAndCount(g))
	}
	assert.True(t, cluster.PodSchedulingSuccessTime(req.NamespacedName).IsZero(), "a started pod's times are forgotten")
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, h.Write(m))
	return m.GetHistogram().GetSampleCount()
}
