package snapshot

import (
	"context"
	"errors"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// UnavailableOfferings is the insufficient-capacity cache: offerings that
// recently failed to launch are left out of planning.
type UnavailableOfferings interface {
	Keys() []scheduling.OfferingKey
}

// Options say how every snapshot of a caller is built.
type Options struct {
	// Solver is copied into Input.Options.
	Solver scheduling.Options
	// AnticipateReplicaSets adds, for each pending pod owned by a
	// ReplicaSet, the siblings it is about to create (see ExpectedPods).
	AnticipateReplicaSets bool
	// Unavailable is the insufficient-capacity cache (optional).
	Unavailable UnavailableOfferings
	// WellKnownLabels are the cloud provider's label keys whose values its
	// instance types decide (for kwok, kwok.WellKnownLabels()); they go into
	// every Input. The generic keys are always well known.
	WellKnownLabels []string
	// IgnoreTaints are taints the plan disregards on nodes and in-flight
	// NodeClaims: soft taints that only steer the kube-scheduler among
	// nodes that all may take a pod (disruption.LaunchTaint on the
	// NodeClaims a consolidation command launched for the pods it evicts).
	// A plan that honoured them would launch new capacity for those very
	// pods.
	IgnoreTaints []corev1.Taint
	// IgnoreDRARequests leaves pending pods with ResourceClaims out of the
	// plan (as Ignored, with ErrDRARequests): the solver does not model
	// Dynamic Resource Allocation, so a node it launched for them might
	// not carry the devices they claim.
	IgnoreDRARequests bool
	// VirtualPods returns the CapacityBuffers' virtual pods (see
	// IsVirtual), planned for as pending pods in every snapshot that
	// includes pending pods (optional).
	VirtualPods func() []*corev1.Pod
}

// Request says what to build: the caller's Options, and what to simulate
// on top of the cluster as it is.
type Request struct {
	Options
	// Remove names nodes (Node names, or NodeClaim names for unregistered
	// ones) to simulate away: they are left out of Input.Nodes and their
	// reschedulable pods (not DaemonSet, not static/mirror, not terminal,
	// not tolerating karpenter.sh/disrupted:NoSchedule) are added to
	// Input.Pods with spec.nodeName cleared.
	Remove map[string]bool
	// Exclude names nodes (or NodeClaims) the removed nodes' pods may not
	// move to, while every other pod still may: consolidation keeps moved
	// pods off destinations inside their own consolidateAfter window. The
	// nodes get ExcludedDestinationTaint, which only the moved pods do not
	// tolerate.
	Exclude map[string]bool
	// Types limits new NodeClaims to these instance types per NodePool (a
	// pool it does not name launches nothing); nil leaves every type.
	Types map[string]map[string]bool
	// ExtraPods are added to Input.Pods as they are.
	ExtraPods []*corev1.Pod
	// NoPending leaves the cluster's pending pods (and their expected
	// siblings) out; by default they are in.
	NoPending bool
	// SkipIfNoPods makes Build stop, without resolving NodePools, when there
	// is no pod to plan (provisioning's common case): the Snapshot then has
	// a nil Input and only Ignored set.
	SkipIfNoPods bool
}

// ExcludedDestinationTaint is the taint Build puts on Request.Exclude's
// nodes; every pod but the moved ones tolerates it.
var ExcludedDestinationTaint = corev1.Taint{Key: "karpenter-go.io/consolidate-after-window", Effect: corev1.TaintEffectNoSchedule}

// Snapshot is one solver Input and what callers need to act on its Result.
type Snapshot struct {
	Input     *scheduling.Input
	NodePools map[string]*v1.NodePool // the pools in Input.NodePools, by name
	ClaimOf   map[string]string       // node name -> NodeClaim name for Input.Nodes
	Moved     []*corev1.Pod           // the pods added because of Remove (subset of Input.Pods)
	// Ignored are pending pods left out because Karpenter cannot plan for
	// them at all; Err says why (errors.Is(Err, ErrNotManaged) for pods
	// that opted out).
	Ignored []IgnoredPod
	// Expected counts the placeholder pods in Input.Pods (see IsExpected).
	Expected int
}

// IgnoredPod is a pending pod that failed validation.
type IgnoredPod struct {
	Pod *corev1.Pod
	Err error
}

// ErrNotSynced is returned while the view is not synced.
var ErrNotSynced = errors.New("cluster state is not synced")

// Build is the one way the solver's input is made: provisioning, both
// consolidation strategies, drift, the disruption simulator and the CLI
// all call it, with the view they have.
//
// Nodes are read before pods: a pod that binds in between is then seen on
// its node or as pending, never as neither, and a node that appears in
// between is not counted. Either way a plan errs on the side of launching
// nothing extra.
func Build(ctx context.Context, view View, req Request) (*Snapshot, error) {
	if !view.Synced(ctx) {
		return nil, ErrNotSynced
	}
	nodes := withoutTaints(view.SchedulingNodes(), req.IgnoreTaints)
	all, err := view.Pods(ctx)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{}
	var pods []*corev1.Pod
	if !req.NoPending {
		pods, snap.Ignored = req.PendingPods(all)
		if req.AnticipateReplicaSets {
			expected, err := ExpectedPods(ctx, view, all, pods)
			if err != nil {
				return nil, err
			}
			snap.Expected = len(expected)
			pods = append(pods, expected...)
		}
		if req.VirtualPods != nil {
			pods = append(pods, req.VirtualPods()...)
		}
	}
	leaving, err := view.LeavingNodes(ctx)
	if err != nil {
		return nil, err
	}
	for name := range req.Remove {
		leaving[name] = true
	}
	if len(leaving) > 0 {
		kept := nodes[:0:0]
		for _, n := range nodes {
			if leaving[n.Name] || (n.NodeClaim != "" && leaving[n.NodeClaim]) {
				continue
			}
			kept = append(kept, n)
		}
		nodes = kept
		var moving []*corev1.Pod
		moving, snap.Moved = reschedulablePods(all, leaving, req.Remove)
		pods = append(pods, moving...)
	}
	pods = append(pods, req.ExtraPods...)
	if req.SkipIfNoPods && len(pods) == 0 {
		return &Snapshot{Ignored: snap.Ignored}, nil
	}
	in, pools, err := input(ctx, view, req.Options, pods, nodes)
	if err != nil {
		return nil, err
	}
	if req.Types != nil {
		in.NodePools = RestrictPools(in.NodePools, req.Types)
	}
	if len(req.Exclude) > 0 {
		exclude(in, snap.Moved, req.Exclude)
	}
	snap.Input, snap.NodePools = in, pools
	snap.ClaimOf = make(map[string]string, len(nodes))
	for _, n := range nodes {
		if n.NodeClaim != "" {
			snap.ClaimOf[n.Name] = n.NodeClaim
		}
	}
	return snap, nil
}

// input assembles the solver's snapshot around pods and nodes.
func input(ctx context.Context, view View, opts Options, pods []*corev1.Pod, nodes []*scheduling.ExistingNode) (*scheduling.Input, map[string]*v1.NodePool, error) {
	pools, byName, err := nodePools(ctx, view)
	if err != nil {
		return nil, nil, err
	}
	in := &scheduling.Input{
		Pods:      pods,
		Nodes:     nodes,
		NodePools: pools,
		Options:   opts.Solver,
		// Shared by every Input; the solver only reads it.
		WellKnownLabels: opts.WellKnownLabels,
	}
	if opts.Unavailable != nil {
		in.Unavailable = opts.Unavailable.Keys()
	}
	if in.DaemonSets, err = view.DaemonSets(ctx); err != nil {
		return nil, nil, err
	}
	if in.Namespaces, err = view.Namespaces(ctx); err != nil {
		return nil, nil, err
	}
	if usesVolumes(pods) {
		vols, err := view.Volumes(ctx)
		if err != nil {
			return nil, nil, err
		}
		in.PersistentVolumeClaims, in.PersistentVolumes, in.StorageClasses = vols.Claims, vols.Volumes, vols.StorageClasses
	}
	return in, byName, nil
}

// exclude puts ExcludedDestinationTaint on the excluded nodes and lets
// every pod but the moved ones tolerate it, copying what it changes.
func exclude(in *scheduling.Input, moved []*corev1.Pod, excluded map[string]bool) {
	taint := ExcludedDestinationTaint
	nodes := make([]*scheduling.ExistingNode, len(in.Nodes))
	for i, n := range in.Nodes {
		if !excluded[n.Name] && (n.NodeClaim == "" || !excluded[n.NodeClaim]) {
			nodes[i] = n
			continue
		}
		cp := *n
		cp.Taints = append(append([]corev1.Taint(nil), n.Taints...), taint)
		nodes[i] = &cp
	}
	in.Nodes = nodes
	// Pods are told apart by UID and name: a pod not yet created (an
	// expected pod, a test's) may have no UID.
	key := func(p *corev1.Pod) string { return string(p.UID) + "|" + p.Namespace + "/" + p.Name }
	isMoved := make(map[string]bool, len(moved))
	for _, p := range moved {
		isMoved[key(p)] = true
	}
	pods := make([]*corev1.Pod, len(in.Pods))
	for i, p := range in.Pods {
		if isMoved[key(p)] {
			pods[i] = p
			continue
		}
		cp := *p
		cp.Spec.Tolerations = append(append([]corev1.Toleration(nil), p.Spec.Tolerations...),
			corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect})
		pods[i] = &cp
	}
	in.Pods = pods
}

func usesVolumes(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				return true
			}
		}
	}
	return false
}

func weight(np *v1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func sortPools(items []*v1.NodePool) {
	sort.Slice(items, func(i, j int) bool {
		wi, wj := weight(items[i]), weight(items[j])
		if wi != wj {
			return wi > wj
		}
		return items[i].Name < items[j].Name
	})
}

// withoutTaints returns nodes with ignore removed from their taints,
// copying the nodes that carry one.
func withoutTaints(nodes []*scheduling.ExistingNode, ignore []corev1.Taint) []*scheduling.ExistingNode {
	if len(ignore) == 0 {
		return nodes
	}
	nodes = append([]*scheduling.ExistingNode(nil), nodes...)
	for i, n := range nodes {
		var kept []corev1.Taint
		dropped := false
		for _, t := range n.Taints {
			skip := false
			for j := range ignore {
				skip = skip || t.MatchTaint(&ignore[j])
			}
			if skip {
				dropped = true
				continue
			}
			kept = append(kept, t)
		}
		if dropped {
			cp := *n
			cp.Taints = kept
			nodes[i] = &cp
		}
	}
	return nodes
}
