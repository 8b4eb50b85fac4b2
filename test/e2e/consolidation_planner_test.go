package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/test/controlplane"
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

// TestConsolidationPlannerDrainDeletionCost runs the planner on a pool of
// c7a.xlarge in one zone (a node in a dearer zone than the cheapest would
// be drained too, however full) whose budget allows no Underutilized
// disruption: six 1.8-CPU pods fill three nodes, two to a node. Scaled to
// four (the test's own pod-deletion-cost picks one pod on each of two
// nodes), the two half-empty nodes could merge, and a merge would pay for
// its eviction, so the keep rule keeps neither; the budget holds them, so
// the planner drains them and the controller gives their pods
// disruption.DrainDeletionCost. Scaled to three, the ReplicaSet controller
// then removes a drained node's pod, not one of the full node's (which
// its own ranking, doubled-up pods first, would pick), and Emptiness
// (its budget 100%) deletes the emptied node: a node less, without an
// eviction.
func TestConsolidationPlannerDrainDeletionCost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "cons-steer"
	applyAll(t, ctx, cp,
		consolidationPool{name: pool, instanceTypes: []string{"c7a.xlarge"}, zones: []string{"test-zone-a"}, underutilizedBudget: "0"}.yaml(),
		consolidationWorkload{name: pool, pool: pool, replicas: 6, cpu: "1800m"}.yaml())
	startMetricsController(t, cp, "controller", nil, "--consolidation-algorithm=planner")
	ledger := watchClaims(t, ctx, cp)
	ledger.logOnFailure(t, pool)

	require.Eventually(t, func() bool { return settled(ctx, cp, pool, 3, pool, 6) }, 3*time.Minute, time.Second,
		"the 6 pods should run two to a node on 3 nodes")
	byNode := readyPods(ctx, cp, pool)
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	full, halves := nodes[0], nodes[1:]
	for _, n := range halves {
		setDeletionCost(t, ctx, cp, byNode[n][0], -5)
	}
	scale(t, ctx, cp, pool, 4)
	require.Eventually(t, func() bool {
		pods := readyPods(ctx, cp, pool)
		return countPods(pods) == 4 && len(pods[full]) == 2 && len(pods[halves[0]]) == 1 && len(pods[halves[1]]) == 1
	}, time.Minute, 500*time.Millisecond, "one pod should leave each of %v", halves)

	costOf := func(p corev1.Pod) string { return p.Annotations[corev1.PodDeletionCost] }
	steered := assert.Eventually(t, func() bool {
		pods := readyPods(ctx, cp, pool)
		for _, n := range halves {
			if len(pods[n]) != 1 || costOf(pods[n][0]) != strconv.Itoa(disruption.DrainDeletionCost) || pods[n][0].Annotations[disruption.DeletionCostMark] == "" {
				return false
			}
		}
		for _, p := range pods[full] {
			if costOf(p) != "" {
				return false
			}
		}
		return true
	}, 90*time.Second, time.Second, "the pods on the drained nodes %v should get the drain deletion cost, those on %s none", halves, full)
	if !steered {
		t.Fatal(dumpSteer(ctx, cp, pool))
	}

	start := time.Now()
	scale(t, ctx, cp, pool, 3)
	require.Eventually(t, func() bool { return settled(ctx, cp, pool, 2, pool, 3) }, 2*time.Minute, time.Second,
		"the scale-down should empty a drained node, which Emptiness deletes")
	pods := readyPods(ctx, cp, pool)
	require.Len(t, pods[full], 2, "the full node keeps both its pods")
	t.Logf("a drained node emptied and deleted %s after the scale-down", time.Since(start).Round(100*time.Millisecond))
}

// dumpSteer lists pool's nodes with their taints and their pods with
// their annotations, for a failure message.
func dumpSteer(ctx context.Context, cp *controlplane.ControlPlane, pool string) string {
	var out string
	for n, ps := range readyPods(ctx, cp, pool) {
		node := &corev1.Node{}
		_ = cp.Client.Get(ctx, client.ObjectKey{Name: n}, node)
		out += fmt.Sprintf("\n%s taints %v", n, node.Spec.Taints)
		for _, p := range ps {
			out += fmt.Sprintf("\n  %s %v", p.Name, p.Annotations)
		}
	}
	return out
}
