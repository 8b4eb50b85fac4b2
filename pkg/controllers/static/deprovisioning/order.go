package deprovisioning

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// rank orders removal candidates: lower ranks go first.
type rank int

const (
	rankUnlaunched   rank = iota // no instance yet: nothing to drain
	rankEmpty                    // only DaemonSet (or no) pods
	rankPods                     // reschedulable pods, by disruption cost
	rankDoNotDisrupt             // a pod asked not to be disrupted
)

// candidate is one NodeClaim that may be removed.
type candidate struct {
	nodeClaim *v1.NodeClaim
	rank      rank
	cost      float64
}

// Surplus picks n NodeClaims of the pool to remove, in upstream's order:
// unlaunched first, then empty nodes, then by disruption cost (rescheduling
// cost scaled by remaining lifetime), nodes with do-not-disrupt pods last.
// NodeClaims being deleted or marked for deletion (a disruption command is
// replacing them) are not candidates. Ties go to the oldest NodeClaim,
// then the name, so the choice is stable.
func Surplus(nodes []*state.StateNode, pool string, n int, now time.Time) []*v1.NodeClaim {
	if n <= 0 {
		return nil
	}
	var cs []candidate
	for _, sn := range nodes {
		nc := sn.NodeClaim
		if nc == nil || nc.Labels[v1.NodePoolLabelKey] != pool || sn.Deleting() {
			continue
		}
		cs = append(cs, classify(sn, now))
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		if !a.nodeClaim.CreationTimestamp.Equal(&b.nodeClaim.CreationTimestamp) {
			return a.nodeClaim.CreationTimestamp.Before(&b.nodeClaim.CreationTimestamp)
		}
		return a.nodeClaim.Name < b.nodeClaim.Name
	})
	out := make([]*v1.NodeClaim, 0, min(n, len(cs)))
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.nodeClaim)
	}
	return out
}

func classify(sn *state.StateNode, now time.Time) candidate {
	c := candidate{nodeClaim: sn.NodeClaim}
	if sn.NodeClaim.Status.ProviderID == "" {
		c.rank = rankUnlaunched
		return c
	}
	var reschedulable []*corev1.Pod
	protected := sn.Node != nil && sn.Node.Annotations[v1.DoNotDisruptAnnotationKey] == "true"
	for _, p := range sn.Pods {
		if p == nil {
			continue
		}
		if doNotDisrupt(p, now) {
			protected = true
		}
		if disruption.Reschedulable(p) {
			reschedulable = append(reschedulable, p)
		}
	}
	switch {
	case protected:
		c.rank = rankDoNotDisrupt
	case len(reschedulable) == 0:
		c.rank = rankEmpty
	default:
		c.rank = rankPods
	}
	c.cost = disruption.DisruptionCost(sn.NodeClaim, reschedulable, now)
	return c
}

// doNotDisrupt reports an active karpenter.sh/do-not-disrupt on a running
// pod: "true", or a duration the pod is younger than. Invalid values are
// ignored, as the disruption controller (which reports them) does.
func doNotDisrupt(p *corev1.Pod, now time.Time) bool {
	v, ok := p.Annotations[v1.DoNotDisruptAnnotationKey]
	if !ok || !p.DeletionTimestamp.IsZero() || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	return now.Before(p.CreationTimestamp.Add(d))
}
