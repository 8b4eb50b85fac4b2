package scheduling

import (
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Input is one snapshot to solve. The solver never modifies it.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the nodes already in the cluster and the in-flight NodeClaims
	// that have not registered yet, with the pods bound to them.
	Nodes []*ExistingNode
	// NodePools are the pools new NodeClaims may come from. Pass only Ready,
	// non-deleting pools; the solver orders them by weight.
	NodePools []*NodePool
	// DaemonSets add per-node overhead wherever their pods would run.
	DaemonSets []*appsv1.DaemonSet
	// Volumes used to derive zone requirements of pods with PVCs.
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// Namespaces supply labels for pod affinity namespaceSelectors.
	Namespaces []*corev1.Namespace
	// Unavailable offerings (the insufficient-capacity cache) are never used.
	Unavailable []OfferingKey
	// Nominations map a pending pod's UID to the name of an entry in Nodes
	// that an earlier round planned it onto. Nominated pods are placed there
	// before any other pod is placed anywhere, as long as they still fit;
	// the others are placed as usual. Without this, a round that runs while
	// the previous round's NodeClaims are still launching may pack the same
	// pods differently into those exactly-sized NodeClaims and find that
	// some no longer fit, buying capacity that is not needed.
	Nominations map[types.UID]string
	// WellKnownLabels are the provider's label keys whose values its
	// instance types decide (instance family, size, ...), added to the
	// generic Kubernetes and karpenter.sh keys (DefaultWellKnownLabels). A
	// pod may require one without a NodePool mentioning it, and the solver
	// never copies them into NodeClaim labels.
	WellKnownLabels []string
	Options         Options
}

// Options tune the solve; the zero value is upstream's default behaviour.
type Options struct {
	// PreferencePolicy: Respect (default) treats preferences as required and
	// relaxes them on failure; Ignore drops them up front.
	PreferencePolicy PreferencePolicy
	// MinValuesPolicy: Strict (default) refuses a NodeClaim whose instance
	// types cannot satisfy minValues; BestEffort lowers minValues instead.
	MinValuesPolicy MinValuesPolicy
	// MaxInstanceTypes caps each NodeClaim's instance type list (default 600).
	MaxInstanceTypes int
	// Robust makes new NodeClaims hold their pods however the kube-scheduler
	// mixes them, at some extra cost, rather than only as the solver packed
	// them (see harden). The provisioner sets it; packing benchmarks do not.
	Robust bool
	// CapGrowth stops a planned NodeClaim from growing into types that
	// price its pods more than 20% above the best type it was opened with
	// (per unit of its load); the pod opens a new NodeClaim instead, unless
	// limits forbid one. Upstream grows a NodeClaim while any type still
	// fits, onto the premium-priced largest types if need be. The
	// provisioner sets it, and the simulations that must plan as it does.
	CapGrowth bool
}

// PreferencePolicy says what to do with preferred scheduling terms.
type PreferencePolicy string

// MinValuesPolicy says what to do when minValues cannot be met.
type MinValuesPolicy string

const (
	PreferencesRespect  PreferencePolicy = "Respect"
	PreferencesIgnore   PreferencePolicy = "Ignore"
	MinValuesStrict     MinValuesPolicy  = "Strict"
	MinValuesBestEffort MinValuesPolicy  = "BestEffort"

	// DefaultMaxInstanceTypes is the most instance types a NodeClaim lists.
	DefaultMaxInstanceTypes = 600
)

// NodePool is what the solver needs of a karpenter.sh/v1 NodePool.
type NodePool struct {
	Name   string
	Weight int32
	// Requirements from spec.template.spec.requirements (see
	// RequirementsFromMinValues). Template labels are added by the solver.
	Requirements Requirements
	// Labels from spec.template.metadata.labels.
	Labels map[string]string
	// Taints must be tolerated by pods; StartupTaints are ignored for
	// scheduling (they go away once the node is ready).
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// Remaining is the headroom left under spec.limits (limits minus current
	// usage), including the "nodes" pseudo-resource. Nil means unlimited;
	// a resource absent from the list is unlimited.
	Remaining corev1.ResourceList
	// InstanceTypes this pool may launch.
	InstanceTypes []*InstanceType
	// Limits is spec.limits. The solver plans with Remaining; Limits only
	// adds figures to a LimitExceeded refusal (optional).
	Limits corev1.ResourceList
}

