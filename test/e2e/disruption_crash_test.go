package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestDisruptionCrashSafety kills the controller (SIGKILL) in the middle of
// a drift command: its candidate is tainted karpenter.sh/disrupted and its
// replacement is launched but held uninitialized (the test withholds the
// removal of the pool's startup taint until the kill). A restarted
// controller must remove the stale taint and DisruptionReason condition
// (the candidate's node is protected with do-not-disrupt meanwhile, so no
// new command can explain their removal), then, once the protection is
// lifted, finish the drift with no instance leaked, no node disrupted twice
// (no replacement is itself replaced, no original deleted twice), no
// original deleted before a replacement is Initialized, and nothing left
// tainted.
func TestDisruptionCrashSafety(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "crash-drift"
	applyAll(t, ctx, cp,
		disruptionPool{name: pool, budgets: []v1.Budget{nodesBudget("1", "", 0)}, startupTaint: true}.yaml(),
		spreadDeploymentYAML(pool, pool, 2, nil),
	)
	remover := &taintRemover{}
	remover.run(ctx, t, cp)
	// registration=0s creates each Node inside Create, so an instance
	// outlives the process that launched it (a delayed one lives in memory).
	faults := "--kwok-faults=registration=0s"
	pid, _ := startMetricsController(t, cp, "controller", fastLeaseEnv, faults)

	require.Eventually(t, func() bool {
		claims, err := poolClaims(ctx, cp, pool)
		if err != nil || len(claims) != 2 || runningOnOurNodes(ctx, t, cp, "app="+pool) != 2 {
			return false
		}
		for _, nc := range claims {
			if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				return false
			}
		}
		return true
	}, 2*time.Minute, time.Second, "2 pods should run on 2 Initialized nodes")

	w := &poolWatch{pool: pool, app: pool, replicas: 2}
	s := startSampler(t, ctx, cp, nil, w)
	remover.setPaused(true)
	setDriftLabel(t, ctx, cp, pool, "2")

	var candidate, replacement string
	require.Eventually(t, func() bool {
		candidate, replacement = "", ""
		claims, err := poolClaims(ctx, cp, pool)
		if err != nil {
			return false
		}
		for _, nc := range claims {
			if w.originals[nc.Name] {
				node := &corev1.Node{}
				if cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node) == nil && hasTaint(node, v1.DisruptedTaintKey) {
					candidate = nc.Name
				}
			} else if conditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) {
				replacement = nc.Name
			}
		}
		return candidate != "" && replacement != ""
	}, 90*time.Second, 100*time.Millisecond, "a drift command should taint a candidate and launch its replacement")
	cp.Kill(pid)
	killed := time.Now()

	// The kill landed inside the command: the replacement is not
	// Initialized (its startup taint is still held) and the candidate is
	// not being deleted yet.
	nc := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: replacement}, nc))
	require.Falsef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized), "replacement %s should still be uninitialized", replacement)
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: candidate}, nc))
	require.Nilf(t, nc.DeletionTimestamp, "candidate %s should not be deleting before its replacement is Initialized", candidate)
	require.Truef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeDisruptionReason), "candidate %s should carry the DisruptionReason condition: %+v", candidate, nc.Status.Conditions)
	t.Logf("killed the controller with %s tainted and replacement %s launched", candidate, replacement)

	// While the controller is down, protect the candidate's node with
	// do-not-disrupt, so the restarted controller cannot simply redo the
	// command: only its start-of-loop cleanup can take the stale taint and
	// condition away.
	candidateNode := nc.Status.NodeName
	annotate := func(value string) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v1.DoNotDisruptAnnotationKey, value)
		require.NoError(t, cp.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: candidateNode}}, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	annotate(`"true"`)
	remover.setPaused(false)
	startMetricsController(t, cp, "controller-restarted", fastLeaseEnv, faults)
	require.True(t, waitUntil(ctx, time.Minute, func() bool {
		node, claim := &corev1.Node{}, &v1.NodeClaim{}
		return cp.Client.Get(ctx, client.ObjectKey{Name: candidateNode}, node) == nil && !hasTaint(node, v1.DisruptedTaintKey) &&
			cp.Client.Get(ctx, client.ObjectKey{Name: candidate}, claim) == nil && !conditionTrue(claim.Status.Conditions, v1.ConditionTypeDisruptionReason)
	}), "the restarted controller should remove the stale %s taint and DisruptionReason condition from %s", v1.DisruptedTaintKey, candidate)
	t.Logf("stale taint and condition removed %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	annotate("null")

	require.True(t, waitUntil(ctx, 2*time.Minute, func() bool {
		return driftDone(ctx, cp, pool, "2", 2, w.originals) && runningOnOurNodes(ctx, t, cp, "app="+pool) == 2
	}), "the drift should complete after the restart")
	t.Logf("drift completed %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	s.halt()
	t.Log(w)

	requireNoReplacementDisrupted(t, w)
	require.Empty(t, w.violations, "an original was deleted before a replacement was Initialized and Ready")
	for name := range w.originals {
		require.Containsf(t, w.disrupted, name, "original %s should have been disrupted", name)
		for _, kind := range []string{"NodeClaim", "Node"} {
			require.LessOrEqualf(t, terminatingCount(ctx, cp, kind, name), 1, "%s %s was disrupted more than once", kind, name)
		}
	}
	nc = &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: replacement}, nc), "the replacement launched before the crash should be kept as capacity")
	require.Nil(t, nc.DeletionTimestamp)
	replacements := 0
	for name := range w.seen {
		if !w.originals[name] {
			replacements++
		}
	}
	t.Logf("%d replacement(s) launched for 2 drifted nodes", replacements)

	// Nothing left behind: no stale taint, no stale condition, and the
	// kwok provider's instances are exactly the NodeClaims.
	var nodes corev1.NodeList
	require.NoError(t, cp.Client.List(ctx, &nodes))
	for _, n := range nodes.Items {
		require.Falsef(t, hasTaint(&n, v1.DisruptedTaintKey), "node %s still carries %s", n.Name, v1.DisruptedTaintKey)
	}
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	for _, c := range claims.Items {
		for _, cond := range c.Status.Conditions {
			require.Falsef(t, cond.Type == v1.ConditionTypeDisruptionReason && cond.Status == metav1.ConditionTrue,
				"NodeClaim %s still has %s=True", c.Name, v1.ConditionTypeDisruptionReason)
		}
	}
	requireInstancesMatchClaims(t, ctx, cp)
}

// terminatingCount is how many times a DisruptionTerminating event was
// recorded for the object (an aggregated event counts its repeats).
func terminatingCount(ctx context.Context, cp *controlplane.ControlPlane, kind, name string) int {
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		return 0
	}
	n := 0
	for _, e := range events.Items {
		if e.Reason == "DisruptionTerminating" && e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			n += max(int(e.Count), 1)
		}
	}
	return n
}
