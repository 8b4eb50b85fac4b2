package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestDisruptionDrift drifts nine pools at once (their template label
// changes) and samples the cluster every 200 ms while the disruption
// controller works through them:
//
//   - drift-one (4 nodes, budget nodes "1", PDB maxUnavailable 1, startup
//     taint held 2 s): every node is replaced, never more than one node is
//     disrupted at once, no original is deleted before a replacement is
//     Initialized and Ready, and no more than one pod is unavailable;
//   - drift-pct (10 nodes, 15%): ceil(1.5) = 2 nodes are disrupted at once,
//     never more;
//   - drift-zero (nodes "0"), drift-reason-zero (nodes "0" for Drifted) and
//     sched-open (nodes "0" during a window open now) stay drifted and
//     untouched, with allowed disruptions 0 and a DisruptionBlocked event;
//     sched-closed (nodes "0" in a window that is closed) is replaced;
//   - dnd-true, dnd-duration (pods annotated karpenter.sh/do-not-disrupt
//     "true" and "1h") and pdb-block (a PDB with maxUnavailable 0) stay
//     drifted and untouched, with a DisruptionBlocked event naming the pod
//     or the PDB (within the 2 minutes an earlier blocker's event holds).
func TestDisruptionDrift(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")

	// A window 12 hours away is closed now whatever the time of day.
	closedHour := time.Now().UTC().Add(12 * time.Hour).Hour()
	type poolCase struct {
		pool     disruptionPool
		replicas int
		podAnn   map[string]string
	}
	cases := []poolCase{
		{disruptionPool{name: "drift-one", budgets: []v1.Budget{nodesBudget("1", "", 0)}, startupTaint: true}, 4, nil},
		{disruptionPool{name: "drift-pct", budgets: []v1.Budget{nodesBudget("15%", "", 0)}}, 10, nil},
		{disruptionPool{name: "drift-zero", budgets: []v1.Budget{nodesBudget("0", "", 0)}}, 1, nil},
		{disruptionPool{name: "drift-reason-zero", budgets: []v1.Budget{nodesBudget("0", "", 0, v1.DisruptionReasonDrifted)}}, 1, nil},
		{disruptionPool{name: "sched-open", budgets: []v1.Budget{nodesBudget("0", "* * * * *", time.Hour)}}, 1, nil},
		{disruptionPool{name: "sched-closed", budgets: []v1.Budget{nodesBudget("0", fmt.Sprintf("0 %d * * *", closedHour), time.Minute)}}, 1, nil},
		{disruptionPool{name: "dnd-true"}, 1, map[string]string{v1.DoNotDisruptAnnotationKey: "true"}},
		{disruptionPool{name: "dnd-duration"}, 1, map[string]string{v1.DoNotDisruptAnnotationKey: "1h"}},
		{disruptionPool{name: "pdb-block"}, 1, nil},
	}
	manifests := []string{manifest(podDisruptionBudget("drift-one-pdb", "drift-one", 1), podDisruptionBudget("block-pdb", "pdb-block", 0))}
	want := 0
	for _, c := range cases {
		manifests = append(manifests, c.pool.yaml(), spreadDeploymentYAML(c.pool.name, c.pool.name, c.replicas, c.podAnn))
		want += c.replicas
	}
	applyAll(t, ctx, cp, manifests...)
	remover := &taintRemover{hold: 2 * time.Second}
	remover.run(ctx, t, cp)
	_, metricsPort := startMetricsController(t, cp, "controller", nil)

	require.Eventually(t, func() bool {
		for _, c := range cases {
			if runningOnOurNodes(ctx, t, cp, "app="+c.pool.name) != c.replicas {
				return false
			}
			claims, err := poolClaims(ctx, cp, c.pool.name)
			if err != nil || len(claims) != c.replicas {
				return false
			}
			for _, nc := range claims {
				if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
					return false
				}
			}
		}
		return true
	}, 3*time.Minute, time.Second, "%d pods should run, one per Initialized node", want)

	watches := map[string]*poolWatch{}
	var list []*poolWatch
	for _, c := range cases {
		w := &poolWatch{pool: c.pool.name, app: c.pool.name, replicas: c.replicas}
		watches[c.pool.name] = w
		list = append(list, w)
	}
	s := startSampler(t, ctx, cp, func() int { return metricsPort }, list...)
	start := time.Now()
	for _, c := range cases {
		setDriftLabel(t, ctx, cp, c.pool.name, "2")
	}

	replaced := map[string]int{"drift-one": 4, "drift-pct": 10, "sched-closed": 1}
	blocked := []string{"drift-zero", "drift-reason-zero", "sched-open", "dnd-true", "dnd-duration", "pdb-block"}
	done := map[string]time.Duration{}
	waitUntil(ctx, 3*time.Minute, func() bool {
		for pool, n := range replaced {
			if _, ok := done[pool]; !ok && driftDone(ctx, cp, pool, "2", n, watches[pool].originals) {
				done[pool] = time.Since(start)
				t.Logf("%s: drift complete after %s", pool, done[pool].Round(100*time.Millisecond))
			}
		}
		return len(done) == len(replaced)
	})
	// The blocked pools were candidates in every pass of the others' drift.
	s.halt()
	samples, err := scrapeMetrics(ctx, metricsPort)
	require.NoError(t, err)
	for _, w := range list {
		t.Log(w)
	}
	t.Logf("%d samples over %s", s.samples, time.Since(start).Round(time.Second))

	t.Run("OneAtATime", func(t *testing.T) {
		w := watches["drift-one"]
		require.Contains(t, done, "drift-one", "every node of drift-one should be replaced")
		require.Equal(t, 1, w.maxDisrupted, "never more than 1 node disrupted at once (budget nodes: \"1\"): %v", w.maxDisruptedNodes)
		require.Empty(t, w.violations, "an original was deleted before its replacement was Initialized and Ready")
		require.LessOrEqual(t, w.maxUnavailable, 1, "the PDB allows 1 unavailable pod")
		requireNoReplacementDisrupted(t, w)
		requireDisruptionEvents(t, ctx, cp, w)
		v, ok := metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"nodepool": "drift-one", "reason": "drifted"})
		require.True(t, ok, "karpenter_nodeclaims_disrupted_total{nodepool=drift-one,reason=drifted} should exist")
		require.GreaterOrEqual(t, v, 4.0)
		requireAllowed(t, w, v1.DisruptionReasonDrifted, func(v float64) bool { return v == 1 }, "1")
	})
	t.Run("PercentageRoundsUp", func(t *testing.T) {
		w := watches["drift-pct"]
		require.Contains(t, done, "drift-pct", "every node of drift-pct should be replaced")
		require.Equal(t, 2, w.maxDisrupted, "15%% of 10 nodes rounds up to 2 disrupted at once: %v", w.maxDisruptedNodes)
		require.Empty(t, w.violations)
		requireNoReplacementDisrupted(t, w)
		// The gauge is the budget's share of the pool's initialized nodes,
		// so a pass that samples the pool mid-replacement can read lower;
		// it must never allow more than 2, and must reach 2.
		requireAllowed(t, w, v1.DisruptionReasonDrifted, func(v float64) bool { return v <= 2 }, "≤ 2")
		require.Contains(t, w.allowed[string(v1.DisruptionReasonDrifted)], 2.0, "15%% of 10 nodes should allow 2")
	})
	t.Run("ScheduleClosedDoesNotBlock", func(t *testing.T) {
		w := watches["sched-closed"]
		require.Contains(t, done, "sched-closed", "a budget whose window is closed must not block")
		requireNoReplacementDisrupted(t, w)
		requireAllowed(t, w, v1.DisruptionReasonDrifted, func(v float64) bool { return v > 0 }, "> 0")
	})
	for _, pool := range blocked {
		t.Run("Blocked/"+pool, func(t *testing.T) {
			w := watches[pool]
			require.Empty(t, w.disrupted, "%s must not be disrupted", pool)
			claims, err := poolClaims(ctx, cp, pool)
			require.NoError(t, err)
			require.Len(t, claims, 1)
			nc := claims[0]
			require.Truef(t, w.originals[nc.Name], "%s's node was replaced", pool)
			require.Truef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted), "%s should be Drifted: %+v", nc.Name, nc.Status.Conditions)
			switch pool {
			case "dnd-true", "dnd-duration", "pdb-block":
				var pods corev1.PodList
				require.NoError(t, cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": pool}))
				require.Len(t, pods.Items, 1)
				parts := []string{pods.Items[0].Name, v1.DoNotDisruptAnnotationKey}
				if pool == "pdb-block" {
					parts = []string{"block-pdb"}
				}
				// A node's DisruptionBlocked goes out once per 2 minutes
				// whatever it says, as upstream's: an earlier blocker (the
				// node nominated for its pod, not yet initialized) holds
				// the slot until it expires.
				var msg string
				require.Eventuallyf(t, func() bool {
					msg = blockedEvent(ctx, cp, nc.Status.NodeName, parts...)
					return msg != ""
				}, 150*time.Second, time.Second, "a DisruptionBlocked event on %s should name %v: %v", nc.Name, parts, allEvents(ctx, cp, nc.Status.NodeName))
				t.Logf("%s: %s", pool, msg)
			default:
				requireAllowed(t, w, v1.DisruptionReasonDrifted, func(v float64) bool { return v == 0 }, "0")
				msgs := eventMessages(ctx, cp, "NodePool", pool, "DisruptionBlocked")
				require.NotEmptyf(t, msgs, "NodePool %s should have a DisruptionBlocked event", pool)
				require.Truef(t, strings.Contains(strings.Join(msgs, "\n"), string(v1.DisruptionReasonDrifted)), "the event should name the reason: %v", msgs)
				t.Logf("%s: %s", pool, msgs[0])
			}
		})
	}
}

