package scheduling

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// podClass groups pods that are identical for scheduling: same namespace,
// labels, requests, node constraints, tolerations, topology and volumes. All
// derived data is computed once per class.
type podClass struct {
	id   int
	key  string
	rep  *corev1.Pod
	reqs vec
	// requests as an API list, for messages and NodeClaim totals
	requestList corev1.ResourceList
	ports       []hostPort
	tier        int
	size        float64 // dominant resource, for queue order
	err         error   // the class cannot be scheduled at all (invalid spec)

	nodeSelector  Requirements
	requiredTerms []Requirements
	preferred     []weightedReqs
	volumeReqs    Requirements
	// topology terms, resolved to group ids when the topology is built
	spreads      []*spreadTerm
	affinity     []*podTerm
	antiAffinity []*podTerm
	matches      []int32 // groups whose selector selects this class's pods
	ownsAnti     []int32 // required anti-affinity groups (block matching pods)
	level0       *classLevel
	volDrivers   map[string]int    // CSI volumes attached, per driver
	volumeFrom   map[string]string // volumeReqs key -> the claim that set it
}

type weightedReqs struct {
	weight int32
	reqs   Requirements
}

type spreadTerm struct {
	group          int32
	scheduleAnyway bool
}

type podTerm struct {
	group    int32
	required bool
	weight   int32
}

// classLevel is a class after some preferences were relaxed. Levels form a
// chain (level0 → next → …); each is computed once.
type classLevel struct {
	class *podClass
	level int
	// state of relaxation
	termIdx      int // which required OR-term is in force
	prefNode     []weightedReqs
	spreads      []*spreadTerm
	affinity     []*podTerm
	antiAffinity []*podTerm
	tolPrefer    bool
	relaxed      []string

	reqs    Requirements // nodeSelector ∩ required term ∩ heaviest preferred ∩ volumes
	reqsErr error
	// dead marks NodeClaims that can never take a pod of this level
	// (monotone reasons only), so the next identical pod skips them.
	dead      []uint64
	deadNodes []uint64 // the same for existing nodes
	// wasteful marks NodeClaims that would have to grow into a dearer kind
	// of machine to take a pod of this level (wastefulGrowth).
	wasteful []uint64
	next     *classLevel
	done     bool // next was computed (nil = nothing left to relax)
}

func (cl *classLevel) isDead(i int) bool {
	w := i >> 6
	return w < len(cl.dead) && cl.dead[w]&(1<<(uint(i)&63)) != 0
}

func (cl *classLevel) markDead(i int) {
	w := i >> 6
	for len(cl.dead) <= w {
		cl.dead = append(cl.dead, 0)
	}
	cl.dead[w] |= 1 << (uint(i) & 63)
}

// isWasteful: NodeClaim i could take the class only by growing into a
// dearer kind of machine (wastefulGrowth).
func (cl *classLevel) isWasteful(i int) bool {
	w := i >> 6
	return w < len(cl.wasteful) && cl.wasteful[w]&(1<<(uint(i)&63)) != 0
}

func (cl *classLevel) markWasteful(i int) {
	w := i >> 6
	for len(cl.wasteful) <= w {
		cl.wasteful = append(cl.wasteful, 0)
	}
	cl.wasteful[w] |= 1 << (uint(i) & 63)
}

func (cl *classLevel) isDeadNode(i int) bool {
	w := i >> 6
	return w < len(cl.deadNodes) && cl.deadNodes[w]&(1<<(uint(i)&63)) != 0
}

func (cl *classLevel) markDeadNode(i int) {
	w := i >> 6
	for len(cl.deadNodes) <= w {
		cl.deadNodes = append(cl.deadNodes, 0)
	}
	cl.deadNodes[w] |= 1 << (uint(i) & 63)
}

// classKey is a canonical encoding of everything scheduling looks at.
type classKeyFields struct {
	NS          string
	Labels      map[string]string
	Containers  []keyContainer
	Init        []keyContainer
	Overhead    corev1.ResourceList               `json:",omitempty"`
	NodeSel     map[string]string                 `json:",omitempty"`
	Affinity    *corev1.Affinity                  `json:",omitempty"`
	Tolerations []corev1.Toleration               `json:",omitempty"`
	Spread      []corev1.TopologySpreadConstraint `json:",omitempty"`
	Claims      []string                          `json:",omitempty"`
	Node        string                            `json:",omitempty"`
}

type keyContainer struct {
	R       corev1.ResourceRequirements
	Ports   []corev1.ContainerPort         `json:",omitempty"`
	Restart *corev1.ContainerRestartPolicy `json:",omitempty"`
}

