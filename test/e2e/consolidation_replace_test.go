package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestConsolidationReplace runs three on-demand WhenEmptyOrUnderutilized
// pools with consolidateAfter 0s at once:
//
//   - cons-replace (c7a.large to c7a.4xlarge): twelve 1-CPU pods launch one
//     c7a.4xlarge; scaled to one pod, the node is replaced by one strictly
//     cheaper NodeClaim and the pod runs there;
//   - cons-merge (m7a.2xlarge, c7a.4xlarge): two 5-CPU pods, created one
//     after the other, run on two m7a.2xlarge nodes; neither pod fits
//     beside the other, so only multi-node consolidation can act: both
//     nodes go for one c7a.4xlarge, cheaper than the two together;
//   - cons-same (c7a.xlarge, c7a.2xlarge): a 1-CPU pod on a c7a.xlarge (B),
//     then a 5-CPU pod on a c7a.2xlarge (A). Replacing both with one
//     c7a.2xlarge would be cheaper than both but is A's own type, and
//     replacing A alone with a c7a.2xlarge saves nothing: the only move is
//     deleting B. A is never replaced and nothing is launched, over the
//     passes that follow, and A's Unconsolidatable event says why.
//
// No NodeClaim of any pool is replaced by one of its own instance type and
// capacity type.
func TestConsolidationReplace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const replace, merge, same = "cons-replace", "cons-merge", "cons-same"
	applyAll(t, ctx, cp,
		consolidationPool{name: replace, instanceTypes: []string{"c7a.large", "c7a.xlarge", "c7a.2xlarge", "c7a.4xlarge"}}.yaml(),
		consolidationPool{name: merge, instanceTypes: []string{"m7a.2xlarge", "c7a.4xlarge"}}.yaml(),
		consolidationPool{name: same, instanceTypes: []string{"c7a.xlarge", "c7a.2xlarge"}}.yaml(),
		consolidationWorkload{name: replace, pool: replace, replicas: 12, cpu: "1"}.yaml(),
		consolidationWorkload{name: merge + "-a", pool: merge, replicas: 1, cpu: "5"}.yaml(),
		consolidationWorkload{name: same + "-small", pool: same, replicas: 1, cpu: "1"}.yaml(),
	)
	_, metricsPort := startMetricsController(t, cp, "controller", nil)
	ledger := watchClaims(t, ctx, cp)
	ledger.logOnFailure(t, replace, merge, same)

	require.Eventually(t, func() bool {
		return settled(ctx, cp, replace, 1, replace, 12) && settled(ctx, cp, merge, 1, merge+"-a", 1) && settled(ctx, cp, same, 1, same+"-small", 1)
	}, 3*time.Minute, time.Second, "12 pods should run on one node of %s, and one pod on one node of each of %s and %s", replace, merge, same)
	big := liveClaims(ctx, cp, replace)[0]
	require.Equal(t, "c7a.4xlarge", big.Labels["node.kubernetes.io/instance-type"], "twelve 1-CPU pods should launch one c7a.4xlarge")
	smallNode := liveClaims(ctx, cp, same)[0]
	require.Equal(t, "c7a.xlarge", smallNode.Labels["node.kubernetes.io/instance-type"])

	// The second pod of each pool does not fit beside the first.
	applyAll(t, ctx, cp,
		consolidationWorkload{name: merge + "-b", pool: merge, replicas: 1, cpu: "5"}.yaml(),
		consolidationWorkload{name: same + "-big", pool: same, replicas: 1, cpu: "5"}.yaml(),
	)
	twoNodes := func(pool, a, b string) bool {
		claims := liveClaims(ctx, cp, pool)
		pa, pb := readyPods(ctx, cp, a), readyPods(ctx, cp, b)
		if len(claims) != 2 || countPods(pa) != 1 || countPods(pb) != 1 {
			return false
		}
		for _, nc := range claims {
			if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) || len(pa[nc.Status.NodeName])+len(pb[nc.Status.NodeName]) != 1 {
				return false
			}
		}
		return true
	}
	require.Eventually(t, func() bool {
		return twoNodes(merge, merge+"-a", merge+"-b") && twoNodes(same, same+"-small", same+"-big")
	}, 2*time.Minute, 200*time.Millisecond, "the second pods should each launch a second node")
	// Nothing is disrupted before the 15 s validation, so these are every
	// pool's nodes before consolidation.
	originals := map[string]map[string]bool{}
	for _, p := range []string{replace, merge, same} {
		claims, err := poolClaims(ctx, cp, p)
		require.NoError(t, err)
		originals[p] = claimNames(claims)
	}
	var nodeA string
	for _, nc := range liveClaims(ctx, cp, same) {
		if nc.Name != smallNode.Name {
			nodeA = nc.Name
			require.Equal(t, "c7a.2xlarge", nc.Labels["node.kubernetes.io/instance-type"])
		}
	}
	for _, nc := range liveClaims(ctx, cp, merge) {
		require.Equal(t, "m7a.2xlarge", nc.Labels["node.kubernetes.io/instance-type"], "a 5-CPU pod alone should launch an m7a.2xlarge")
	}
	start := time.Now()
	scale(t, ctx, cp, replace, 1)

	onlyNew := func(pool string, pods ...string) bool {
		claims := liveClaims(ctx, cp, pool)
		if len(claims) != 1 || originals[pool][claims[0].Name] || !conditionTrue(claims[0].Status.Conditions, v1.ConditionTypeInitialized) {
			return false
		}
		left, err := poolClaims(ctx, cp, pool)
		if err != nil || len(left) != 1 {
			return false
		}
		for _, app := range pods {
			if len(readyPods(ctx, cp, app)[claims[0].Status.NodeName]) != 1 {
				return false
			}
		}
		return true
	}
	// cons-same converges when B is gone and one node runs both pods;
	// which node that is, is NoSameTypeReplacement's question.
	var sameLeft string
	require.Eventually(t, func() bool {
		left := liveClaims(ctx, cp, same)
		b, _ := ledger.record(smallNode.Name)
		if len(left) != 1 || b.gone.IsZero() {
			return false
		}
		sameLeft = left[0].Name
		return onlyNew(replace, replace) && onlyNew(merge, merge+"-a", merge+"-b") &&
			settled(ctx, cp, same, 1, same+"-small", 1) && settled(ctx, cp, same, 1, same+"-big", 1)
	}, 3*time.Minute, 500*time.Millisecond, "%s and %s should each end on one new node, %s on one node", replace, merge, same)
	t.Logf("consolidated %s after scaling %s down", time.Since(start).Round(100*time.Millisecond), replace)

	// The node left stays through two more passes: its only cheaper-looking
	// move is its own type.
	seen := len(ledger.pool(same))
	neverForPasses(t, ctx, metricsPort, 2, 2*time.Minute, func() bool {
		return ledger.disruptedAny(sameLeft) != "" || len(ledger.pool(same)) != seen
	}, "%s must not be replaced and %s must launch nothing more", sameLeft, same)
	ledger.halt()
	samples, err := scrapeMetrics(ctx, metricsPort)
	require.NoError(t, err)
	ledger.log(t, replace, merge, same)

	t.Run("ReplacedByCheaper", func(t *testing.T) {
		nc := liveClaims(ctx, cp, replace)[0]
		oldPrice := catalogPrice(t, "c7a.4xlarge", v1.CapacityTypeOnDemand)
		it := nc.Labels["node.kubernetes.io/instance-type"]
		price := catalogPrice(t, it, nc.Labels[v1.CapacityTypeLabelKey])
		require.Lessf(t, price, oldPrice, "the replacement %s ($%.4f/h) should be strictly cheaper than the c7a.4xlarge ($%.4f/h)", it, price, oldPrice)
		t.Logf("c7a.4xlarge ($%.4f/h) replaced by %s %s ($%.4f/h)", oldPrice, nc.Name, it, price)
		require.Len(t, ledger.pool(replace), 2, "one replacement, launched once")
		v, _ := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": replace, "reason": "underutilized"})
		require.Equal(t, 1.0, v)
		require.GreaterOrEqual(t, metricSum(samples, "karpenter_voluntary_disruption_decisions_total",
			map[string]string{"decision": "replace", "reason": "underutilized"}), 1.0)
		require.NotEmpty(t, eventWith(ctx, cp, nc.Name, "DisruptionLaunching", "Underutilized"), "%v", allEvents(ctx, cp, nc.Name))
		requireNoSameTypeReplacement(t, ledger, replace, originals[replace])
	})
	t.Run("TwoBecomeOne", func(t *testing.T) {
		nc := liveClaims(ctx, cp, merge)[0]
		require.Equal(t, "c7a.4xlarge", nc.Labels["node.kubernetes.io/instance-type"])
		before := 2 * catalogPrice(t, "m7a.2xlarge", v1.CapacityTypeOnDemand)
		after := catalogPrice(t, "c7a.4xlarge", v1.CapacityTypeOnDemand)
		require.Less(t, after, before)
		t.Logf("2 × m7a.2xlarge ($%.4f/h) became %s c7a.4xlarge ($%.4f/h)", before, nc.Name, after)
		require.Len(t, ledger.pool(merge), 3, "two originals and one replacement")
		for name := range originals[merge] {
			r, _ := ledger.record(name)
			require.Falsef(t, r.gone.IsZero(), "%s should be gone", name)
		}
		v, _ := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": merge, "reason": "underutilized"})
		require.Equal(t, 2.0, v)
		// Neither node can go alone (each pod fills more than half of an
		// m7a.2xlarge, and nothing cheaper holds one), so the move was
		// multi-node consolidation's.
		require.GreaterOrEqual(t, metricSum(samples, "karpenter_voluntary_disruption_decisions_total",
			map[string]string{"decision": "replace", "reason": "underutilized", "consolidation_type": "multi"}), 1.0)
		requireNoSameTypeReplacement(t, ledger, merge, originals[merge])
	})
	t.Run("NoSameTypeReplacement", func(t *testing.T) {
		requireNoSameTypeReplacement(t, ledger, same, originals[same])
		require.Equal(t, nodeA, sameLeft, "node A should be the one left")
		require.Len(t, ledger.pool(same), 2, "%s should launch nothing", same)
		a, _ := ledger.record(nodeA)
		require.Truef(t, a.disrupted.IsZero(), "%s must not be disrupted", a)
		b, _ := ledger.record(smallNode.Name)
		require.Falsef(t, b.gone.IsZero(), "%s should be deleted", b)
		v, _ := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": same, "reason": "underutilized"})
		require.Equal(t, 1.0, v)
		msg := eventWith(ctx, cp, nodeA, "Unconsolidatable", "Can't replace with a cheaper node")
		require.NotEmptyf(t, msg, "%s should say it has no cheaper replacement: %v", nodeA, allEvents(ctx, cp, nodeA))
		t.Logf("%s: %s", nodeA, msg)
	})
}