// waitUntil polls cond every 500 ms until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// requireNoReplacementDisrupted checks that only originals were disrupted,
// each at most once (a NodeClaim name is never reused).
func requireNoReplacementDisrupted(t *testing.T, w *poolWatch) {
	t.Helper()
	for name := range w.disrupted {
		require.Truef(t, w.originals[name], "%s: replacement %s was itself disrupted", w.pool, name)
	}
}

// requireAllowed checks the karpenter_nodepools_allowed_disruptions values
// the sampler saw for the pool and reason.
func requireAllowed(t *testing.T, w *poolWatch, reason v1.DisruptionReason, ok func(float64) bool, want string) {
	t.Helper()
	seen := w.allowed[string(reason)]
	require.NotEmptyf(t, seen, "%s{nodepool=%q,reason=%q} was never reported", allowedDisruptionsMetric, w.pool, reason)
	for v := range seen {
		require.Truef(t, ok(v), "%s{nodepool=%q,reason=%q} = %v, want %s", allowedDisruptionsMetric, w.pool, reason, v, want)
	}
}

// requireDisruptionEvents checks the orchestration queue's events: each
// replaced original was announced DisruptionTerminating and each
// replacement DisruptionLaunching.
func requireDisruptionEvents(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, w *poolWatch) {
	t.Helper()
	for name := range w.originals {
		got := len(eventMessages(ctx, cp, "NodeClaim", name, "DisruptionTerminating")) + len(eventMessages(ctx, cp, "Node", name, "DisruptionTerminating"))
		require.Positivef(t, got, "%s: no DisruptionTerminating event for %s", w.pool, name)
	}
	for name := range w.seen {
		if w.originals[name] {
			continue
		}
		require.NotEmptyf(t, eventMessages(ctx, cp, "NodeClaim", name, "DisruptionLaunching"), "%s: no DisruptionLaunching event for replacement %s", w.pool, name)
	}
}