// InstanceType is one launchable machine shape.
type InstanceType struct {
	Name string
	// Requirements are the labels a node of this type carries (arch, os,
	// instance-type, zones, capacity types, provider-specific keys).
	Requirements Requirements
	Offerings    []Offering
	// Capacity is the machine's total; Overhead is what the kubelet and
	// system reserve (plus eviction threshold). Allocatable = Capacity - Overhead.
	Capacity corev1.ResourceList
	Overhead corev1.ResourceList
}

// Offering is one way to buy an instance type.
type Offering struct {
	Zone         string
	CapacityType string
	Price        float64
	// Available is the provider's view; Input.Unavailable can veto it too.
	Available bool
	// ReservationID and ReservationCapacity describe reserved capacity; the
	// solver never plans more NodeClaims on a reservation than it has left.
	ReservationID       string
	ReservationCapacity int
	// Requirements are extra labels this offering implies (optional).
	Requirements Requirements
	// PriceOverlaid: a NodeOverlay set Price. A provider that launches by
	// its own notion of price (EC2's lowest-price strategy) must rank by
	// this Price instead, or the overlay would change plans but not buys.
	PriceOverlaid bool
}

// OfferingKey names an offering for the insufficient-capacity cache.
type OfferingKey struct {
	InstanceType, Zone, CapacityType string
}

// OfferingKeyOf is the offering a node's (or NodeClaim's) labels name: its
// instance type, zone and capacity type.
func OfferingKeyOf(labels map[string]string) OfferingKey {
	return OfferingKey{InstanceType: labels[LabelInstanceType], Zone: labels[LabelZone], CapacityType: labels[LabelCapacityType]}
}

// OfferingPrices indexes the instance types' offerings by key, for pricing
// many nodes against one catalog.
func OfferingPrices(its []*InstanceType) map[OfferingKey]float64 {
	out := map[OfferingKey]float64{}
	for _, it := range its {
		for _, o := range it.Offerings {
			out[OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] = o.Price
		}
	}
	return out
}

// ExistingNode is a node, or an in-flight NodeClaim that has no node yet.
type ExistingNode struct {
	Name string
	// NodeClaim names the NodeClaim behind the node, if any. The solver does
	// not use it; callers use it to follow a node across registration,
	// when its name changes from the NodeClaim's to the Node's.
	NodeClaim string `json:",omitempty"`
	// Labels of the node. For an in-flight NodeClaim without a node, pass the
	// NodeClaim's requirements in Requirements instead (or both).
	Labels       map[string]string
	Requirements Requirements
	Taints       []corev1.Taint
	Allocatable  corev1.ResourceList
	// Pods bound (or nominated) to this node, DaemonSet pods included.
	Pods []*corev1.Pod
	// Initialized is false while the node is still starting; ephemeral
	// taints are ignored on uninitialized Karpenter-managed nodes.
	Initialized bool
	Managed     bool
	// VolumeLimits is the CSI attach limit per driver (from CSINode); absent
	// drivers are unlimited.
	VolumeLimits map[string]int

	// prepared is set by PrepareNodes.
	prepared *nodeDerivation
}

// Result is the solver's answer.
type Result struct {
	// Placements has one entry per input pod, in input order.
	Placements    []Placement
	NewNodeClaims []*NewNodeClaim
}

// Placement says where one pod goes, or why it cannot go anywhere.
type Placement struct {
	Pod *corev1.Pod
	// Node is set when the pod fits an existing node or in-flight NodeClaim.
	Node string
	// NodeClaim indexes Result.NewNodeClaims, or is -1.
	NodeClaim int
	// Relaxed lists the preferences that were dropped to place the pod.
	Relaxed []string
	// Errors explain an unplaced pod: one per NodePool, plus one for
	// existing nodes when there are any.
	Errors []PlacementError
}

// Scheduled reports whether the pod was placed.
func (p Placement) Scheduled() bool { return p.Node != "" || p.NodeClaim >= 0 }

// Why joins the per-NodePool reasons into one line.
func (p Placement) Why() string {
	parts := make([]string, 0, len(p.Errors))
	for _, e := range p.Errors {
		parts = append(parts, e.String())
	}
	return strings.Join(parts, "; ")
}

