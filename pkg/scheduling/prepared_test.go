package scheduling

import (
	"fmt"
	"maps"
	"slices"
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

// TestPreparedNodesServeOtherPendingPods: nodes prepared once and solved
// for one pending set after another (other spread, affinity and
// anti-affinity groups over the same running pods, as a disruption pass's
// simulations ask) answer each as the nodes themselves do, also when the
// solves run at once.
func TestPreparedNodesServeOtherPendingPods(t *testing.T) {
	for seed := int64(0); seed < 100; seed++ {
		base := randomSnapshot(seed)
		prepared := PrepareNodes(base.Nodes)
		var ins []*Input
		for k := int64(0); k < 4; k++ {
			in := *base
			in.Pods = randomSnapshot(1000 + seed*4 + k).Pods
			ins = append(ins, &in)
		}
		want := make([]string, len(ins))
		for i, in := range ins {
			want[i] = render(Solve(in))
		}
		got := make([]string, len(ins))
		done := make(chan struct{})
		for i, in := range ins {
			go func() {
				defer func() { done <- struct{}{} }()
				p := *in
				p.Nodes = prepared
				got[i] = render(Solve(&p))
			}()
		}
		for range ins {
			<-done
		}
		for i := range ins {
			if got[i] != want[i] {
				t.Fatalf("seed %d, pending set %d on the prepared nodes:\n%s\nwant:\n%s", seed, i, got[i], want[i])
			}
			p := *ins[i]
			p.Nodes = prepared
			if again := render(Solve(&p)); again != want[i] {
				t.Fatalf("seed %d, pending set %d solved again:\n%s\nwant:\n%s", seed, i, again, want[i])
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

// TestNodeCacheSolvesTheSame prepares successive snapshots through one
// NodeCache, each changing some nodes the way the cluster does between
// rounds (a Node replaced with the same labels, a label changed, a pod
// replaced or gone, a node renamed at registration), and solves each the
// same as its nodes unprepared.
func TestNodeCacheSolvesTheSame(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		base := withInFlight(randomSnapshot(seed), seed)
		cache := &NodeCache{}
		nodes := base.Nodes
		for round := 0; round < 4; round++ {
			next := make([]*ExistingNode, len(nodes))
			for i, n := range nodes {
				cp := *n
				cp.prepared = nil
				switch (int(seed) + i + round) % 6 {
				case 0: // the informer replaced the Node: a new map, same labels
					cp.Labels = maps.Clone(n.Labels)
				case 1: // a label changed
					cp.Labels = maps.Clone(n.Labels)
					if cp.Labels == nil {
						cp.Labels = map[string]string{}
					}
					cp.Labels[LabelZone] = fmt.Sprintf("zone-%d", round)
				case 2: // a pod replaced by an updated copy
					if len(n.Pods) > 0 {
						cp.Pods = slices.Clone(n.Pods)
						p := n.Pods[0].DeepCopy()
						p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
						cp.Pods[0] = p
					}
				case 3: // a pod gone
					if len(n.Pods) > 0 {
						cp.Pods = n.Pods[1:]
					}
				case 4: // registered under another name
					cp.Name = n.Name + "-r"
				}
				next[i] = &cp
			}
			nodes = next
			in := *base
			in.Nodes = nodes
			want := render(Solve(&in))
			prepared := in
			prepared.Nodes = cache.Prepare(nodes)
			if got := render(Solve(&prepared)); got != want {
				t.Fatalf("seed %d, round %d:\n%s\nwant:\n%s", seed, round, got, want)
			}
		}
	}
}

// TestNodeCacheKeepsWhatHolds: the next snapshot's copy of a node keeps the
// requirements derived from labels of the same content and the pod sums of
// the same pods, and derives afresh only the part whose input changed.
func TestNodeCacheKeepsWhatHolds(t *testing.T) {
	cache := &NodeCache{}
	n := mkNode("node-a", "4", "8Gi", map[string]string{LabelZone: "zone-a"}, mkPod("a", "1", "1Gi"))
	first := cache.Prepare([]*ExistingNode{n})[0].prepared

	relabeled := *n
	relabeled.Labels = maps.Clone(n.Labels)
	same := cache.Prepare([]*ExistingNode{&relabeled})[0].prepared
	if mapID(same.reqs) != mapID(first.reqs) || mapID(same.used) != mapID(first.used) {
		t.Fatal("a node replaced with the same labels and pods was derived afresh")
	}

	withPod := relabeled
	withPod.Pods = append(slices.Clone(n.Pods), mkPod("b", "2", "1Gi"))
	more := cache.Prepare([]*ExistingNode{&withPod})[0].prepared
	if mapID(more.reqs) != mapID(first.reqs) {
		t.Fatal("a new pod re-derived the node's requirements")
	}
	if more.count != 2 || more.used[corev1.ResourceCPU] != 3000 {
		t.Fatalf("the pods' sums were not derived afresh: count %d, cpu %d", more.count, more.used[corev1.ResourceCPU])
	}

	moved := withPod
	moved.Labels = map[string]string{LabelZone: "zone-b"}
	other := cache.Prepare([]*ExistingNode{&moved})[0].prepared
	if mapID(other.used) != mapID(more.used) {
		t.Fatal("a label change re-derived the pods' sums")
	}
	if !other.reqs[LabelZone].Has("zone-b") {
		t.Fatal("a label change kept the old requirements")
	}
}
