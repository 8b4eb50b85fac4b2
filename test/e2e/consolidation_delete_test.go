package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestConsolidationDelete runs three pools whose only instance type is
// c7a.xlarge (on-demand, WhenEmptyOrUnderutilized, consolidateAfter 0s),
// each with a Deployment of six 1-CPU pods on two nodes, then scales each
// to one pod per node:
//
//   - cons-delete: one node's pod fits on the other, so consolidation
//     deletes one node (reason underutilized, no replacement: a second
//     c7a.xlarge would save nothing) and both pods run on the node left;
//   - cons-pdb: the same behind a PDB with maxUnavailable 0: both nodes
//     stay, with a DisruptionBlocked event naming the PDB;
//   - cons-dnd: the same with karpenter.sh/do-not-disrupt pods: both nodes
//     stay, with a DisruptionBlocked event naming the pod.
//
// blockedEventWindow bounds the wait for a node's DisruptionBlocked event
// naming its blocker: the recorder's 2-minute dedupe window for the node's
// earlier DisruptionBlocked event, and some slack.
const blockedEventWindow = 2*time.Minute + 30*time.Second

func TestConsolidationDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const del, pdb, dnd = "cons-delete", "cons-pdb", "cons-dnd"
	pools := []string{del, pdb, dnd}
	var manifests []string
	for _, p := range pools {
		w := consolidationWorkload{name: p, pool: p, replicas: 6, cpu: "1"}
		if p == dnd {
			w.annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		}
		manifests = append(manifests, consolidationPool{name: p, instanceTypes: []string{"c7a.xlarge"}}.yaml(), w.yaml())
	}
	manifests = append(manifests, manifest(podDisruptionBudget(pdb, pdb, 0)))
	applyAll(t, ctx, cp, manifests...)
	_, metricsPort := startMetricsController(t, cp, "controller", nil)
	ledger := watchClaims(t, ctx, cp)
	ledger.logOnFailure(t, pools...)

	require.Eventually(t, func() bool {
		for _, p := range pools {
			if !settled(ctx, cp, p, 2, p, 6) {
				return false
			}
		}
		return true
	}, 3*time.Minute, time.Second, "each pool should run its 6 pods on 2 c7a.xlarge nodes")
	originals := map[string]map[string]bool{}
	for _, p := range pools {
		claims, err := poolClaims(ctx, cp, p)
		require.NoError(t, err)
		originals[p] = claimNames(claims)
		keepOnePodPerNode(t, ctx, cp, p)
	}
	start := time.Now()
	for _, p := range pools {
		scale(t, ctx, cp, p, 2)
	}
	for _, p := range []string{pdb, dnd} {
		require.Eventuallyf(t, func() bool {
			pods := readyPods(ctx, cp, p)
			return settled(ctx, cp, p, 2, p, 2) && len(pods) == 2
		}, time.Minute, 500*time.Millisecond, "%s should scale to one pod on each of its 2 nodes", p)
	}

	require.Eventuallyf(t, func() bool {
		return settled(ctx, cp, del, 1, del, 2) && len(liveClaims(ctx, cp, del)) == 1
	}, 2*time.Minute, 500*time.Millisecond, "%s should be consolidated to 1 node running both pods", del)
	t.Logf("%s consolidated to one node %s after the scale-down", del, time.Since(start).Round(100*time.Millisecond))

	// The blocked pools' nodes are candidates in every pass but for their
	// pods: hold through two more passes (10 s apart) once they are
	// Consolidatable.
	blocked := append(sortedKeys(originals[pdb]), sortedKeys(originals[dnd])...)
	require.Eventually(t, func() bool { return consolidatable(ctx, cp, blocked...) }, 30*time.Second, 500*time.Millisecond,
		"the blocked pools' NodeClaims should be Consolidatable (consolidateAfter 0s)")
	neverForPasses(t, ctx, metricsPort, 2, 2*time.Minute, func() bool { return ledger.disruptedAny(blocked...) != "" },
		"nodes whose pods refuse eviction must not be disrupted")
	ledger.halt()
	samples, err := scrapeMetrics(ctx, metricsPort)
	require.NoError(t, err)
	ledger.log(t, pools...)

	t.Run("UnderusedNodeDeleted", func(t *testing.T) {
		live := liveClaims(ctx, cp, del)
		require.Len(t, live, 1)
		require.Truef(t, originals[del][live[0].Name], "the node left (%s) should be an original: a delete launches nothing", live[0].Name)
		for _, r := range ledger.pool(del) {
			require.Truef(t, originals[del][r.name], "%s: no NodeClaim may be launched, saw %s", del, r)
		}
		var deleted string
		for name := range originals[del] {
			if name != live[0].Name {
				deleted = name
			}
		}
		r, ok := ledger.record(deleted)
		require.True(t, ok)
		require.Falsef(t, r.gone.IsZero(), "%s should be gone", deleted)
		pods := readyPods(ctx, cp, del)
		require.Len(t, pods[live[0].Status.NodeName], 2, "both pods should run on the node left")
		require.NotEmptyf(t, eventWith(ctx, cp, deleted, "DisruptionTerminating"), "%s should have a DisruptionTerminating event: %v", deleted, allEvents(ctx, cp, deleted))
		v, ok := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": del, "reason": "underutilized"})
		require.True(t, ok, "karpenter_nodeclaims_disrupted_total{nodepool=%s,reason=underutilized} should exist", del)
		require.Equal(t, 1.0, v)
		_, empty := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": del, "reason": "empty"})
		require.False(t, empty, "no node of %s was empty", del)
		require.GreaterOrEqual(t, metricSum(samples, "karpenter_voluntary_disruption_decisions_total",
			map[string]string{"decision": "delete", "reason": "underutilized"}), 1.0)
		requireNoSameTypeReplacement(t, ledger, del, originals[del])
	})
	keptWithEvent := func(t *testing.T, pool string, parts func(node string) []string) {
		t.Helper()
		live := liveClaims(ctx, cp, pool)
		require.Len(t, live, 2)
		for _, nc := range live {
			require.Truef(t, originals[pool][nc.Name], "%s: %s is not an original", pool, nc.Name)
			node := &corev1.Node{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
			require.False(t, hasTaint(node, v1.DisruptedTaintKey))
			want := parts(node.Name)
			// A node's DisruptionBlocked event is sent once per 2 minutes
			// whatever its message, as upstream's: a node evaluated while
			// still nominated for its pods (or not yet initialized) reports
			// that first, and the blocker named here only once the window
			// has passed. Wait for it, the nodes still kept meanwhile.
			var msg string
			deadline := time.Now().Add(blockedEventWindow)
			for {
				msg = eventWith(ctx, cp, node.Name, "DisruptionBlocked", want...)
				if msg == "" {
					msg = eventWith(ctx, cp, node.Name, "Unconsolidatable", want...)
				}
				if msg != "" || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Second)
				require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
				require.Falsef(t, hasTaint(node, v1.DisruptedTaintKey), "%s: nodes whose pods refuse eviction must not be disrupted", node.Name)
			}
			require.NotEmptyf(t, msg, "%s should have a DisruptionBlocked or Unconsolidatable event containing %q: %v", node.Name, want, allEvents(ctx, cp, node.Name))
			t.Logf("%s: %s", node.Name, msg)
		}
		require.Equal(t, 2, countPods(readyPods(ctx, cp, pool)))
	}
	t.Run("PDBKeepsNode", func(t *testing.T) {
		keptWithEvent(t, pdb, func(string) []string { return []string{fmt.Sprintf("%q", "default/"+pdb)} })
	})
	t.Run("DoNotDisruptKeepsNode", func(t *testing.T) {
		keptWithEvent(t, dnd, func(node string) []string {
			pods := readyPods(ctx, cp, dnd)[node]
			require.Lenf(t, pods, 1, "one %s pod should run on %s", dnd, node)
			return []string{fmt.Sprintf("%q", "default/"+pods[0].Name), v1.DoNotDisruptAnnotationKey}
		})
	})
}