// PlacementError is the reason one NodePool (or the existing nodes) could
// not take a pod. Kind and the fields it names say what refused the pod;
// Reason is the same rendered for people (events, logs).
type PlacementError struct {
	// NodePool is the pool's name, or "" for existing nodes.
	NodePool string
	// Reason is Message(), filled in by the solver.
	Reason string
	Kind   RefusalKind `json:",omitempty"`
	// Key is the label key of a requirement, minValues or topology refusal.
	Key string `json:",omitempty"`
	// Owner names the side the pod's requirement is checked against:
	// "NodePool" or "node".
	Owner string `json:",omitempty"`
	// NodeRequirement is the NodePool's (or node's) requirement on Key,
	// PodRequirement the pod's; Values() and Operator() give their values.
	NodeRequirement *Requirement  `json:",omitempty"`
	PodRequirement  *Requirement  `json:",omitempty"`
	Taint           *corev1.Taint `json:",omitempty"`
	// Resource is the limit or resource that ran out. For a limit, Limit is
	// spec.limits (when the input carries it), Used is Limit minus
	// Remaining (the solver cannot see past the limit, so usage above it
	// reads as the limit), and Needed is what the smallest fitting
	// instance type would add.
	Resource  corev1.ResourceName `json:",omitempty"`
	Limit     *resource.Quantity  `json:",omitempty"`
	Used      *resource.Quantity  `json:",omitempty"`
	Remaining *resource.Quantity  `json:",omitempty"`
	Needed    *resource.Quantity  `json:",omitempty"`
	// Requests are the pod's requests when no instance type has room;
	// DaemonSetOverhead says the pool's DaemonSets were added to them.
	Requests          corev1.ResourceList `json:",omitempty"`
	DaemonSetOverhead bool                `json:",omitempty"`
	HostPort          int32               `json:",omitempty"`
	Protocol          string              `json:",omitempty"`
	// Volume is the claim whose volume, class or zones refused the pod.
	Volume string `json:",omitempty"`
	// Driver and AttachLimit describe a CSI attach limit.
	Driver      string `json:",omitempty"`
	AttachLimit int    `json:",omitempty"`
	// MinValues is the minValues that could not be met on Key.
	MinValues int `json:",omitempty"`
	// Nodes and Node, for existing nodes: how many were tried and the one
	// whose refusal the other fields describe.
	Nodes int    `json:",omitempty"`
	Node  string `json:",omitempty"`
	// Detail is the full text when it is not rendered from a template
	// (requirement conflicts, topology, parse errors).
	Detail string `json:",omitempty"`
}

func (e PlacementError) String() string {
	reason := e.Reason
	if reason == "" {
		reason = e.Message()
	}
	if e.NodePool == "" {
		return "existing nodes: " + reason
	}
	return "nodepool " + e.NodePool + ": " + reason
}

// NewNodeClaim is a NodeClaim the solver wants launched.
type NewNodeClaim struct {
	NodePool string
	// Hostname is a placeholder used for hostname topology while solving.
	Hostname string
	// Requirements are the pool's, narrowed by the pods placed here, with
	// instance-type In the listed types.
	Requirements Requirements
	// InstanceTypes still able to run every pod here, cheapest first, at most
	// Options.MaxInstanceTypes.
	InstanceTypes []*InstanceType
	// Requests is the pods' total plus DaemonSet overhead.
	Requests      corev1.ResourceList
	Labels        map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	Pods          []*corev1.Pod
	// Price is the cheapest compatible offering of the cheapest type.
	Price float64
	// MinValuesRelaxed is set when BestEffort lowered a minValues.
	MinValuesRelaxed bool
	// ReservationIDs lists reservations this NodeClaim holds a unit of.
	ReservationIDs []string
}

// Cost sums the launch price of all new NodeClaims.
func (r *Result) Cost() float64 {
	total := 0.0
	for _, nc := range r.NewNodeClaims {
		total += nc.Price
	}
	return total
}

// Unscheduled returns the placements that found no home, sorted by pod
// namespace/name.
func (r *Result) Unscheduled() []Placement {
	var out []Placement
	for _, p := range r.Placements {
		if !p.Scheduled() {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Pod.Namespace+"/"+out[i].Pod.Name < out[j].Pod.Namespace+"/"+out[j].Pod.Name
	})
	return out
}
