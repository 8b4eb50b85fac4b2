package status_test

import (
	"context"
	"os"
	"sort"
	"strings"
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
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
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
// status and reason, their "seconds so far" follow the clock between
// reconciles (no periodic pass refreshes them), a transition is counted
// with the time the old status was held, an event says what changed, and
// once the pool is gone its gauges are gone and its termination observed.
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
	res, err := c.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, res, "no periodic pass")

	group, kind := v1.Group, "NodePool"
	notYet := key("", np.Name, "Ready", "False", "NotYet")
	assert.Equal(t, map[string]float64{notYet: 1}, gauges(t, m.ConditionCount))
	assert.Equal(t, map[string]float64{notYet: 30}, gauges(t, m.ConditionCurrentStatusSeconds))
	assert.Equal(t, 1.0, gauges(t, metrics.GenericStatus.ConditionCount)[key("", np.Name, "Ready", "False", "NotYet", group, kind)])
	clk.Step(5 * time.Second)
	assert.Equal(t, map[string]float64{notYet: 35}, gauges(t, m.ConditionCurrentStatusSeconds), "seconds so far at the scrape")
	assert.Equal(t, 35.0, gauges(t, metrics.GenericStatus.ConditionCurrentStatusSeconds)[key("", np.Name, "Ready", "False", "NotYet", group, kind)])
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConditionTransitionsTotal.WithLabelValues("Ready", "False", "NotYet")), "a condition first seen counts as a transition")

	// Ready turns True 100s after it turned False.
	setReady(t, ctx, np, metav1.ConditionTrue, "Ready", start.Add(100*time.Second))
	clk.SetTime(start.Add(110 * time.Second))
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	ready := key("", np.Name, "Ready", "True", "Ready")
	assert.Equal(t, map[string]float64{ready: 1}, gauges(t, m.ConditionCount), "the False series is gone")
	assert.Equal(t, map[string]float64{ready: 10}, gauges(t, m.ConditionCurrentStatusSeconds))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.ConditionTransitionsTotal.WithLabelValues("Ready", "True", "Ready")))
	held := histogram(t, m.ConditionTransitionSeconds, "Ready", "False")
	assert.Equal(t, uint64(1), held.GetSampleCount())
	assert.Equal(t, 100.0, held.GetSampleSum())
	assert.Equal(t, "Normal Ready Status condition transitioned, Type: Ready, Status: False -> True, Reason: Ready", <-rec.Events)

	// Deleting: the termination gauge runs while the finalizer holds it.
	require.NoError(t, cp.Client.Delete(ctx, np))
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)
	clk.Step(7 * time.Second)
	terminating := gauges(t, m.TerminationCurrentTimeSeconds)
	require.Len(t, terminating, 1)
	require.NoError(t, cp.Client.Get(ctx, req.NamespacedName, np))
	assert.Equal(t, clk.Since(np.DeletionTimestamp.Time).Seconds(), terminating[key("", np.Name)])
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

// key names a series by its label values, in the order of the status
// gauges' labels: namespace, name, then type, status and reason, then the
// extra labels.
func key(values ...string) string {
	names := []string{metrics.PodNamespaceLabel, metrics.NameLabel}
	if len(values) > 2 {
		names = append(names, metrics.TypeLabel, metrics.StatusLabel, metrics.ReasonLabel, metrics.GroupLabel, metrics.KindLabel)
	}
	pairs := make([]string, len(values))
	for i, v := range values {
		pairs[i] = names[i] + "=" + v
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// gauges scrapes a gauge family: each series' value by its label values
// (key).
func gauges(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		pb := &dto.Metric{}
		require.NoError(t, m.Write(pb))
		var pairs []string
		for _, l := range pb.GetLabel() {
			pairs = append(pairs, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(pairs)
		out[strings.Join(pairs, ",")] = pb.GetGauge().GetValue()
	}
	return out
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

// TestFinalizedEvents removes a NodePool's finalizers one by one through
// client-go's recorder to the API server: a finalizer removed from an
// object still there is reported on the object; the last one, with the
// object gone, on a nameless object of the kind (an Event in the default
// namespace),
// as upstream's status controller reports it, so that every deletion folds
// into one Event of the kind instead of one Event each.
func TestFinalizedEvents(t *testing.T) {
	ctx := context.Background()
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.Kubernetes.CoreV1().Events("")})
	rec := broadcaster.NewRecorder(cp.Client.Scheme(), corev1.EventSource{Component: "status-finalized-test"})
	c, err := status.New(cp.Client, cp.Client.Scheme(), status.Options{
		Object: func() client.Object { return &v1.NodePool{} }, Metrics: metrics.NewStatusMetrics("finalizedpool", nil, metrics.StatusBuckets()), Recorder: rec,
	})
	require.NoError(t, err)
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "finalized-test", Finalizers: []string{"test/first", "test/last"}}, Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{
		Spec: v1.NodeClaimTemplateSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}}},
	}}}
	require.NoError(t, cp.Client.Create(ctx, np))
	require.NoError(t, cp.Client.Delete(ctx, np))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}}
	_, err = c.Reconcile(ctx, req)
	require.NoError(t, err)

	for _, tc := range []struct {
		keep     []string
		wantName string
		message  string
	}{
		{keep: []string{"test/last"}, wantName: np.Name, message: "Finalized test/first"},
		{keep: nil, wantName: "", message: "Finalized test/last"},
	} {
		require.NoError(t, cp.Client.Get(ctx, req.NamespacedName, np))
		np.Finalizers = tc.keep
		require.NoError(t, cp.Client.Update(ctx, np))
		_, err = c.Reconcile(ctx, req)
		require.NoError(t, err)
		var got []corev1.Event
		require.Eventually(t, func() bool {
			list, err := cp.Kubernetes.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "source=status-finalized-test"})
			require.NoError(t, err)
			got = got[:0]
			for _, e := range list.Items {
				if e.Message == tc.message {
					got = append(got, e)
				}
			}
			return len(got) > 0
		}, 10*time.Second, 100*time.Millisecond, "no event %q", tc.message)
		require.Len(t, got, 1)
		assert.Equal(t, "Finalized", got[0].Reason)
		assert.Equal(t, "NodePool", got[0].InvolvedObject.Kind)
		assert.Equal(t, tc.wantName, got[0].InvolvedObject.Name, tc.message)
	}
}
