package disruption

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Class says how a method treats pods that refuse eviction.
type Class string

const (
	// Graceful methods (emptiness, consolidation) never pick a node with a
	// do-not-disrupt pod or a PDB that forbids an eviction.
	Graceful Class = "graceful"
	// Eventual methods (drift) pick such a node anyway when its NodeClaim
	// has a terminationGracePeriod, which bounds how long drain may wait.
	Eventual Class = "eventual"
)

// Candidate is a node a method may disrupt.
type Candidate struct {
	*Node
	NodePool *v1.NodePool
	// Reschedulable are the pods that need another node when this one
	// goes; a node without any is empty.
	Reschedulable []*corev1.Pod
	// DisruptionCost orders candidates: cheaper ones go first.
	DisruptionCost float64
	// PodBlocker is set when a pod (do-not-disrupt or PDB) refuses
	// eviction; such a candidate is only offered to Eventual methods, and
	// only when the NodeClaim has a terminationGracePeriod.
	PodBlocker *Verdict
}

// Empty reports whether no pod needs a new home.
func (c *Candidate) Empty() bool { return len(c.Reschedulable) == 0 }

// candidates is the outcome of candidate discovery over a snapshot.
type candidates struct {
	// all are the nodes that passed the node checks and whose pods do not
	// block, or block only for Graceful methods (see PodBlocker).
	all []*Candidate
	// refused holds, per node name, why it is no candidate at all.
	refused map[string]Verdict
	// warnings are InvalidDoNotDisruptAnnotation verdicts.
	warnings []Verdict
	// looked lists every node looked at, in snapshot order.
	looked []*Node
}

// discover applies upstream's candidate rules to every node.
func discover(snap *Snapshot) *candidates {
	out := &candidates{refused: map[string]Verdict{}}
	pdbs := newPDBIndex(snap.PDBs)
	for _, n := range snap.Nodes {
		out.looked = append(out.looked, n)
		c, refusal, warnings := newCandidate(snap, n, pdbs)
		out.warnings = append(out.warnings, warnings...)
		if refusal != nil {
			out.refused[n.Name()] = *refusal
			continue
		}
		out.all = append(out.all, c)
	}
	return out
}

func newCandidate(snap *Snapshot, n *Node, pdbs *pdbIndex) (*Candidate, *Verdict, []Verdict) {
	v := Verdict{Node: n.Name(), NodeClaim: n.NodeClaimName(), NodePool: n.NodePool}
	refuse := func(k Kind, event bool) (*Candidate, *Verdict, []Verdict) {
		v.Kind, v.Event = k, event
		return nil, &v, nil
	}
	// Upstream publishes DisruptionBlocked only for Karpenter's own nodes,
	// and not for nodes already in the queue (that is progress, not a
	// blocker).
	switch {
	case n.InQueue:
		// In flight already: progress, not a blocker, so no event (and not
		// the "marked for deletion" the queue's own mark would report).
		return refuse(KindInQueue, false)
	case n.NodeClaim == nil:
		return refuse(KindNotManaged, false)
	case n.Node == nil:
		// Upstream's disruption waits while any NodeClaim is unlaunched
		// (its cluster state is not synced then), so its users only ever
		// see this event for a launched NodeClaim whose Node has not
		// registered. Ours runs through launches; a NodeClaim still
		// launching keeps the verdict (for `why`) without the event.
		return refuse(KindNoNode, n.NodeClaim.Status.ProviderID != "")
	case !n.Initialized:
		return refuse(KindNotInitialized, true)
	case n.Deleting || n.MarkedForDeletion:
		return refuse(KindDeleting, true)
	case n.Nominated:
		return refuse(KindNominated, true)
	case n.Node.Annotations[v1.DoNotDisruptAnnotationKey] == "true":
		return refuse(KindNodeDoNotDisrupt, true)
	case n.NodePool == "":
		return refuse(KindNoNodePoolLabel, true)
	}
	np := snap.NodePools[n.NodePool]
	if np == nil {
		return refuse(KindNodePoolNotFound, true)
	}
	c := &Candidate{Node: n, NodePool: np}
	var warnings []Verdict
	for _, p := range sortedPods(n.Pods) {
		if Reschedulable(p) {
			c.Reschedulable = append(c.Reschedulable, p)
		}
		blocked, until, invalid := doNotDisrupt(p, snap.Now)
		if invalid {
			w := v
			w.Kind, w.Pod, w.Value = KindInvalidAnnotation, podKey(p), p.Annotations[v1.DoNotDisruptAnnotationKey]
			warnings = append(warnings, w)
		}
		if c.PodBlocker != nil {
			continue
		}
		if blocked {
			b := v
			b.Kind, b.Pod, b.Until, b.Event = KindPodDoNotDisrupt, podKey(p), until, true
			c.PodBlocker = &b
			continue
		}
		if !evictable(p) {
			continue
		}
		if keys, multiple := pdbs.blocking(p); len(keys) > 0 {
			b := v
			b.Pod, b.Event = podKey(p), true
			if multiple {
				b.Kind, b.PDBs = KindMultiplePDBs, keys
			} else {
				b.Kind, b.PDB = KindPDBBlocked, keys[0]
			}
			c.PodBlocker = &b
		}
	}
	if c.PodBlocker != nil && n.NodeClaim.Spec.TerminationGracePeriod == nil {
		return nil, c.PodBlocker, warnings
	}
	c.DisruptionCost = DisruptionCost(n.NodeClaim, c.Reschedulable, snap.Now)
	return c, nil, warnings
}

// sortedPods orders pods by namespace/name so verdicts are deterministic.
func sortedPods(pods []*corev1.Pod) []*corev1.Pod {
	if sort.SliceIsSorted(pods, func(i, j int) bool { return podKey(pods[i]) < podKey(pods[j]) }) {
		return pods
	}
	out := append([]*corev1.Pod(nil), pods...)
	sort.Slice(out, func(i, j int) bool { return podKey(out[i]) < podKey(out[j]) })
	return out
}