func classKey(pod *corev1.Pod) string {
	f := classKeyFields{
		NS: pod.Namespace, Labels: pod.Labels, Overhead: pod.Spec.Overhead, NodeSel: pod.Spec.NodeSelector,
		Affinity: pod.Spec.Affinity, Tolerations: pod.Spec.Tolerations, Spread: pod.Spec.TopologySpreadConstraints,
		Node: pod.Spec.NodeName,
	}
	for _, c := range pod.Spec.Containers {
		f.Containers = append(f.Containers, keyContainer{R: c.Resources, Ports: c.Ports})
	}
	for _, c := range pod.Spec.InitContainers {
		f.Init = append(f.Init, keyContainer{R: c.Resources, Ports: c.Ports, Restart: c.RestartPolicy})
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			f.Claims = append(f.Claims, v.PersistentVolumeClaim.ClaimName)
		} else if v.Ephemeral != nil {
			f.Claims = append(f.Claims, "ephemeral:"+pod.Name+"-"+v.Name)
		}
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// parseNodeConstraints fills the class's node requirements from the pod.
func (c *podClass) parseNodeConstraints(pod *corev1.Pod) error {
	c.nodeSelector = make(Requirements, len(pod.Spec.NodeSelector))
	keys := make([]string, 0, len(pod.Spec.NodeSelector))
	for k := range pod.Spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.nodeSelector.Add(NewRequirement(k, OpIn, pod.Spec.NodeSelector[k]))
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil {
		return nil
	}
	if r := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		for i, term := range r.NodeSelectorTerms {
			if len(term.MatchFields) > 0 {
				return fmt.Errorf("node affinity term %d uses matchFields, which is not supported", i)
			}
			reqs, err := RequirementsFromNodeSelector(term.MatchExpressions)
			if err != nil {
				return fmt.Errorf("node affinity term %d: %w", i, err)
			}
			c.requiredTerms = append(c.requiredTerms, reqs)
		}
	}
	for i, p := range aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		reqs, err := RequirementsFromNodeSelector(p.Preference.MatchExpressions)
		if err != nil {
			return fmt.Errorf("preferred node affinity term %d: %w", i, err)
		}
		c.preferred = append(c.preferred, weightedReqs{weight: p.Weight, reqs: reqs})
	}
	// heaviest first; stable so equal weights keep the pod's order
	sort.SliceStable(c.preferred, func(i, j int) bool { return c.preferred[i].weight > c.preferred[j].weight })
	return nil
}

// buildLevel0 sets up the strictest form of the class.
func (c *podClass) buildLevel0(policy PreferencePolicy) {
	cl := &classLevel{class: c}
	ignore := policy == PreferencesIgnore
	for _, s := range c.spreads {
		if !(ignore && s.scheduleAnyway) {
			cl.spreads = append(cl.spreads, s)
		}
	}
	for _, t := range c.affinity {
		if t.required || !ignore {
			cl.affinity = append(cl.affinity, t)
		}
	}
	for _, t := range c.antiAffinity {
		if t.required || !ignore {
			cl.antiAffinity = append(cl.antiAffinity, t)
		}
	}
	sortTerms(cl.affinity)
	sortTerms(cl.antiAffinity)
	if !ignore {
		cl.prefNode = c.preferred
	}
	cl.tolPrefer = ignore
	cl.computeReqs()
	c.level0 = cl
}

// sortTerms puts required terms first, then preferred by weight descending.
func sortTerms(ts []*podTerm) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].required != ts[j].required {
			return ts[i].required
		}
		return ts[i].weight > ts[j].weight
	})
}

func (cl *classLevel) computeReqs() {
	c := cl.class
	r := c.nodeSelector.Copy()
	if cl.termIdx < len(c.requiredTerms) {
		for _, k := range c.requiredTerms[cl.termIdx].Keys() {
			r.Add(c.requiredTerms[cl.termIdx][k])
		}
	}
	if len(cl.prefNode) > 0 {
		for _, k := range cl.prefNode[0].reqs.Keys() {
			r.Add(cl.prefNode[0].reqs[k])
		}
	}
	for _, k := range c.volumeReqs.Keys() {
		r.Add(c.volumeReqs[k])
	}
	cl.reqs = r
}

// relax returns the next level, dropping one preference in upstream
// Karpenter's order, or nil when nothing is left to relax. hasPreferTaints
// says whether any PreferNoSchedule taint exists, so the final step is only
// taken when it can matter.
func (cl *classLevel) relax(hasPreferTaints bool) *classLevel {
	if cl.done {
		return cl.next
	}
	cl.done = true
	n := &classLevel{
		class: cl.class, level: cl.level + 1, termIdx: cl.termIdx, prefNode: cl.prefNode,
		spreads: cl.spreads, affinity: cl.affinity, antiAffinity: cl.antiAffinity, tolPrefer: cl.tolPrefer,
		relaxed: cl.relaxed,
	}
	c := cl.class
	add := func(s string) { n.relaxed = append(append([]string(nil), cl.relaxed...), s) }
	switch {
	case cl.termIdx+1 < len(c.requiredTerms):
		n.termIdx++
		add(fmt.Sprintf("required node affinity term %d", cl.termIdx))
	case firstPreferred(cl.affinity) >= 0:
		i := firstPreferred(cl.affinity)
		add(fmt.Sprintf("preferred pod affinity (weight %d)", cl.affinity[i].weight))
		n.affinity = without(cl.affinity, i)
	case firstPreferred(cl.antiAffinity) >= 0:
		i := firstPreferred(cl.antiAffinity)
		add(fmt.Sprintf("preferred pod anti-affinity (weight %d)", cl.antiAffinity[i].weight))
		n.antiAffinity = without(cl.antiAffinity, i)
	case len(cl.prefNode) > 0:
		add(fmt.Sprintf("preferred node affinity (weight %d)", cl.prefNode[0].weight))
		n.prefNode = cl.prefNode[1:]
	case anywhereSpread(cl.spreads) >= 0:
		i := anywhereSpread(cl.spreads)
		add("topology spread (ScheduleAnyway)")
		n.spreads = append(append([]*spreadTerm(nil), cl.spreads[:i]...), cl.spreads[i+1:]...)
	case !cl.tolPrefer && hasPreferTaints:
		add("PreferNoSchedule taints")
		n.tolPrefer = true
	default:
		return nil
	}
	n.computeReqs()
	cl.next = n
	return n
}

func firstPreferred(ts []*podTerm) int {
	for i, t := range ts {
		if !t.required {
			return i
		}
	}
	return -1
}

func without(ts []*podTerm, i int) []*podTerm {
	return append(append([]*podTerm(nil), ts[:i]...), ts[i+1:]...)
}

func anywhereSpread(ss []*spreadTerm) int {
	for i, s := range ss {
		if s.scheduleAnyway {
			return i
		}
	}
	return -1
}
