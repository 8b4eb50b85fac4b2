package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Cluster is what the builder needs of the cluster state.
type Cluster interface {
	// Synced reports whether the state holds every Node and NodeClaim the
	// API server has; a snapshot of a partial picture would plan capacity
	// that already exists.
	Synced(ctx context.Context) bool
	// SchedulingNodes snapshots the nodes and in-flight NodeClaims pods can
	// still go to (not being deleted), with their bound pods.
	SchedulingNodes() []*scheduling.ExistingNode
	// NodePoolResources is what the pool has provisioned: the capacity of
	// its nodes and in-flight NodeClaims plus the "nodes" pseudo-resource.
	NodePoolResources(nodePool string) corev1.ResourceList
}

// InstanceTypes resolves a NodePool's instance types; the cloud provider
// implements it.
type InstanceTypes interface {
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*scheduling.InstanceType, error)
}

// UnavailableOfferings is the insufficient-capacity cache: offerings that
// recently failed to launch are left out of planning.
type UnavailableOfferings interface {
	Keys() []scheduling.OfferingKey
}

// Options configure every snapshot a Builder makes.
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
	// nodes that all may take a pod (the planner's repack.LaunchTaint on
	// the NodeClaims its command launched for the pods it evicts). A plan
	// that honoured them would launch new capacity for those very pods.
	IgnoreTaints []corev1.Taint
}

// Builder makes snapshots. It is safe for concurrent use.
type Builder struct {
	kube    client.Reader
	cloud   InstanceTypes
	cluster Cluster
	opts    Options
}

// New returns a builder. kube may be the manager's cache.
func New(kube client.Reader, cloud InstanceTypes, cluster Cluster, opts Options) *Builder {
	return &Builder{kube: kube, cloud: cloud, cluster: cluster, opts: opts}
}

// Request says what to simulate on top of the cluster as it is.
type Request struct {
	// Remove names nodes (Node names, or NodeClaim names for unregistered
	// ones) to simulate away: they are left out of Input.Nodes and their
	// reschedulable pods (not DaemonSet, not static/mirror, not terminal,
	// not tolerating karpenter.sh/disrupted:NoSchedule) are added to
	// Input.Pods with spec.nodeName cleared.
	Remove map[string]bool
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

// ErrNotSynced is returned while the cluster state is not synced.
var ErrNotSynced = errors.New("cluster state is not synced")

// Build snapshots the cluster for req.
//
// Nodes are read before pods: a pod that binds in between is then seen on
// its node or as pending, never as neither, and a node that appears in
// between is not counted. Either way a plan errs on the side of launching
// nothing extra.
func (b *Builder) Build(ctx context.Context, req Request) (*Snapshot, error) {
	if !b.cluster.Synced(ctx) {
		return nil, ErrNotSynced
	}
	nodes := withoutTaints(b.cluster.SchedulingNodes(), b.opts.IgnoreTaints)
	all := &corev1.PodList{}
	if err := b.kube.List(ctx, all); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	snap := &Snapshot{}
	var pods []*corev1.Pod
	if !req.NoPending {
		pods, snap.Ignored = PendingPods(all)
		if b.opts.AnticipateReplicaSets {
			expected, err := ExpectedPods(ctx, b.kube, all, pods)
			if err != nil {
				return nil, err
			}
			snap.Expected = len(expected)
			pods = append(pods, expected...)
		}
	}
	leaving, err := b.leavingNodes(ctx)
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
	in, pools, err := b.input(ctx, pods, nodes)
	if err != nil {
		return nil, err
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

// leavingNodes names the Karpenter nodes that are being deleted or carry
// the disrupted taint: their pods must be planned for elsewhere before they
// are evicted.
func (b *Builder) leavingNodes(ctx context.Context) (map[string]bool, error) {
	nodes := &corev1.NodeList{}
	if err := b.kube.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	leaving := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !n.DeletionTimestamp.IsZero() || hasDisruptedTaint(n) {
			leaving[n.Name] = true
		}
	}
	return leaving, nil
}

// input assembles the solver's snapshot around pods and nodes.
func (b *Builder) input(ctx context.Context, pods []*corev1.Pod, nodes []*scheduling.ExistingNode) (*scheduling.Input, map[string]*v1.NodePool, error) {
	pools, byName, err := b.nodePools(ctx)
	if err != nil {
		return nil, nil, err
	}
	in := &scheduling.Input{
		Pods:      pods,
		Nodes:     nodes,
		NodePools: pools,
		Options:   b.opts.Solver,
		// Shared by every Input; the solver only reads it.
		WellKnownLabels: b.opts.WellKnownLabels,
	}
	if b.opts.Unavailable != nil {
		in.Unavailable = b.opts.Unavailable.Keys()
	}
	dsList := &appsv1.DaemonSetList{}
	if err := b.kube.List(ctx, dsList); err != nil {
		return nil, nil, fmt.Errorf("listing daemonsets: %w", err)
	}
	for i := range dsList.Items {
		in.DaemonSets = append(in.DaemonSets, &dsList.Items[i])
	}
	nsList := &corev1.NamespaceList{}
	if err := b.kube.List(ctx, nsList); err != nil {
		return nil, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range nsList.Items {
		in.Namespaces = append(in.Namespaces, &nsList.Items[i])
	}
	if usesVolumes(pods) {
		if err := b.addVolumes(ctx, in); err != nil {
			return nil, nil, err
		}
	}
	return in, byName, nil
}

func weight(np *v1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

func sortPools(items []v1.NodePool) {
	sort.Slice(items, func(i, j int) bool {
		wi, wj := weight(&items[i]), weight(&items[j])
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
