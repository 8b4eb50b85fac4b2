package provisioning

import (
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// reservations remember where the last round planned each pod, by
// NodeClaim, so that the next round puts the pods back there (through the
// solver's nominations) instead of packing them afresh.
//
// The next round usually comes a second later, while the NodeClaims are
// still launching and are known only by their requested resources: a
// NodeClaim planned for 73 pods is exactly 73 pods big. Packing the same
// pods in another order then strands some of them and buys a NodeClaim
// nobody needs. Pods a ReplicaSet had not created yet are remembered as a
// count per ReplicaSet, and whichever of its pods show up take those places.
//
// Reservations only steer pods; they hold no capacity. A stale one (the pod
// was bound elsewhere, the NodeClaim is gone) is simply not used, and each
// round replaces them all.
type reservations struct {
	mu    sync.Mutex
	byPod map[types.UID]string         // pod → NodeClaim
	slots map[types.UID]map[string]int // ReplicaSet → NodeClaim → expected pods
}

// nominations maps this round's pods to the nodes their reservations point
// at. nodes are the solver's existing nodes; only those backed by a
// NodeClaim can hold reservations.
func (r *reservations) nominations(pods []*corev1.Pod, nodes []*scheduling.ExistingNode) map[types.UID]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byPod) == 0 && len(r.slots) == 0 {
		return nil
	}
	nodeOf := map[string]string{}
	for _, n := range nodes {
		if n.NodeClaim != "" {
			nodeOf[n.NodeClaim] = n.Name
		}
	}
	out := map[types.UID]string{}
	var unreserved []*corev1.Pod
	for _, pod := range pods {
		if node, ok := nodeOf[r.byPod[pod.UID]]; ok && !IsExpected(pod) {
			out[pod.UID] = node
			continue
		}
		unreserved = append(unreserved, pod)
	}
	// The ReplicaSet's places go to its pods in a fixed order: pods that
	// exist, by name, then the expected ones.
	sort.SliceStable(unreserved, func(i, j int) bool {
		a, b := unreserved[i], unreserved[j]
		if ea, eb := IsExpected(a), IsExpected(b); ea != eb {
			return eb
		}
		return a.Name < b.Name
	})
	left := map[types.UID][]slot{}
	for _, pod := range unreserved {
		rs, ok := snapshot.Anticipatable(pod)
		if !ok {
			continue
		}
		places, seen := left[rs]
		if !seen {
			for claim, n := range r.slots[rs] {
				if node, ok := nodeOf[claim]; ok && n > 0 {
					places = append(places, slot{node: node, n: n})
				}
			}
			sort.Slice(places, func(i, j int) bool { return places[i].node < places[j].node })
		}
		if len(places) > 0 {
			out[pod.UID] = places[0].node
			if places[0].n--; places[0].n == 0 {
				places = places[1:]
			}
		}
		left[rs] = places
	}
	return out
}

type slot struct {
	node string
	n    int
}

// record replaces the reservations with this round's plan. claimOf maps the
// solver's existing node names to their NodeClaims; created are the
// NodeClaims made for res.NewNodeClaims (nil where creation failed).
func (r *reservations) record(res *scheduling.Result, claimOf map[string]string, created []*v1.NodeClaim) {
	byPod := map[types.UID]string{}
	slots := map[types.UID]map[string]int{}
	for _, pl := range res.Placements {
		claim := ""
		switch {
		case pl.Node != "":
			claim = claimOf[pl.Node]
		case pl.NodeClaim >= 0 && pl.NodeClaim < len(created) && created[pl.NodeClaim] != nil:
			claim = created[pl.NodeClaim].Name
		}
		if claim == "" {
			continue
		}
		if !IsExpected(pl.Pod) {
			byPod[pl.Pod.UID] = claim
			continue
		}
		if rs, ok := snapshot.Anticipatable(pl.Pod); ok {
			if slots[rs] == nil {
				slots[rs] = map[string]int{}
			}
			slots[rs][claim]++
		}
	}
	r.mu.Lock()
	r.byPod, r.slots = byPod, slots
	r.mu.Unlock()
}
