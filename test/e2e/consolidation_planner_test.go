package e2e_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestConsolidationPlannerSplit runs the repacking planner
// (--consolidation-algorithm=planner) on a pool of c7a.xlarge, 2xlarge
// and 4xlarge (4, 8 and 16 vCPU, priced linearly by vCPU): four 3-CPU
// pods fill one c7a.4xlarge; scaled to three pods (9 CPU) it fits no
// single cheaper type (upstream's replacement would be another
// c7a.4xlarge, which it refuses), but a c7a.2xlarge plus a c7a.xlarge
// ($0.29/h against $0.39/h) run the pods. The planner splits the node,
// and the split survives the 15 s validation.
func TestConsolidationPlannerSplit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "cons-split"
	big, mid, small := "c7a.4xlarge", "c7a.2xlarge", "c7a.xlarge"
	applyAll(t, ctx, cp,
		consolidationPool{name: pool, instanceTypes: []string{small, mid, big}}.yaml(),
		consolidationWorkload{name: pool, pool: pool, replicas: 4, cpu: "3"}.yaml())
	startMetricsController(t, cp, "controller", nil, "--consolidation-algorithm=planner")
	ledger := watchClaims(t, ctx, cp)
	ledger.logOnFailure(t, pool)

	require.Eventually(t, func() bool { return settled(ctx, cp, pool, 1, pool, 4) }, 3*time.Minute, time.Second,
		"the 4 pods should run on one node")
	claims := liveClaims(ctx, cp, pool)
	require.Len(t, claims, 1)
	original := claims[0]
	require.Equal(t, big, original.Labels[corev1.LabelInstanceTypeStable], "12 CPU of pods should launch one %s", big)
	before := catalogPrice(t, big, "on-demand")

	start := time.Now()
	scale(t, ctx, cp, pool, 3)
	require.Eventually(t, func() bool { return settled(ctx, cp, pool, 2, pool, 3) }, 3*time.Minute, time.Second, "the %s should be split into two cheaper nodes running the 3 pods", big)
	t.Logf("split %s after the scale-down", time.Since(start).Round(100*time.Millisecond))

	var types []string
	after := 0.0
	for _, nc := range liveClaims(ctx, cp, pool) {
		require.NotEqual(t, original.Name, nc.Name)
		it := nc.Labels[corev1.LabelInstanceTypeStable]
		types = append(types, it)
		after += catalogPrice(t, it, "on-demand")
	}
	sort.Strings(types)
	require.Equal(t, []string{mid, small}, types, "a %s and a %s should run the pods", mid, small)
	require.Less(t, after, before, "the split should be cheaper")
	if r, ok := ledger.record(original.Name); ok {
		t.Logf("original: %s", r)
	}
}
