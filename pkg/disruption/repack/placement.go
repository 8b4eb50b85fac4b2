package repack

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// fit places pods best-fit (least room left), or with spread where the
// most room is left as the kube-scheduler's LeastAllocated does, into the
// free room of the pool's destinations other than exclude: the kept
// nodes, or with anywhere every node but the held ones. With all, it
// gives up at the first pod that fits nowhere; otherwise it places what
// it can. It returns each pod's destination (nil: none) and whether all
// fit.
func (w *worker) fit(pods []*corev1.Pod, exclude map[*machine]bool, all, spread, anywhere bool) ([]*machine, bool) {
	order := make([]int, len(pods))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return podSize(w.p.reqs[pods[order[a]]]) > podSize(w.p.reqs[pods[order[b]]]) })
	out := make([]*machine, len(pods))
	var touched []*machine
	defer func() {
		for _, d := range touched {
			d.tentative = vec{}
		}
	}()
	ok := true
	for _, i := range order {
		pod := pods[i]
		r := w.p.reqs[pod]
		var best *machine
		bestScore := math.Inf(1)
		for di, d := range w.machines {
			if !d.destination || d.removed || exclude[d] || w.held[d] || (!anywhere && !w.keep[d]) {
				continue
			}
			free := d.allocatable.sub(d.used).sub(d.tentative)
			if !free.fits(r) {
				continue
			}
			left := free.sub(r)
			score := left[0]/math.Max(d.allocatable[0], 1) + left[1]/math.Max(d.allocatable[1], 1)
			if spread {
				score = -score
			}
			if score >= bestScore || !w.compat.ok(pod, di) {
				continue
			}
			best, bestScore = d, score
		}
		if best == nil {
			ok = false
			if all {
				return nil, false
			}
			continue
		}
		if best.tentative == (vec{}) {
			touched = append(touched, best)
		}
		best.tentative = best.tentative.add(r)
		out[i] = best
	}
	return out, ok
}

// moveSpreads reports whether the pods a move evicts find room when the
// kube-scheduler places them its own way over the free room and the
// move's new NodeClaims (the cheapest type of each, less DaemonSet
// overhead), and if so keeps the free room left for the next check. The
// new nodes are the emptiest, so the kube-scheduler fills them first with
// whatever pods come, and the holes the plan packed tightly with the rest
// may no longer take what is left.
func (w *worker) moveSpreads(pods []*corev1.Pod, leaving map[*machine]bool, mv *move) bool {
	extra := make([]vec, 0, len(mv.replacements))
	for _, nc := range mv.replacements {
		if len(nc.InstanceTypes) == 0 {
			return false
		}
		room := allocOf(nc.InstanceTypes[0])
		// DaemonSet overhead: the claim's requests less its pods'.
		over := toVec(nc.Requests)
		over[2] = 0
		for _, p := range nc.Pods {
			r := podVec(p)
			over[0], over[1] = over[0]-r[0], over[1]-r[1]
		}
		extra = append(extra, vec{room[0] - math.Max(over[0], 0), room[1] - math.Max(over[1], 0), room[2]})
	}
	free, ok := w.spread(pods, leaving, extra)
	if ok {
		w.spreadRoom = free
	}
	return ok
}

// spread places pods, evicted by deletes of the leaving nodes, the
// kube-scheduler's way: one by one on the node with the most room left
// (LeastAllocated), smallest first and largest first, over the room the
// pass's earlier deletes' pods left as the same spreading placed them. It
// returns the room left after the smallest-first placement and whether
// both placed every pod. Best-fit planning packs holes tightly; spreading
// fills the big holes with small pods first, and a plan only the tight
// packing fits leaves evicted pods pending for a fresh node.
//
// extra is the room of new nodes beside the pool's (any pod may go there);
// the room left returned covers the pool's nodes only.
func (w *worker) spread(pods []*corev1.Pod, leaving map[*machine]bool, extra []vec) ([]vec, bool) {
	if w.spreadRoom == nil {
		w.spreadRoom = make([]vec, len(w.machines))
		for i, d := range w.machines {
			w.spreadRoom[i] = d.allocatable.sub(d.usedBefore)
		}
	}
	place := func(asc bool) ([]vec, bool) {
		order := append([]*corev1.Pod(nil), pods...)
		sort.SliceStable(order, func(i, j int) bool {
			si, sj := podSize(w.p.reqs[order[i]]), podSize(w.p.reqs[order[j]])
			if asc {
				return si < sj
			}
			return si > sj
		})
		free := append([]vec(nil), w.spreadRoom...)
		more := append([]vec(nil), extra...)
		for _, pod := range order {
			r := w.p.reqs[pod]
			best := -1
			bestScore := math.Inf(-1)
			for i, d := range w.machines {
				if !d.destination || d.removed || leaving[d] || w.held[d] || !free[i].fits(r) || !w.compat.ok(pod, i) {
					continue
				}
				left := free[i].sub(r)
				if sc := left[0]/math.Max(d.allocatable[0], 1) + left[1]/math.Max(d.allocatable[1], 1); sc > bestScore {
					best, bestScore = i, sc
				}
			}
			for i := range more {
				if !more[i].fits(r) {
					continue
				}
				// Scored against the room it started with: a new node's
				// allocatable less its DaemonSets.
				left := more[i].sub(r)
				if sc := left[0]/math.Max(extra[i][0], 1) + left[1]/math.Max(extra[i][1], 1); sc > bestScore {
					best, bestScore = len(w.machines)+i, sc
				}
			}
			if best < 0 {
				return nil, false
			}
			if best >= len(w.machines) {
				more[best-len(w.machines)] = more[best-len(w.machines)].sub(r)
				continue
			}
			free[best] = free[best].sub(r)
		}
		return free, true
	}
	for i, d := range w.machines {
		// A node that took pods in an earlier delete's spreading cannot
		// leave by a delete in this pass: those pods would have to move
		// again. A move with replacements (extra) is let through: its
		// candidates are drained while the deletes' pods are placed.
		if extra == nil && leaving[d] && w.spreadRoom[i] != d.allocatable.sub(d.usedBefore) {
			return nil, false
		}
	}
	if _, ok := place(false); !ok {
		return nil, false
	}
	return place(true)
}

