package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPreparedNodesSolveTheSame: solving prepared nodes, once or many
// times, answers exactly as solving the nodes themselves, on the random
// snapshots (in-flight NodeClaims with requirements, finished pods, pods
// asking for the pods resource included).
func TestPreparedNodesSolveTheSame(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		in := withInFlight(randomSnapshot(seed), seed)
		for i, n := range in.Nodes {
			if len(n.Pods) == 0 {
				continue
			}
			switch (int(seed) + i) % 3 {
			case 0:
				n.Pods[0].Status.Phase = corev1.PodSucceeded
			case 1:
				n.Pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourcePods] = resource.MustParse("3")
			}
		}
		want := render(Solve(in))
		prepared := *in
		prepared.Nodes = PrepareNodes(in.Nodes)
		for round := 0; round < 2; round++ {
			if got := render(Solve(&prepared)); got != want {
				t.Fatalf("seed %d, solve %d of the prepared nodes:\n%s\nwant:\n%s", seed, round+1, got, want)
			}
		}
	}
}

// TestPreparedNodeChangedIsDerivedAfresh: a copy of a prepared node given
// other pods, labels or requirements is solved for what it now holds.
func TestPreparedNodeChangedIsDerivedAfresh(t *testing.T) {
	full := mkNode("node-a", "4", "8Gi", map[string]string{LabelZone: "zone-a"},
		mkPod("big", "3", "1Gi"))
	prepared := PrepareNodes([]*ExistingNode{full})[0]
	pending := mkPod("new", "2", "1Gi")
	solveOn := func(n *ExistingNode) Placement {
		return Solve(&Input{Nodes: []*ExistingNode{n}, Pods: []*corev1.Pod{pending}}).Placements[0]
	}
	if pl := solveOn(prepared); pl.Node != "" {
		t.Fatalf("the prepared node is full, but the pod went to %q", pl.Node)
	}

	emptied := *prepared
	emptied.Pods = nil
	if pl := solveOn(&emptied); pl.Node != "node-a" {
		t.Fatalf("a copy without pods takes the pod, got %+v", pl)
	}

	pending.Spec.NodeSelector = map[string]string{LabelZone: "zone-b"}
	moved := emptied
	moved.Labels = map[string]string{LabelZone: "zone-b"}
	if pl := solveOn(&moved); pl.Node != "node-a" {
		t.Fatalf("a copy with other labels is matched on them, got %+v", pl)
	}
	if pl := solveOn(&emptied); pl.Node != "" {
		t.Fatalf("zone-a does not match the selector, but the pod went to %q", pl.Node)
	}
}
