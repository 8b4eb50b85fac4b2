package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// e2ePoolLabel is the template label the pools of these failure tests put on
// their nodes, so that each workload lands on its own pool.
const e2ePoolLabel = "e2e.karpenter-go.io/pool"

// failurePoolYAML is an amd64 on-demand NodePool on the default
// KWOKNodeClass whose nodes carry e2ePoolLabel=name; tgp, when not zero,
// is the template's terminationGracePeriod, and extra adds requirements.
// Consolidation is off so that only what a test does removes nodes.
func failurePoolYAML(name string, tgp time.Duration, extra ...poolOpt) string {
	opts := append(amd64OnDemand(true), extra...)
	opts = append(opts, consolidation(v1.ConsolidationPolicyWhenEmpty, "Never"))
	if tgp != 0 {
		opts = append(opts, terminationGracePeriod(tgp))
	}
	return manifest(testPool(name, opts...))
}

// failureDeploymentYAML is a pause Deployment on pool with the given CPU
// request and pod annotations (none when nil).
func failureDeploymentYAML(name, pool string, replicas int, cpu string, annotations map[string]string) string {
	return manifest(pauseDeployment(name, int32(replicas), cpu, "128Mi", onPool(pool), podAnnotations(annotations)))
}

// TestBlockedDrains deletes the nodes of two pools whose
// terminationGracePeriod is 30s: one runs pods behind a PDB with
// maxUnavailable 0, the other pods annotated karpenter.sh/do-not-disrupt.
// Both drains are blocked (FailedDraining, pods not evicted, nodes stay)
// until the deadline; then the pods are deleted by force, the nodes go, and
// the Deployments' replacement pods run on new nodes.
func TestBlockedDrains(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	manifests := []string{
		failurePoolYAML("drain-pdb", 30*time.Second),
		failurePoolYAML("drain-dnd", 30*time.Second),
		failureDeploymentYAML("pdb-app", "drain-pdb", 2, "100m", nil),
		failureDeploymentYAML("dnd-app", "drain-dnd", 2, "100m", map[string]string{v1.DoNotDisruptAnnotationKey: "true"}),
		manifest(podDisruptionBudget("pdb-app", "pdb-app", 0)),
	}
	for _, m := range manifests {
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(m)))
	}
	startController(t, cp, "controller")

	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=pdb-app") == 2 && runningOnOurNodes(ctx, t, cp, "app=dnd-app") == 2
	}, 3*time.Minute, time.Second, "both workloads should run on their pools")

	cases := []struct {
		app, pool, why string
	}{
		{"pdb-app", "drain-pdb", "PodDisruptionBudget"},
		{"dnd-app", "drain-dnd", v1.DoNotDisruptAnnotationKey},
	}
	type victim struct {
		app, why string
		pods     map[types.UID]string // uid -> name
		nodes    []string
		claims   []string
	}
	var victims []*victim
	for _, tc := range cases {
		v := &victim{app: tc.app, why: tc.why, pods: map[types.UID]string{}}
		var pods corev1.PodList
		require.NoError(t, cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": tc.app}))
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			v.pods[p.UID] = p.Name
			nodes[p.Spec.NodeName] = true
		}
		var claims v1.NodeClaimList
		require.NoError(t, cp.Client.List(ctx, &claims, client.MatchingLabels{v1.NodePoolLabelKey: tc.pool}))
		for _, nc := range claims.Items {
			require.Truef(t, nodes[nc.Status.NodeName], "nodeclaim %s of %s hosts none of its pods", nc.Name, tc.pool)
			v.claims = append(v.claims, nc.Name)
			v.nodes = append(v.nodes, nc.Status.NodeName)
		}
		require.Len(t, v.nodes, len(nodes), "every %s pod should run on a NodeClaim of %s", tc.app, tc.pool)
		victims = append(victims, v)
	}

	// Deleting the NodeClaims is how a user retires nodes; it stamps the
	// drain deadline (deletion + terminationGracePeriod) on each.
	for _, v := range victims {
		for _, name := range v.claims {
			require.NoError(t, cp.Client.Delete(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		}
	}
	var deadline time.Time // the earliest of the deadlines
	require.Eventually(t, func() bool {
		deadline = time.Time{}
		for _, v := range victims {
			for _, name := range v.claims {
				nc := &v1.NodeClaim{}
				if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
					return false
				}
				ts, ok := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]
				if !ok {
					return false
				}
				d, err := time.Parse(time.RFC3339, ts)
				if err != nil {
					return false
				}
				if deadline.IsZero() || d.Before(deadline) {
					deadline = d
				}
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "deleted NodeClaims should carry the termination deadline")
	t.Logf("drain deadline %s (in %s)", deadline.Format(time.RFC3339), time.Until(deadline).Round(time.Second))

	// Before the deadline: each drain reports why it is blocked.
	for _, v := range victims {
		require.Eventuallyf(t, func() bool {
			return failedDrainingEvent(ctx, cp, v.nodes, v.why) != ""
		}, 25*time.Second, 250*time.Millisecond, "a FailedDraining event should name %s for %s's node", v.why, v.app)
		t.Logf("%s: %s", v.app, failedDrainingEvent(ctx, cp, v.nodes, v.why))
	}
	require.Greater(t, time.Until(deadline), 3*time.Second, "the drains were observed blocked too late to prove anything")

	// Until just before the deadline nothing is evicted and the nodes stay
	// (cordoned and tainted, but there).
	for time.Until(deadline) > 2*time.Second {
		for _, v := range victims {
			for uid, name := range v.pods {
				p := &corev1.Pod{}
				require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, p), "pod %s went before the deadline", name)
				require.Equal(t, uid, p.UID)
				require.Nilf(t, p.DeletionTimestamp, "pod %s is being deleted %s before the deadline", name, time.Until(deadline))
			}
			for _, n := range v.nodes {
				node := &corev1.Node{}
				require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: n}, node), "node %s went before the deadline", n)
				require.True(t, node.Spec.Unschedulable, "a draining node is cordoned")
			}
		}
		time.Sleep(500 * time.Millisecond)
	}

	// After it: the pods are deleted by force, then the nodes and
	// NodeClaims go.
	for _, v := range victims {
		require.Eventuallyf(t, func() bool {
			for uid, name := range v.pods {
				p := &corev1.Pod{}
				err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, p)
				if err == nil && p.UID == uid {
					return false
				}
			}
			for _, n := range v.nodes {
				if err := cp.Client.Get(ctx, client.ObjectKey{Name: n}, &corev1.Node{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			for _, n := range v.claims {
				if err := cp.Client.Get(ctx, client.ObjectKey{Name: n}, &v1.NodeClaim{}); !apierrors.IsNotFound(err) {
					return false
				}
			}
			return true
		}, 90*time.Second, 250*time.Millisecond, "%s's pods, nodes and NodeClaims should be gone after the deadline", v.app)
		require.False(t, time.Now().Before(deadline.Add(-time.Second)), "%s drained before its deadline", v.app)
	}
	for _, v := range victims {
		require.Truef(t, disruptedEventFor(ctx, cp, v.pods), "%s's pods should have a Disrupted event for the forced deletion", v.app)
	}
	require.Contains(t, controllerLog(t, cp), "deleted pod for the termination deadline")

	// The replacements run on new nodes.
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=pdb-app") == 2 && runningOnOurNodes(ctx, t, cp, "app=dnd-app") == 2
	}, 2*time.Minute, time.Second, "replacement pods should run on new nodes")
}

// failedDrainingEvent returns the message of a FailedDraining event on one
// of nodes that mentions why, or "".
func failedDrainingEvent(ctx context.Context, cp *controlplane.ControlPlane, nodes []string, why string) string {
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		return ""
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind != "Node" || e.Reason != "FailedDraining" || !strings.Contains(e.Message, why) {
			continue
		}
		for _, n := range nodes {
			if e.InvolvedObject.Name == n {
				return e.Message
			}
		}
	}
	return ""
}

// disruptedEventFor reports whether every pod has karpenter's Disrupted
// event (deleted for the node's termination deadline).
func disruptedEventFor(ctx context.Context, cp *controlplane.ControlPlane, pods map[types.UID]string) bool {
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events, client.InNamespace("default")); err != nil {
		return false
	}
	seen := map[types.UID]bool{}
	for _, e := range events.Items {
		if e.Reason == "Disrupted" && e.InvolvedObject.Kind == "Pod" && strings.Contains(e.Message, "terminationTime") {
			seen[e.InvolvedObject.UID] = true
		}
	}
	for uid := range pods {
		if !seen[uid] {
			return false
		}
	}
	return true
}
