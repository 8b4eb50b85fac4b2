package snapshot

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// View is the cluster as Build reads it. The controller's is Live over its
// cluster state, informer cache and cloud provider; the CLI's is Live over
// the objects it listed; a disruption.Snapshot is one too, so that offline
// planning (the benchmarks, tests) builds its input exactly as provisioning
// does.
type View interface {
	// Synced reports whether the view holds every Node and NodeClaim the
	// API server has; a snapshot of a partial picture would plan capacity
	// that already exists.
	Synced(ctx context.Context) bool
	// SchedulingNodes are the nodes and in-flight NodeClaims pods can
	// still go to (not being deleted), with their bound pods.
	SchedulingNodes() []*scheduling.ExistingNode
	// NodePoolResources is what the pool has provisioned: the capacity of
	// its nodes and in-flight NodeClaims plus the "nodes" pseudo-resource.
	NodePoolResources(nodePool string) corev1.ResourceList
	// LeavingNodes names the Karpenter nodes that are being deleted or
	// carry the disrupted taint: their pods must be planned for elsewhere
	// before they are evicted.
	LeavingNodes(ctx context.Context) (map[string]bool, error)
	// Pods are every pod: pending ones and those bound to nodes. Build only
	// reads them.
	Pods(ctx context.Context) ([]*corev1.Pod, error)
	// NodePools are every NodePool.
	NodePools(ctx context.Context) ([]*v1.NodePool, error)
	// GetInstanceTypes resolves a NodePool's instance types.
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*scheduling.InstanceType, error)
	// DaemonSets and Namespaces are every one of them.
	DaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error)
	Namespaces(ctx context.Context) ([]*corev1.Namespace, error)
	// Volumes are the storage objects; Build asks only when a pod to plan
	// uses a volume.
	Volumes(ctx context.Context) (*Volumes, error)
	// ReplicaSet gets one, for the pods it is about to create (nil and no
	// error when it does not exist).
	ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
}

// Volumes are the storage objects the solver checks volume topology with.
type Volumes struct {
	Claims         []*corev1.PersistentVolumeClaim
	Volumes        []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
}

// Cluster is what Live needs of the cluster state.
type Cluster interface {
	Synced(ctx context.Context) bool
	SchedulingNodes() []*scheduling.ExistingNode
	NodePoolResources(nodePool string) corev1.ResourceList
}

// InstanceTypes resolves a NodePool's instance types; the cloud provider
// implements it.
type InstanceTypes interface {
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*scheduling.InstanceType, error)
}

// Live is the View of a running cluster: cluster state for the nodes and
// their usage, a client.Reader (the manager's cache, or the CLI's listed
// objects) for the API objects, and the cloud provider for instance types.
type Live struct {
	Reader  client.Reader
	Cloud   InstanceTypes
	Cluster Cluster
	// Informers, when set (the manager's cache), serves Pods from the pod
	// informer's store: the cached pods themselves, where a List through
	// Reader makes an array of every pod's struct on each call. The
	// disruption simulator builds a snapshot per candidate, so those
	// arrays were its largest garbage.
	Informers Informers
	// Prepared, when set, prepares the nodes of each snapshot for the
	// solver, keeping from one call to the next what a node's unchanged
	// labels and pods derive (scheduling.NodeCache): for a caller that
	// builds snapshot after snapshot of the same cluster.
	Prepared *scheduling.NodeCache
}

// Informers gets the informer of a kind; controller-runtime's cache
// implements it.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

var _ View = Live{}

// Synced implements View.
func (l Live) Synced(ctx context.Context) bool { return l.Cluster.Synced(ctx) }

// SchedulingNodes implements View.
func (l Live) SchedulingNodes() []*scheduling.ExistingNode {
	if l.Prepared != nil {
		return l.Prepared.Prepare(l.Cluster.SchedulingNodes())
	}
	return l.Cluster.SchedulingNodes()
}

// NodePoolResources implements View.
func (l Live) NodePoolResources(nodePool string) corev1.ResourceList {
	return l.Cluster.NodePoolResources(nodePool)
}

// GetInstanceTypes implements View.
func (l Live) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return l.Cloud.GetInstanceTypes(ctx, np)
}

// LeavingNodes implements View.
func (l Live) LeavingNodes(ctx context.Context) (map[string]bool, error) {
	// Only deletion and taints are read: no copies (a cache reader would
	// otherwise copy every Node for each disruption simulation).
	nodes := &corev1.NodeList{}
	if err := l.Reader.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	leaving := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !n.DeletionTimestamp.IsZero() || hasDisruptedTaint(n.Spec.Taints) {
			leaving[n.Name] = true
		}
	}
	return leaving, nil
}

// Pods implements View: the reader's objects, not copies (Build only reads
// them; a cache reader would otherwise copy every pod for each disruption
// simulation).
func (l Live) Pods(ctx context.Context) ([]*corev1.Pod, error) {
	if l.Informers != nil {
		if pods, ok, err := l.storedPods(ctx); ok || err != nil {
			return pods, err
		}
	}
	list := &corev1.PodList{}
	if err := l.Reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return pointers(list.Items), nil
}

// storedPods lists the pod informer's store; ok is false when the
// informer has no store to read (then Pods lists through the Reader).
func (l Live) storedPods(ctx context.Context) ([]*corev1.Pod, bool, error) {
	inf, err := l.Informers.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, false, fmt.Errorf("getting the pod informer: %w", err)
	}
	withStore, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok || !inf.HasSynced() {
		return nil, false, nil
	}
	items := withStore.GetStore().List()
	out := make([]*corev1.Pod, 0, len(items))
	for _, item := range items {
		if p, ok := item.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, true, nil
}

// NodePools implements View.
func (l Live) NodePools(ctx context.Context) ([]*v1.NodePool, error) {
	list := &v1.NodePoolList{}
	if err := l.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	return pointers(list.Items), nil
}

// DaemonSets implements View.
func (l Live) DaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	list := &appsv1.DaemonSetList{}
	if err := l.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing daemonsets: %w", err)
	}
	return pointers(list.Items), nil
}

// Namespaces implements View.
func (l Live) Namespaces(ctx context.Context) ([]*corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := l.Reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	return pointers(list.Items), nil
}

// Volumes implements View. They are listed only when asked, so that a
// cluster without volumes never starts informers for them.
func (l Live) Volumes(ctx context.Context) (*Volumes, error) {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := l.Reader.List(ctx, pvcs); err != nil {
		return nil, fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := l.Reader.List(ctx, pvs); err != nil {
		return nil, fmt.Errorf("listing persistentvolumes: %w", err)
	}
	scs := &storagev1.StorageClassList{}
	if err := l.Reader.List(ctx, scs); err != nil {
		return nil, fmt.Errorf("listing storageclasses: %w", err)
	}
	return &Volumes{Claims: pointers(pvcs.Items), Volumes: pointers(pvs.Items), StorageClasses: pointers(scs.Items)}, nil
}

// ReplicaSet implements View.
func (l Live) ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	rs := &appsv1.ReplicaSet{}
	if err := l.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rs); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("getting replicaset %s/%s: %w", namespace, name, err)
	}
	return rs, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func hasDisruptedTaint(taints []corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&v1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}
