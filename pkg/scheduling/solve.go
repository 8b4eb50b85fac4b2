package scheduling

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// solver holds the state of one Solve call.
type solver struct {
	in   *Input
	opts Options
	ri   *resIndex

	pools  []*poolState
	nodes  []*bin // existing nodes, initialized first then by name
	claims []*bin // new NodeClaims in creation order

	classes  []*podClass
	podClass []*podClass
	podLevel []*classLevel
	podBin   []*bin
	podErrs  [][]PlacementError

	topo            *topology
	unavailable     map[OfferingKey]bool
	wellKnown       map[string]bool // default keys plus Input.WellKnownLabels
	resLeft         map[string]int
	hasPreferTaints bool

	compatCache map[string]*compatEntry
	vols        *volumeIndex
	daemons     []daemonInfo
	deferred    []*bin
	slack       []claimSlack
	extraRes    bool // resources beyond cpu, memory and pods are in play
	lbs         []lbClaim
	// skippedGrowth: the last placeOnClaim found a NodeClaim that could
	// take the pod only by growing wastefully, and left it.
	skippedGrowth bool
}

// defaultMaxPods is the kubelet's default pod limit, assumed for instance
// types that do not state one.
const defaultMaxPods = 110

// daemonInfo is a DaemonSet reduced to what overhead accounting needs.
type daemonInfo struct {
	name string
	pod  *corev1.Pod
	reqs Requirements
	ok   bool
	vec  vec
}

type lbClaim struct {
	b  *bin
	lb float64
}

type poolState struct {
	idx        int
	np         *NodePool
	reqs       Requirements
	typeKeys   map[string]bool
	types      []*itState // usable types, by cheapest offering then name
	byName     []*itState // the same, by name
	limited    []bool
	remaining  vec
	nodesLeft  int // -1: unlimited
	hasDaemons bool
	staticErr  map[*classLevel]*PlacementError
}

type itState struct {
	it       *InstanceType
	reqs     Requirements
	alloc    vec // allocatable minus the DaemonSet overhead of this pool
	capacity vec
	daemon   vec
	offers   []*Offering
	price    float64
	cheapest *Offering // cheapest usable offering overall
	nameRank int       // position in poolState.byName
}

// bin is anything a pod can be placed on: an existing node or a NodeClaim
// being planned.
type bin struct {
	idx              int
	existing         bool
	node             *ExistingNode
	deriv            *nodeDerivation // existing nodes: what the solve derived from node
	pool             *poolState
	host             string
	reqs             Requirements
	taints           []corev1.Taint
	used             vec
	alloc            vec        // existing nodes
	options          []*itState // NodeClaims: types that still fit every pod here
	initial          []*itState // NodeClaims: the options it was opened with
	maxAlloc         vec
	reserve          vec
	pods             []int
	topo             map[int32]*binCount
	ports            []hostPort
	lenient          bool // in-flight NodeClaim: undefined well-known keys pass
	ignoreEphemeral  bool
	minValuesRelaxed bool
	volumes          map[string]int
}

// Solve places the snapshot's pending pods. See the package documentation.
func Solve(in *Input) *Result {
	s := newSolver(in)
	s.run()
	if s.opts.Robust {
		s.harden()
	}
	return s.result()
}

// newSolver indexes in for a solve: resources, pools, nodes, pod classes
// and topology.
func newSolver(in *Input) *solver {
	s := &solver{in: in, opts: in.Options, unavailable: map[OfferingKey]bool{}, resLeft: map[string]int{}, compatCache: map[string]*compatEntry{},
		wellKnown: wellKnownSet(in.WellKnownLabels)}
	if s.opts.MaxInstanceTypes <= 0 {
		s.opts.MaxInstanceTypes = DefaultMaxInstanceTypes
	}
	for _, k := range in.Unavailable {
		s.unavailable[k] = true
	}
	s.buildResources()
	s.buildPools()
	s.buildNodes()
	s.buildClasses()
	s.buildTopology()
	return s
}

func (s *solver) buildResources() {
	ri := newResIndex()
	for _, p := range s.in.Pods {
		ri.addAll(PodRequests(p))
	}
	for _, np := range s.in.NodePools {
		for _, it := range np.InstanceTypes {
			ri.addAll(it.Capacity)
		}
	}
	s.ri = ri
	s.extraRes = len(ri.names) > 3
}

// daemonPods turns each DaemonSet into the pod it would run on a new node.
func (s *solver) daemonPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, ds := range s.in.DaemonSets {
		p := &corev1.Pod{}
		p.Namespace = ds.Namespace
		p.Labels = ds.Spec.Template.Labels
		p.Spec = *ds.Spec.Template.Spec.DeepCopy()
		out = append(out, p)
	}
	return out
}

func (s *solver) buildClasses() {
	byKey := map[string]*podClass{}
	s.podClass = make([]*podClass, len(s.in.Pods))
	for i, p := range s.in.Pods {
		k := classKey(p)
		c, ok := byKey[k]
		if !ok {
			c = &podClass{id: len(s.classes), key: k, rep: p}
			rl := PodRequests(p)
			c.requestList = rl
			c.reqs = s.ri.vec(rl)
			c.reqs[resPods] = 1
			c.ports = podHostPorts(p)
			if err := c.parseNodeConstraints(p); err != nil {
				c.err = err
			} else if err := s.volumeRequirements(c, p); err != nil {
				c.err = err
			}
			byKey[k] = c
			s.classes = append(s.classes, c)
		}
		s.podClass[i] = c
	}
}

func (s *solver) result() *Result {
	res := &Result{Placements: make([]Placement, len(s.in.Pods))}
	claimIdx := map[*bin]int{}
	for _, b := range s.claims {
		nc := s.finalize(b)
		claimIdx[b] = len(res.NewNodeClaims)
		res.NewNodeClaims = append(res.NewNodeClaims, nc)
	}
	for i, p := range s.in.Pods {
		pl := Placement{Pod: p, NodeClaim: -1}
		if b := s.podBin[i]; b != nil {
			if b.existing {
				pl.Node = b.node.Name
			} else {
				pl.NodeClaim = claimIdx[b]
			}
			pl.Relaxed = s.podLevel[i].relaxed
		} else {
			pl.Errors = s.podErrs[i]
		}
		res.Placements[i] = pl
	}
	return res
}

// describeRequests prints the resources a pod asks for, sorted by name.
func describeRequests(l corev1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

// describeTopology names the topology constraint that produced key's
// requirement.
func describeTopology(ev *topoEval, key string) string {
	return "topology (" + ev.extra[key].String() + ")"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
