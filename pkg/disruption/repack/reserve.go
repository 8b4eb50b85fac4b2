package repack

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// reserve takes room, before any move is planned, for the pods that need
// a node whatever this pass does: the snapshot's pending pods and the
// pods of nodes already leaving (deleting, marked, or in a command in
// flight). Upstream simulates both beside the candidates' pods. Without
// them the planner counts the same free room twice: a pass during a
// scale-up hands consolidation the room provisioning planned for pending
// pods, and a pass while the previous pass's deletes still drain plans
// into the room those deletes' pods are about to take; the pods left over
// then need fresh nodes.
//
// A pod goes to the node with the least room left that fits it, nodes
// that are no candidates first, so that candidates stay free to move. A
// candidate that takes one anyway is not moved this pass (verdict
// Nominated, as upstream treats a node pending pods are headed for).
// Pods that fit nowhere are provisioning's business and take nothing.
func (p *planner) reserve(nodes []*machine, verdicts map[string]disruption.Verdict) {
	var need []*corev1.Pod
	for _, pod := range p.snap.Pending {
		if disruption.Reschedulable(pod) && pod.Spec.NodeName == "" {
			need = append(need, pod)
		}
	}
	for _, n := range p.snap.Nodes {
		if !n.Deleting && !n.MarkedForDeletion && !n.InQueue {
			continue
		}
		for _, pod := range n.Pods {
			if disruption.Reschedulable(pod) {
				need = append(need, pod)
			}
		}
	}
	if len(need) == 0 {
		return
	}
	reqs := make([]vec, len(need))
	for i, pod := range need {
		reqs[i] = podVec(pod)
	}
	order := make([]int, len(need))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return podSize(reqs[order[a]]) > podSize(reqs[order[b]]) })
	for _, i := range order {
		pod, r := need[i], reqs[i]
		var best *machine
		bestTier, bestLeft := 2, 0.0
		for _, m := range nodes {
			if m.node.Deleting || m.node.MarkedForDeletion || m.node.InQueue {
				continue
			}
			free := m.allocatable.sub(m.used)
			if !free.fits(r) || !compatible(pod, m) {
				continue
			}
			tier := 0
			if m.candidate != nil {
				tier = 1
			}
			left := free.sub(r)
			score := left[0]/max(m.allocatable[0], 1) + left[1]/max(m.allocatable[1], 1)
			if tier < bestTier || (tier == bestTier && score < bestLeft) {
				best, bestTier, bestLeft = m, tier, score
			}
		}
		if best == nil {
			continue
		}
		cp := pod.DeepCopy()
		cp.Spec.NodeName = best.name
		p.reqs[cp] = r
		best.pods = append(best.pods, cp)
		best.used = best.used.add(r)
		best.usedBefore = best.used
		if best.candidate != nil {
			verdicts[best.name] = verdict(best.candidate, disruption.KindNominated, nil)
			best.candidate = nil
		}
	}
}

// emptied reports whether m is a Karpenter node with no pod to move that
// Emptiness is free to delete: such a node is no destination, and it is
// drained (Plan.Drain) so that the kube-scheduler, which prefers the
// emptiest node, does not fill it with the pass's evicted pods either.
// Filling it only trades the node a move deletes for one that would have
// gone for nothing: after a scale-up, nodes still nominated for pods that
// bound elsewhere are empty, and filling them with the deletes' pods costs
// evictions that deleting the nearly empty nodes after Emptiness would
// not. A node pending pods may still be headed for (nominated while pods
// are pending) and a node a recent move launched for its pods are not
// emptied.
func (p *planner) emptied(m *machine, launched map[string]time.Time) bool {
	n := m.node
	if n.NodeClaim == nil || n.Node.Annotations[v1.DoNotDisruptAnnotationKey] == "true" || (n.Nominated && len(p.snap.Pending) > 0) {
		return false
	}
	for _, name := range []string{m.name, n.NodeClaimName()} {
		if at, ok := launched[name]; ok && p.now.Before(at.Add(p.opts.CoolDown)) {
			return false
		}
	}
	pool := p.snap.NodePools[n.NodePool]
	if pool == nil || pool.IsStatic() || pool.Spec.Disruption.ConsolidateAfter.Duration == nil {
		return false
	}
	for _, pod := range m.pods {
		if disruption.Reschedulable(pod) {
			return false
		}
	}
	return true
}