// input builds a solve of pods over the destinations (a full view of the
// cluster when a pod's topology depends on pods elsewhere), with pools
// when new NodeClaims are allowed.
func (w *worker) input(pods []*corev1.Pod, dests []*machine, leaving map[*machine]bool, pools []*scheduling.NodePool) (*scheduling.Input, []*corev1.Pod) {
	moved := make([]*corev1.Pod, len(pods))
	full := false
	for i, p := range pods {
		cp := p.DeepCopy()
		cp.Spec.NodeName = ""
		moved[i] = cp
		full = full || topologyBound(p)
	}
	in := &scheduling.Input{Pods: moved, NodePools: pools, Options: w.p.opts.Solver,
		WellKnownLabels: w.p.opts.WellKnownLabels, Unavailable: w.p.opts.Unavailable}
	if len(pools) > 0 {
		in.DaemonSets = w.p.daemons
	}
	if full {
		// Own pool from the working state, other pools as the snapshot
		// has them (other workers own their nodes).
		own := map[*disruption.Node]*machine{}
		for _, m := range w.machines {
			own[m.node] = m
		}
		for _, n := range w.p.snap.Nodes {
			if n.Node == nil {
				continue
			}
			if m, ok := own[n]; ok {
				if m.destination && !m.removed && !leaving[m] {
					in.Nodes = append(in.Nodes, m.existing())
				}
				continue
			}
			if n.NodePool != w.pool && n.Initialized && !n.Deleting && !n.MarkedForDeletion && !n.InQueue {
				in.Nodes = append(in.Nodes, w.topologyNode(n))
			}
		}
		return in, moved
	}
	seen := map[*machine]bool{}
	for _, d := range dests {
		if d != nil && !seen[d] {
			seen[d] = true
			in.Nodes = append(in.Nodes, d.existing())
		}
	}
	sort.Slice(in.Nodes, func(i, j int) bool { return in.Nodes[i].Name < in.Nodes[j].Name })
	return in, moved
}

func (w *worker) solve(in *scheduling.Input) *scheduling.Result {
	w.solves++
	return scheduling.Solve(in)
}

// topologyNode is another pool's node as the worker's solves see it:
// visible for topology, unable to receive (its free room is another
// worker's). Each is prepared once a pass (see machine.existing) and
// shared by the worker's clones, which run one after another.
func (w *worker) topologyNode(n *disruption.Node) *scheduling.ExistingNode {
	if en, ok := w.others[n]; ok {
		return en
	}
	en := scheduling.PrepareNodes([]*scheduling.ExistingNode{{Name: n.Name(), NodeClaim: n.NodeClaimName(), Labels: n.Node.Labels,
		Taints:      append(append([]corev1.Taint(nil), n.Node.Spec.Taints...), snapshot.ExcludedDestinationTaint),
		Allocatable: n.Node.Status.Allocatable, Pods: n.Pods, Initialized: true, Managed: n.NodeClaim != nil}})[0]
	if w.others == nil {
		w.others = map[*disruption.Node]*scheduling.ExistingNode{}
	}
	w.others[n] = en
	return en
}

// apply carries a solved move out in the working state.
func (w *worker) apply(mv *move, res *scheduling.Result) {
	byName := map[string]*machine{}
	for _, m := range w.machines {
		byName[m.name] = m
	}
	for _, pl := range res.Placements {
		if pl.Node == "" {
			continue
		}
		d := byName[pl.Node]
		if d == nil {
			continue
		}
		cp := pl.Pod.DeepCopy()
		cp.Spec.NodeName = d.name
		d.pods = append(d.pods, cp)
		d.used = d.used.add(podVec(cp))
		d.receiver = true
	}
	for _, m := range mv.cands {
		m.removed = true
	}
	w.budget -= len(mv.cands)
	w.moves = append(w.moves, mv)
}
