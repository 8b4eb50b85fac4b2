package disruption

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// A snapshot builds the solver's input as provisioning does from cluster
// state: NotReady pools are left out, new NodeClaims carry the NodeClass
// label, limit headroom counts NodeClaims that have not launched, the pods
// of nodes leaving move, and an unlaunched NodeClaim is a destination
// described by its requirements.
func TestViewBuildsAsProvisioning(t *testing.T) {
	its := catalog()
	limited := func(np *v1.NodePool) {
		np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("40")}
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	}
	notReadyPool := func(np *v1.NodePool) { np.Status.Conditions = nil }
	leaving := cNode("leaving", "p", typeNamed(its, "m.8x"), od, withPods(cpuPod("moves", "1")))
	leaving.Deleting = true
	inFlight := &Node{NodeClaim: &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "in-flight", Labels: map[string]string{v1.NodePoolLabelKey: "p"}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m.4x"}}},
			Resources:    v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
		},
	}, NodePool: "p"}
	snap := cSnap(its, []*v1.NodePool{cPool("p", limited), cPool("q", notReadyPool)}, []*Node{
		cNode("a", "p", typeNamed(its, "m.16x"), od), leaving, inFlight,
	})
	built, err := snapshot.Build(context.Background(), snap.View(), snapshot.Request{})
	require.NoError(t, err)
	in := built.Input
	require.Len(t, in.NodePools, 1, "the NotReady pool is left out")
	p := in.NodePools[0]
	assert.Equal(t, "default", p.Labels[v1.NodeClassLabelKey(snap.NodePools["p"].Spec.Template.Spec.NodeClassRef.GroupKind())])
	// 40 cores less a's 16 and the unlaunched NodeClaim's 3 requested; the
	// deleting node no longer counts.
	assert.Equal(t, "21", p.Remaining.Cpu().String())
	var names []string
	for _, n := range in.Nodes {
		names = append(names, n.Name)
		if n.Name == "in-flight" {
			assert.False(t, n.Initialized)
			assert.True(t, n.Managed)
			assert.True(t, n.Requirements.Get(corev1.LabelInstanceTypeStable).Has("m.4x"))
		}
	}
	assert.ElementsMatch(t, []string{"a", "in-flight"}, names)
	require.Len(t, in.Pods, 1)
	assert.Equal(t, "moves", in.Pods[0].Name, "the deleting node's pod is planned for")
}

// Excluded destinations take no moved pod, while other pods may use them;
// Types limits new NodeClaims to the named types.
func TestSimulateExcludesAndRestricts(t *testing.T) {
	its := catalog()
	nodes := []*Node{
		cNode("a", "p", typeNamed(its, "m.8x"), od, withPods(cpuPod("x", "3"))),
		cNode("b", "p", typeNamed(its, "m.8x"), od, withPods(cpuPod("y", "1"))),
	}
	snap := cSnap(its, []*v1.NodePool{cPool("p")}, nodes)
	pending := cpuPod("pending", "1")
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	// Only b has the label: the pending pod can go nowhere else.
	nodes[1].Node.Labels["team"] = "b"
	pending.Spec.NodeSelector = map[string]string{"team": "b"}
	snap.Pending = []*corev1.Pod{pending}
	sim := SolverSimulator{View: snap.View()}
	cands := []*Candidate{{Node: nodes[0], NodePool: snap.NodePools["p"], Reschedulable: nodes[0].Pods}}

	plain, err := sim.Simulate(cands, SimulationOptions{})
	require.NoError(t, err)
	assert.Empty(t, plain.Replacements, "x fits on b")

	excluded, err := sim.Simulate(cands, SimulationOptions{Exclude: map[string]bool{"b": true}})
	require.NoError(t, err)
	require.Len(t, excluded.Replacements, 1, "x may not move to b, so it needs a new node")
	placed := map[string]string{}
	for _, pl := range excluded.Result.Placements {
		placed[pl.Pod.Name] = pl.Node
	}
	assert.Equal(t, "b", placed["pending"], "a pending pod may still use b")

	restricted, err := sim.Simulate(cands, SimulationOptions{Exclude: map[string]bool{"b": true}, Types: map[string]map[string]bool{"p": {"m.16x": true}}})
	require.NoError(t, err)
	require.Len(t, restricted.Replacements, 1)
	assert.Equal(t, []string{"m.16x"}, typeNames(restricted.Replacements[0].InstanceTypes))

	none, err := sim.Simulate(cands, SimulationOptions{Exclude: map[string]bool{"b": true}, Types: map[string]map[string]bool{}})
	require.NoError(t, err)
	assert.Equal(t, []string{"default/x"}, none.Unschedulable, "no type allowed: nothing launches")
}
