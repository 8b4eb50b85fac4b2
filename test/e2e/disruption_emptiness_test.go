package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// dndDaemonSetYAML runs a do-not-disrupt pause pod on every node of pool.
// A DaemonSet pod does not make a node non-empty, but its annotation still
// blocks the node's disruption.
func dndDaemonSetYAML(name, pool string) string {
	pods := pauseDeployment(name, 0, "50m", "32Mi", onPool(pool), podAnnotations(map[string]string{v1.DoNotDisruptAnnotationKey: "true"}))
	return manifest(&appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: pods.ObjectMeta,
		Spec:       appsv1.DaemonSetSpec{Selector: pods.Spec.Selector, Template: pods.Spec.Template},
	})
}

// TestDisruptionEmptiness empties nodes of four pools with consolidateAfter
// 0s at once:
//
//   - empty-scale (WhenEmptyOrUnderutilized; its only budget is nodes "0"
//     for Drifted, which must not limit Empty): its Deployment scaled 3 → 0
//     leaves no NodeClaim and no Node;
//   - when-empty (WhenEmpty): a Deployment scaled 2 → 1 leaves a half-used
//     node that stays, through the passes that remove the empty nodes and
//     two more;
//   - empty-dnd-node: an empty node annotated karpenter.sh/do-not-disrupt
//     stays;
//   - empty-dnd-ds: a node whose only pod is a DaemonSet pod annotated
//     karpenter.sh/do-not-disrupt stays.
//
// The blocked nodes carry a DisruptionBlocked event naming the annotation
// or the pod.
func TestDisruptionEmptiness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	applyAll(t, ctx, cp,
		disruptionPool{name: "empty-scale", policy: "WhenEmptyOrUnderutilized", consolidateAfter: "0s",
			budgets: []v1.Budget{nodesBudget("0", "", 0, v1.DisruptionReasonDrifted)}}.yaml(),
		spreadDeploymentYAML("empty-scale", "empty-scale", 3, nil),
		disruptionPool{name: "when-empty", consolidateAfter: "0s"}.yaml(),
		failureDeploymentYAML("half", "when-empty", 2, "400m", nil),
		disruptionPool{name: "empty-dnd-node", consolidateAfter: "0s"}.yaml(),
		spreadDeploymentYAML("empty-dnd-node", "empty-dnd-node", 1, nil),
		disruptionPool{name: "empty-dnd-ds", consolidateAfter: "0s"}.yaml(),
		spreadDeploymentYAML("empty-dnd-ds", "empty-dnd-ds", 1, nil),
		dndDaemonSetYAML("dnd-agent", "empty-dnd-ds"),
	)
	_, metricsPort := startMetricsController(t, cp, "controller", nil)

	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=empty-scale") == 3 && runningOnOurNodes(ctx, t, cp, "app=half") == 2 &&
			runningOnOurNodes(ctx, t, cp, "app=empty-dnd-node") == 1 && runningOnOurNodes(ctx, t, cp, "app=empty-dnd-ds") == 1 &&
			runningOnOurNodes(ctx, t, cp, "app=dnd-agent") >= 1
	}, 3*time.Minute, time.Second, "every workload should run on its pool")

	// The node annotation form of do-not-disrupt.
	dndNode := onlyNode(t, ctx, cp, "empty-dnd-node")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1.DoNotDisruptAnnotationKey)
	require.NoError(t, cp.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: dndNode}}, client.RawPatch(types.MergePatchType, []byte(patch))))
	dsNode := onlyNode(t, ctx, cp, "empty-dnd-ds")

	pools := []string{"empty-scale", "when-empty", "empty-dnd-node", "empty-dnd-ds"}
	var list []*poolWatch
	watches := map[string]*poolWatch{}
	for _, p := range pools {
		w := &poolWatch{pool: p}
		list = append(list, w)
		watches[p] = w
	}
	s := startSampler(t, ctx, cp, func() int { return metricsPort }, list...)
	start := time.Now()
	scaleDeployment(t, ctx, cp, "empty-scale", 0)
	scaleDeployment(t, ctx, cp, "half", 1)
	scaleDeployment(t, ctx, cp, "empty-dnd-node", 0)
	scaleDeployment(t, ctx, cp, "empty-dnd-ds", 0)

	// The half-used node is the one the remaining pod runs on.
	var halfNode string
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		if err := cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "half"}); err != nil {
			return false
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live++
				halfNode = p.Spec.NodeName
			}
		}
		return live == 1 && halfNode != ""
	}, 30*time.Second, 200*time.Millisecond, "half should scale to 1")
	node := &corev1.Node{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: halfNode}, node))
	t.Logf("half-used node %s: %s of %s CPU requested", halfNode, "400m", node.Status.Allocatable.Cpu())

	require.Eventually(t, func() bool {
		claims, err := poolClaims(ctx, cp, "empty-scale")
		var nodes corev1.NodeList
		return err == nil && len(claims) == 0 &&
			cp.Client.List(ctx, &nodes, client.MatchingLabels{v1.NodePoolLabelKey: "empty-scale"}) == nil && len(nodes.Items) == 0
	}, 2*time.Minute, 500*time.Millisecond, "scaling empty-scale to 0 should leave no NodeClaim and no Node")
	emptied := time.Since(start)
	t.Logf("empty-scale emptied after %s", emptied.Round(100*time.Millisecond))

	// Two more disruption passes in which the kept nodes must stay
	// untouched.
	kept := map[string]string{"when-empty": halfNode, "empty-dnd-node": dndNode, "empty-dnd-ds": dsNode}
	neverForPasses(t, ctx, metricsPort, 2, 2*time.Minute, func() bool {
		disrupted := false
		s.snapshot(func() {
			for pool, n := range kept {
				if _, ok := watches[pool].disrupted[n]; ok {
					disrupted = true
				}
			}
		})
		return disrupted
	}, "kept nodes must not be disrupted")
	s.halt()
	samples, err := scrapeMetrics(ctx, metricsPort)
	require.NoError(t, err)
	for _, w := range list {
		t.Log(w)
	}

	t.Run("ScaledToZero", func(t *testing.T) {
		w := watches["empty-scale"]
		require.Len(t, w.originals, 3)
		var first, last time.Time
		for name := range w.originals {
			require.Containsf(t, w.disrupted, name, "%s should have gone through disruption", name)
			at := w.disrupted[name]
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
			got := len(eventMessages(ctx, cp, "NodeClaim", name, "DisruptionTerminating")) + len(eventMessages(ctx, cp, "Node", name, "DisruptionTerminating"))
			require.Positivef(t, got, "no DisruptionTerminating event for %s", name)
		}
		// Emptiness batches every empty candidate within budget into one
		// command; log how close together they went.
		t.Logf("the 3 empty nodes were first seen disrupted within %s", last.Sub(first).Round(100*time.Millisecond))
		v, ok := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "empty-scale", "reason": "empty"})
		require.True(t, ok, "karpenter_nodeclaims_disrupted_total{nodepool=empty-scale,reason=empty} should exist")
		require.GreaterOrEqual(t, v, 3.0)
		// The Drifted-only budget of 0 does not apply to Empty.
		requireAllowed(t, w, v1.DisruptionReasonEmpty, func(v float64) bool { return v > 0 }, "> 0")
	})
	t.Run("WhenEmptyKeepsHalfUsed", func(t *testing.T) {
		requireKept(t, ctx, cp, watches["when-empty"], halfNode)
		nc := &v1.NodeClaim{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: halfNode}, nc))
		require.Truef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable),
			"%s should be Consolidatable (consolidateAfter 0s) and kept only because it is not empty: %+v", nc.Name, nc.Status.Conditions)
		require.Equal(t, 1, runningOnOurNodes(ctx, t, cp, "app=half"))
	})
	t.Run("DoNotDisruptNode", func(t *testing.T) {
		requireKept(t, ctx, cp, watches["empty-dnd-node"], dndNode)
		msg := blockedEvent(ctx, cp, dndNode, v1.DoNotDisruptAnnotationKey)
		require.NotEmptyf(t, msg, "a DisruptionBlocked event on %s should name %s", dndNode, v1.DoNotDisruptAnnotationKey)
		t.Log(msg)
	})
	t.Run("DoNotDisruptDaemonSetPod", func(t *testing.T) {
		requireKept(t, ctx, cp, watches["empty-dnd-ds"], dsNode)
		var pods corev1.PodList
		require.NoError(t, cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "dnd-agent"}))
		var agent string
		for _, p := range pods.Items {
			if p.Spec.NodeName == dsNode {
				agent = p.Name
			}
		}
		require.NotEmpty(t, agent, "the DaemonSet pod should run on %s", dsNode)
		require.Zero(t, runningOnOurNodes(ctx, t, cp, "app=empty-dnd-ds"), "the node should be empty but for the DaemonSet pod")
		msg := blockedEvent(ctx, cp, dsNode, agent, v1.DoNotDisruptAnnotationKey)
		require.NotEmptyf(t, msg, "a DisruptionBlocked event on %s should name pod %s", dsNode, agent)
		t.Log(msg)
	})
}

// onlyNode returns the name of the pool's single node.
func onlyNode(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, pool string) string {
	t.Helper()
	claims, err := poolClaims(ctx, cp, pool)
	require.NoError(t, err)
	require.Lenf(t, claims, 1, "%s should have one node", pool)
	require.NotEmpty(t, claims[0].Status.NodeName)
	return claims[0].Status.NodeName
}

// requireKept checks that node was never disrupted and still exists.
func requireKept(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, w *poolWatch, node string) {
	t.Helper()
	require.NotContainsf(t, w.disrupted, node, "%s: %s must not be disrupted", w.pool, node)
	n := &corev1.Node{}
	err := cp.Client.Get(ctx, client.ObjectKey{Name: node}, n)
	require.Falsef(t, apierrors.IsNotFound(err), "%s: %s is gone", w.pool, node)
	require.NoError(t, err)
	require.Nil(t, n.DeletionTimestamp)
	require.False(t, hasTaint(n, v1.DisruptedTaintKey))
}
