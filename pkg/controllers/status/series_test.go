package status_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/status"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

func labelledPool(name, pool string) *v1.NodePool {
	return &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: pool}},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}}},
		}}}
}

func setConditions(t testing.TB, ctx context.Context, np *v1.NodePool, at time.Time, conds ...[3]string) {
	t.Helper()
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(np), np))
	np.Status.Conditions = nil
	for _, c := range conds {
		np.Status.Conditions = append(np.Status.Conditions, metav1.Condition{Type: c[0], Status: metav1.ConditionStatus(c[1]), Reason: c[2], LastTransitionTime: metav1.NewTime(at)})
	}
	require.NoError(t, cp.Client.Status().Update(ctx, np))
}

// TestConditionSeriesFollowChanges: the condition series an object's
// scrapes reuse follow every change of what labels them: a reason that
// changes under the same status, an object label, a condition that goes,
// and scrapes in between see the same series, pedantically valid.
func TestConditionSeriesFollowChanges(t *testing.T) {
	ctx := context.Background()
	at := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(at.Add(10 * time.Second))
	m := metrics.NewStatusMetrics("labelledpool", []string{v1.NodePoolLabelKey}, nil)
	c, err := status.New(cp.Client, cp.Client.Scheme(), status.Options{
		Object: func() client.Object { return &v1.NodePool{} }, Metrics: m, LabelKeys: []string{v1.NodePoolLabelKey}, Clock: clk,
	})
	require.NoError(t, err)
	np := labelledPool("series-follow", "blue")
	require.NoError(t, cp.Client.Create(ctx, np))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}}
	series := func(pool, typ, st, reason string) string {
		return fmt.Sprintf("karpenter_sh_nodepool=%s,name=%s,namespace=,reason=%s,status=%s,type=%s", pool, np.Name, reason, st, typ)
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m.ConditionCount))
	scrape := func() map[string]float64 {
		_, err := reg.Gather()
		require.NoError(t, err)
		return gauges(t, m.ConditionCount)
	}

	for _, step := range []struct {
		name  string
		pool  string
		conds [][3]string
	}{
		{"first seen", "blue", [][3]string{{"Ready", "False", "NotYet"}, {"ValidationSucceeded", "True", "Valid"}}},
		{"the reason alone changes", "blue", [][3]string{{"Ready", "False", "Waiting"}, {"ValidationSucceeded", "True", "Valid"}}},
		{"the object's label changes", "green", [][3]string{{"Ready", "False", "Waiting"}, {"ValidationSucceeded", "True", "Valid"}}},
		{"a condition goes", "green", [][3]string{{"Ready", "True", "Ready"}}},
	} {
		require.NoError(t, cp.Client.Get(ctx, req.NamespacedName, np))
		np.Labels[v1.NodePoolLabelKey] = step.pool
		require.NoError(t, cp.Client.Update(ctx, np))
		setConditions(t, ctx, np, at, step.conds...)
		_, err := c.Reconcile(ctx, req)
		require.NoError(t, err)
		want := map[string]float64{}
		for _, cond := range step.conds {
			want[series(step.pool, cond[0], cond[1], cond[2])] = 1
		}
		assert.Equal(t, want, scrape(), step.name)
		assert.Equal(t, want, scrape(), step.name+", scraped again")
		seconds := gauges(t, m.ConditionCurrentStatusSeconds)
		assert.Len(t, seconds, len(want), step.name)
		for k := range want {
			assert.Equal(t, 10.0, seconds[k], step.name)
		}
	}
}

var benchRuns int

// BenchmarkConditionScrape scrapes the condition families (count and
// seconds) of 200 objects with four conditions each, 1,600 series, through
// a registry.
//
//	go test -run '^$' -bench ConditionScrape -benchmem ./pkg/controllers/status/
func BenchmarkConditionScrape(b *testing.B) {
	ctx := context.Background()
	// Each run (-count) has metrics and objects of its own.
	benchRuns++
	m := metrics.NewStatusMetrics(fmt.Sprintf("benchpool%d", benchRuns), []string{v1.NodePoolLabelKey}, nil)
	c, err := status.New(cp.Client, cp.Client.Scheme(), status.Options{
		Object: func() client.Object { return &v1.NodePool{} }, Metrics: m, LabelKeys: []string{v1.NodePoolLabelKey},
	})
	require.NoError(b, err)
	reg := prometheus.NewRegistry()
	require.NoError(b, reg.Register(m.ConditionCount))
	require.NoError(b, reg.Register(m.ConditionCurrentStatusSeconds))
	now := time.Now()
	for i := range 200 {
		np := labelledPool(fmt.Sprintf("bench-scrape-%d-%d", benchRuns, i), fmt.Sprintf("pool-%d", i%5))
		require.NoError(b, cp.Client.Create(ctx, np))
		setConditions(b, ctx, np, now, [3]string{"Ready", "True", "Ready"}, [3]string{"ValidationSucceeded", "True", "Valid"},
			[3]string{"NodeClassReady", "True", "Ready"}, [3]string{"NodeRegistrationHealthy", "Unknown", "AwaitingReconciliation"})
		_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
		require.NoError(b, err)
	}
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
