package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestConsolidationBalanced runs the same workload on two pools that differ
// only in consolidationPolicy. Each may launch c7a.2xlarge or m7a.2xlarge;
// four pods of 1 CPU and 4Gi need more memory than a c7a.2xlarge has, so
// each pool launches one m7a.2xlarge. Scaled to two pods, a c7a.2xlarge
// holds them for 7% less:
//
//   - cons-weou (WhenEmptyOrUnderutilized) takes any saving: the node is
//     replaced by a c7a.2xlarge;
//   - cons-balanced (Balanced, k = 2) weighs the saving (7% of the pool's
//     cost) against the disruption (its only node, 100% of the pool's): the
//     score 0.07 is below 1/k, so the node stays, with Unconsolidatable
//     and ConsolidationRejected events giving the score, and the move
//     counted in karpenter_consolidation_moves_total{decision="rejected"}.
func TestConsolidationBalanced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const weou, balanced = "cons-weou", "cons-balanced"
	types := []string{"c7a.2xlarge", "m7a.2xlarge"}
	applyAll(t, ctx, cp,
		consolidationPool{name: weou, instanceTypes: types}.yaml(),
		consolidationPool{name: balanced, instanceTypes: types, policy: string(v1.ConsolidationPolicyBalanced)}.yaml(),
		consolidationWorkload{name: weou, pool: weou, replicas: 4, cpu: "1", memory: "4Gi"}.yaml(),
		consolidationWorkload{name: balanced, pool: balanced, replicas: 4, cpu: "1", memory: "4Gi"}.yaml(),
	)
	_, metricsPort := startMetricsController(t, cp, "controller", nil)
	ledger := watchClaims(t, ctx, cp)
	ledger.logOnFailure(t, weou, balanced)
	require.Eventually(t, func() bool {
		return settled(ctx, cp, weou, 1, weou, 4) && settled(ctx, cp, balanced, 1, balanced, 4)
	}, 3*time.Minute, time.Second, "each pool should run its 4 pods on one node")
	originals := map[string]map[string]bool{}
	for _, p := range []string{weou, balanced} {
		nc := liveClaims(ctx, cp, p)[0]
		require.Equalf(t, "m7a.2xlarge", nc.Labels["node.kubernetes.io/instance-type"], "%s: 16Gi of pods need an m7a.2xlarge", p)
		originals[p] = map[string]bool{nc.Name: true}
	}
	balancedNode := sortedKeys(originals[balanced])[0]
	start := time.Now()
	scale(t, ctx, cp, weou, 2)
	scale(t, ctx, cp, balanced, 2)

	require.Eventually(t, func() bool {
		claims := liveClaims(ctx, cp, weou)
		return len(claims) == 1 && !originals[weou][claims[0].Name] && settled(ctx, cp, weou, 1, weou, 2)
	}, 2*time.Minute, 500*time.Millisecond, "%s should replace its node", weou)
	t.Logf("%s replaced its node %s after the scale-down", weou, time.Since(start).Round(100*time.Millisecond))
	// Two more passes for the Balanced pool, which saw the same passes.
	neverForPasses(t, ctx, metricsPort, 2, 2*time.Minute,
		func() bool { return ledger.disruptedAny(balancedNode) != "" || len(ledger.pool(balanced)) != 1 }, "%s must keep its node", balanced)
	ledger.halt()
	samples, err := scrapeMetrics(ctx, metricsPort)
	require.NoError(t, err)
	ledger.log(t, weou, balanced)

	t.Run("WhenEmptyOrUnderutilizedReplaces", func(t *testing.T) {
		nc := liveClaims(ctx, cp, weou)[0]
		require.Equal(t, "c7a.2xlarge", nc.Labels["node.kubernetes.io/instance-type"])
		require.Less(t, catalogPrice(t, "c7a.2xlarge", v1.CapacityTypeOnDemand), catalogPrice(t, "m7a.2xlarge", v1.CapacityTypeOnDemand))
		v, _ := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": weou, "reason": "underutilized"})
		require.Equal(t, 1.0, v)
		// Only Balanced pools are scored.
		_, scored := metricValue(samples, "karpenter_consolidation_moves_total", map[string]string{"nodepool": weou})
		require.False(t, scored, "%s is not Balanced and should not be scored", weou)
	})
	t.Run("BalancedRefuses", func(t *testing.T) {
		live := liveClaims(ctx, cp, balanced)
		require.Len(t, live, 1)
		require.Equal(t, balancedNode, live[0].Name)
		require.Equal(t, 2, countPods(readyPods(ctx, cp, balanced)))
		msg := eventWith(ctx, cp, balancedNode, "Unconsolidatable", "< threshold 0.50", "consolidationThreshold: 2")
		require.NotEmptyf(t, msg, "%s should say its score is below the threshold: %v", balancedNode, allEvents(ctx, cp, balancedNode))
		t.Logf("%s: %s", balancedNode, msg)
		require.NotEmptyf(t, eventWith(ctx, cp, balancedNode, "ConsolidationRejected", "< threshold"), "%v", allEvents(ctx, cp, balancedNode))
		v, ok := metricValue(samples, "karpenter_consolidation_moves_total",
			map[string]string{"decision": "rejected", "nodepool": balanced, "policy": string(v1.ConsolidationPolicyBalanced)})
		require.True(t, ok, "karpenter_consolidation_moves_total{decision=rejected,nodepool=%s} should exist", balanced)
		require.GreaterOrEqual(t, v, 1.0)
		_, approved := metricValue(samples, "karpenter_consolidation_moves_total", map[string]string{"decision": "approved", "nodepool": balanced})
		require.False(t, approved)
		_, disrupted := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": balanced})
		require.False(t, disrupted)
	})
}
