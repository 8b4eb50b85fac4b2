package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestNodeRepair stops the simulated kubelet of one node of a three-node
// pool (kwok.StopKubelet): past the 10 s toleration the controller deletes
// its NodeClaim and the static pool gets a new node. Then it stops two of
// the three together: more than 20% (rounded up: 1) are unhealthy, so
// repair is blocked with NodeRepairBlocked and both nodes stay.
func TestNodeRepair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "repair"
	applyAll(t, ctx, cp, staticPoolYAML(pool, 3, 10))
	_, metricsPort := startMetricsController(t, cp, "controller", nil,
		"--feature-gates=StaticCapacity=true,NodeRepair=true", "--kwok-repair-toleration=10s")
	requireStaticSize(t, ctx, cp, pool, 3, time.Second)

	claims, err := poolClaims(ctx, cp, pool)
	require.NoError(t, err)
	victim := claims[0]
	require.NoError(t, kwok.StopKubelet(ctx, cp.Client, victim.Status.NodeName, corev1.ConditionFalse))
	// kwok must not put it back to Ready.
	time.Sleep(3 * time.Second)
	node := &corev1.Node{}
	require.NoError(t, cp.Client.Get(ctx, types.NamespacedName{Name: victim.Status.NodeName}, node))
	require.False(t, nodeReady(node), "kwok keeps its hands off a stopped node")
	require.NotNil(t, readyCondition(node), "StopKubelet writes Ready")
	stoppedAt := readyCondition(node).LastTransitionTime.Time // as the controller sees it: to the second

	gone := waitUntil(ctx, 2*time.Minute, func() bool {
		claims, err := poolClaims(ctx, cp, pool)
		return err == nil && !claimNames(claims)[victim.Name]
	})
	require.True(t, gone, "the unhealthy node's NodeClaim should be deleted")
	require.GreaterOrEqual(t, time.Since(stoppedAt), 10*time.Second, "not before the toleration")
	require.Contains(t, controllerLog(t, cp), `"message":"deleting unhealthy node"`)
	requireStaticSize(t, ctx, cp, pool, 3, time.Second)
	require.True(t, waitUntil(ctx, 30*time.Second, func() bool {
		samples, err := scrapeMetrics(ctx, metricsPort)
		if err != nil {
			return false
		}
		v, ok := metricValue(samples, "karpenter_nodeclaims_unhealthy_disrupted_total", map[string]string{"condition": "ready", "nodepool": pool})
		return ok && v == 1
	}), "karpenter_nodeclaims_unhealthy_disrupted_total{condition=ready} should count the repair")

	// Two of three unhealthy: blocked.
	claims, err = poolClaims(ctx, cp, pool)
	require.NoError(t, err)
	require.Len(t, claims, 3)
	stopped := []string{claims[0].Status.NodeName, claims[1].Status.NodeName}
	trail := watchReady(ctx, cp, stopped)
	require.NoError(t, kwok.StopKubelets(ctx, cp.Client, stopped, corev1.ConditionFalse))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Ready of the stopped nodes:\n%s", trail())
		}
	})
	blocked := waitUntil(ctx, time.Minute, func() bool {
		return len(eventMessages(ctx, cp, "Node", stopped[0], "NodeRepairBlocked")) > 0 ||
			len(eventMessages(ctx, cp, "Node", stopped[1], "NodeRepairBlocked")) > 0
	})
	require.True(t, blocked, "a NodeRepairBlocked event should name a stopped node")
	msgs := append(eventMessages(ctx, cp, "Node", stopped[0], "NodeRepairBlocked"), eventMessages(ctx, cp, "Node", stopped[1], "NodeRepairBlocked")...)
	require.Contains(t, msgs[0], "more than 20% nodes are unhealthy in the nodepool")
	// Both are still there after the controller has looked at them again:
	// the window is two more blocked evaluations (one per stopped node; a
	// blocked repair is retried every minute), not a wall-clock wait that a
	// slow controller would pass without deciding anything.
	evaluations := func() int { return strings.Count(controllerLog(t, cp), `"message":"node repair blocked"`) }
	seen := evaluations()
	require.True(t, waitUntil(ctx, 3*time.Minute, func() bool {
		claims, err := poolClaims(ctx, cp, pool)
		require.NoError(t, err)
		for _, nc := range claims {
			require.Nil(t, nc.DeletionTimestamp, "repair must stay blocked: %s is deleting", nc.Name)
		}
		return evaluations() >= seen+2
	}), "the controller should evaluate the blocked repairs again")
	claims, err = poolClaims(ctx, cp, pool)
	require.NoError(t, err)
	for _, nc := range claims {
		require.Nil(t, nc.DeletionTimestamp, "repair must stay blocked: %s is deleting", nc.Name)
	}
	require.Len(t, claims, 3)
}

// watchReady polls the Ready condition of the named nodes until ctx ends
// and returns a function that prints every change seen, so a failure shows
// whether a stopped node came back.
func watchReady(ctx context.Context, cp *controlplane.ControlPlane, names []string) func() string {
	var mu sync.Mutex
	var lines []string
	last := map[string]string{}
	go func() {
		for ctx.Err() == nil {
			for _, name := range names {
				node := &corev1.Node{}
				state := "gone"
				if err := cp.Client.Get(ctx, types.NamespacedName{Name: name}, node); err == nil {
					state = "no Ready condition"
					if c := readyCondition(node); c != nil {
						state = fmt.Sprintf("%s since %s (%s)", c.Status, c.LastTransitionTime.Format(time.RFC3339), c.Reason)
					}
				} else if !apierrors.IsNotFound(err) {
					continue
				}
				mu.Lock()
				if last[name] != state {
					last[name] = state
					lines = append(lines, fmt.Sprintf("%s %s: %s", time.Now().Format("15:04:05.000"), name, state))
				}
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}
