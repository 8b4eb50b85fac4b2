package status_test

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/status"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// TestConditionSeries follows a NodePool through a condition transition
// and its deletion: the per-kind and kind-less gauges follow the current
// status and reason, a transition is counted with the time the old status
// was held, an event says what changed, and once the pool is gone its
// gauges are deleted and its termination observed.
func TestConditionSeries(t *testing.T) {
	ctx := context.Background()
	start := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(start.Add(30 * time.Second))
	rec := record.NewFakeRecorder(10)
	m := metrics.NewStatusMetrics("nodepool", nil, metrics.StatusBuckets())
	c, err := status.New(cp.Client, cp.Client.Scheme(), status.Options{
		Object: func() client.Object { return &v1.NodePool{} }, Metrics: m, Generic: true, Events: true, Recorder: rec, Clock: clk,
	})
	require.NoError(t, err)

	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "status-test", Finalizers: []string{"test/hold"}}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{
		Spec: v1.NodeClaimTemplateSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}}},
	}}}
	require.NoError(t, cp.Client.Create(ctx, np))
	setReady(t, ctx, np, metav1.ConditionFalse, "NotYet", start)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}}
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)

	group, kind := v1.Group, "NodePool"
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConditionCount.WithLabelValues("", np.Name, "Ready", "False", "NotYet")))
	assert.Equal(t, 30.0, testutil.ToFloat64(m.ConditionCurrentStatusSeconds.WithLabelValues("", np.Name, "Ready", "False", "NotYet")))
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.GenericStatus.ConditionCount.WithLabelValues("", np.Name, "Ready", "False", "NotYet", group, kind)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConditionTransitionsTotal.WithLabelValues("Ready", "False", "NotYet")), "a condition first seen counts as a transition")

	// Ready turns True 100s after it turned False.
	setReady(t, ctx, np, metav1.ConditionTrue, "Ready", start.Add(100*time.Second))
	clk.SetTime(start.Add(110 * time.Second))
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConditionCount.WithLabelValues("", np.Name, "Ready", "True", "Ready")))
	assert.Equal(t, 1, testutil.CollectAndCount(m.ConditionCount))
	assert.Equal(t, 10.0, testutil.ToFloat64(m.ConditionCurrentStatusSeconds.WithLabelValues("", np.Name, "Ready", "True", "Ready")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConditionTransitionsTotal.WithLabelValues("Ready", "True", "Ready")))
	held := histogram(t, m.ConditionTransitionSeconds, "Ready", "False")
	assert.Equal(t, uint64(1), held.GetSampleCount())
	assert.Equal(t, 100.0, held.GetSampleSum())
	assert.Equal(t, "Normal Ready Status condition transitioned, Type: Ready, Status: False -> True, Reason: Ready", <-rec.Events)

	// Deleting: the termination gauge runs while the finalizer holds it.
	require.NoError(t, cp.Client.Delete(ctx, np))
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, 1, testutil.CollectAndCount(m.TerminationCurrentTimeSeconds))
	require.NoError(t, cp.Client.Get(ctx, req.NamespacedName, np))
	np.Finalizers = nil
	require.NoError(t, cp.Client.Update(ctx, np))
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, testutil.CollectAndCount(m.ConditionCount))
	assert.Zero(t, testutil.CollectAndCount(m.ConditionCurrentStatusSeconds))
	assert.Zero(t, testutil.CollectAndCount(m.TerminationCurrentTimeSeconds))
	assert.Equal(t, uint64(1), histogram(t, m.TerminationDurationSeconds).GetSampleCount())
	assert.Equal(t, uint64(1), histogram(t, metrics.GenericStatus.TerminationDurationSeconds, group, kind).GetSampleCount())
	assert.Equal(t, "Normal Finalized Finalized test/hold", <-rec.Events)
}

func setReady(t *testing.T, ctx context.Context, np *v1.NodePool, s metav1.ConditionStatus, reason string, at time.Time) {
	t.Helper()
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(np), np))
	np.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: s, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}
	require.NoError(t, cp.Client.Status().Update(ctx, np))
}

func histogram(t *testing.T, h *prometheus.HistogramVec, labels ...string) *dto.Histogram {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, h.WithLabelValues(labels...).(prometheus.Metric).Write(m))
	return m.GetHistogram()
}
