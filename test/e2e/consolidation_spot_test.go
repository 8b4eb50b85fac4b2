package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// TestConsolidationSpotToSpot runs two spot-only pools, each with twelve
// 1-CPU pods on one c7a.4xlarge, scaled to one pod: a spot node that only
// a cheaper spot node could replace.
//
//   - cons-spot-many (categories c, m, r) has 18 cheaper spot types that hold
//     the pod; cons-spot-few (family c7a) has 3.
//   - With the SpotToSpotConsolidation gate off (the default) neither node
//     is replaced, and both say so in an Unconsolidatable event.
//   - The controller restarted with --feature-gates
//     SpotToSpotConsolidation=true replaces cons-spot-many's node by a spot
//     NodeClaim that may launch as exactly the 15 cheapest of those types
//     (so that it is not walked down one type at a time), and keeps
//     cons-spot-few's, whose event counts its 3 options against the 15
//     required.
func TestConsolidationSpotToSpot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const many, few = "cons-spot-many", "cons-spot-few"
	manyPool := consolidationPool{name: many, capacityType: v1.CapacityTypeSpot, categories: []string{"c", "m", "r"}}
	fewPool := consolidationPool{name: few, capacityType: v1.CapacityTypeSpot, families: []string{"c7a"}}
	applyAll(t, ctx, cp, manyPool.yaml(), fewPool.yaml(),
		consolidationWorkload{name: many, pool: many, replicas: 12, cpu: "1"}.yaml(),
		consolidationWorkload{name: few, pool: few, replicas: 12, cpu: "1"}.yaml(),
	)
	pid, metricsPort := startMetricsController(t, cp, "controller", fastLeaseEnv)
	ledger := watchClaims(t, ctx, cp)
	ledger.logOnFailure(t, many, few)
	require.Eventually(t, func() bool {
		return settled(ctx, cp, many, 1, many, 12) && settled(ctx, cp, few, 1, few, 12)
	}, 3*time.Minute, time.Second, "each pool should run its 12 pods on one node")
	originals := map[string]string{}
	for _, p := range []string{many, few} {
		nc := liveClaims(ctx, cp, p)[0]
		require.Equalf(t, "c7a.4xlarge", nc.Labels[corev1.LabelInstanceTypeStable], "%s: twelve 1-CPU pods should launch one c7a.4xlarge", p)
		require.Equal(t, v1.CapacityTypeSpot, nc.Labels[v1.CapacityTypeLabelKey])
		originals[p] = nc.Name
	}
	// What the pools offer a node holding one of these pods, from the
	// catalog: the test's premise, checked.
	oldPrice := catalogPrice(t, "c7a.4xlarge", v1.CapacityTypeSpot)
	pod := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	manyOptions := cheaperTypes(t, manyPool.categories, nil, v1.CapacityTypeSpot, pod, oldPrice)
	fewOptions := cheaperTypes(t, nil, fewPool.families, v1.CapacityTypeSpot, pod, oldPrice)
	require.GreaterOrEqual(t, len(manyOptions), disruption.MinSpotToSpotInstanceTypes, "%s should offer at least 15 cheaper spot types: %v", many, manyOptions)
	require.Less(t, len(fewOptions), disruption.MinSpotToSpotInstanceTypes, "%s should offer fewer than 15 cheaper spot types: %v", few, fewOptions)
	t.Logf("cheaper spot types: %s %d %v; %s %d %v", many, len(manyOptions), manyOptions, few, len(fewOptions), fewOptions)

	scale(t, ctx, cp, many, 1)
	scale(t, ctx, cp, few, 1)
	require.Eventually(t, func() bool {
		return settled(ctx, cp, many, 1, many, 1) && settled(ctx, cp, few, 1, few, 1) && consolidatable(ctx, cp, originals[many], originals[few])
	}, time.Minute, 500*time.Millisecond, "each pool should scale to one pod and its node become Consolidatable")

	t.Run("GateOff", func(t *testing.T) {
		for _, p := range []string{many, few} {
			require.Eventuallyf(t, func() bool {
				return eventWith(ctx, cp, originals[p], "Unconsolidatable", "SpotToSpotConsolidation is disabled") != ""
			}, 30*time.Second, 500*time.Millisecond, "%s should say spot-to-spot is disabled", originals[p])
		}
		// Two more passes.
		neverForPasses(t, ctx, metricsPort, 2, 2*time.Minute, func() bool {
			return ledger.disruptedAny(originals[many], originals[few]) != "" || len(ledger.pool(many))+len(ledger.pool(few)) != 2
		}, "no spot node may be replaced with the gate off")
	})
	if t.Failed() {
		return
	}

	cp.Kill(pid)
	restarted := time.Now()
	_, metricsPort = startMetricsController(t, cp, "controller-spot-to-spot", fastLeaseEnv, "--feature-gates=SpotToSpotConsolidation=true")
	require.Eventually(t, func() bool {
		claims := liveClaims(ctx, cp, many)
		return len(claims) == 1 && claims[0].Name != originals[many] && settled(ctx, cp, many, 1, many, 1)
	}, 2*time.Minute, 500*time.Millisecond, "with the gate on, %s should replace its node", many)
	t.Logf("%s replaced %s after the restart with the gate on", many, time.Since(restarted).Round(100*time.Millisecond))
	neverForPasses(t, ctx, metricsPort, 2, 2*time.Minute, func() bool { return ledger.disruptedAny(originals[few]) != "" || len(ledger.pool(few)) != 1 },
		"%s has too few cheaper spot types to be replaced", few)
	ledger.halt()
	ledger.log(t, many, few)

	t.Run("GateOnWithAtLeast15Types", func(t *testing.T) {
		nc := liveClaims(ctx, cp, many)[0]
		require.Equal(t, v1.CapacityTypeSpot, nc.Labels[v1.CapacityTypeLabelKey])
		it := nc.Labels[corev1.LabelInstanceTypeStable]
		price := catalogPrice(t, it, v1.CapacityTypeSpot)
		require.Lessf(t, price, oldPrice, "%s ($%.4f/h) should be cheaper than the c7a.4xlarge ($%.4f/h)", it, price, oldPrice)
		r, _ := ledger.record(nc.Name)
		require.ElementsMatch(t, manyOptions[:disruption.MinSpotToSpotInstanceTypes], r.typeOptions,
			"the replacement should launch with the 15 cheapest cheaper types")
		for _, req := range nc.Spec.Requirements {
			if req.Key == v1.CapacityTypeLabelKey {
				require.Equal(t, []string{v1.CapacityTypeSpot}, req.Values)
			}
		}
		requireNoSameTypeReplacement(t, ledger, many, map[string]bool{originals[many]: true})
	})
	t.Run("GateOnWithFewerThan15Types", func(t *testing.T) {
		live := liveClaims(ctx, cp, few)
		require.Len(t, live, 1)
		require.Equal(t, originals[few], live[0].Name)
		want := fmt.Sprintf("requires %d cheaper instance type options than the current candidate to consolidate, got %d", disruption.MinSpotToSpotInstanceTypes, len(fewOptions))
		msg := eventWith(ctx, cp, originals[few], "Unconsolidatable", want)
		require.NotEmptyf(t, msg, "%s should say %q: %v", originals[few], want, allEvents(ctx, cp, originals[few]))
		t.Logf("%s: %s", originals[few], msg)
	})
}
