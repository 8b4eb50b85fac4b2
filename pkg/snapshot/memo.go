package snapshot

import (
	"context"
	"maps"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Memo returns a View that reads each thing from view once and answers
// every later call with the same objects: the cluster as it was when each
// was first asked. A disruption pass builds one snapshot per simulation
// (per candidate, per prefix of a multi-node batch), each of which read
// the whole cluster again, so at hundreds of nodes most of a pass was
// spent re-reading and copying the cluster; one picture per pass is also
// one consistent picture for all its simulations. Build copies whatever
// it changes, so the memo hands out its objects themselves (slices
// clipped, maps copied, so that an append or a write never reaches the
// memo), and its nodes prepared for the solver (scheduling.PrepareNodes).
// Errors are not kept: the next call asks view again.
//
// A Memo is for one pass: it never sees changes made after it first
// read, so what acts on a pass's decisions later (validation) must build
// from a fresh one.
func Memo(view View) View {
	return &memo{view: view, instanceTypes: map[string][]*scheduling.InstanceType{},
		resources: map[string]corev1.ResourceList{}, replicaSets: map[string]*appsv1.ReplicaSet{}}
}

type memo struct {
	view View

	mu            sync.Mutex
	synced        bool
	nodes         read[[]*scheduling.ExistingNode]
	leaving       read[map[string]bool]
	pods          read[[]*corev1.Pod]
	nodePools     read[[]*v1.NodePool]
	daemonSets    read[[]*appsv1.DaemonSet]
	namespaces    read[[]*corev1.Namespace]
	volumes       read[*Volumes]
	instanceTypes map[string][]*scheduling.InstanceType
	resources     map[string]corev1.ResourceList
	replicaSets   map[string]*appsv1.ReplicaSet
}

// read is one answer of the view, kept once it came without an error.
type read[T any] struct {
	v    T
	done bool
}

func (r *read[T]) get(ask func() (T, error)) (T, error) {
	if !r.done {
		v, err := ask()
		if err != nil {
			return v, err
		}
		r.v, r.done = v, true
	}
	return r.v, nil
}

var _ View = (*memo)(nil)

// Synced is remembered once true: a view that synced stays so for the pass.
func (m *memo) Synced(ctx context.Context) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.synced {
		m.synced = m.view.Synced(ctx)
	}
	return m.synced
}

func (m *memo) SchedulingNodes() []*scheduling.ExistingNode {
	m.mu.Lock()
	defer m.mu.Unlock()
	nodes, _ := m.nodes.get(func() ([]*scheduling.ExistingNode, error) {
		// Prepared: every simulation solves over these same nodes.
		return scheduling.PrepareNodes(m.view.SchedulingNodes()), nil
	})
	return clip(nodes)
}

func (m *memo) NodePoolResources(nodePool string) corev1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.resources[nodePool]
	if !ok {
		r = m.view.NodePoolResources(nodePool)
		m.resources[nodePool] = r
	}
	return r.DeepCopy()
}

func (m *memo) LeavingNodes(ctx context.Context) (map[string]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	leaving, err := m.leaving.get(func() (map[string]bool, error) { return m.view.LeavingNodes(ctx) })
	if err != nil {
		return nil, err
	}
	// Build adds the nodes a simulation removes to the map it gets.
	out := maps.Clone(leaving)
	if out == nil {
		out = map[string]bool{}
	}
	return out, nil
}

func (m *memo) Pods(ctx context.Context) ([]*corev1.Pod, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pods, err := m.pods.get(func() ([]*corev1.Pod, error) { return m.view.Pods(ctx) })
	return clip(pods), err
}

func (m *memo) NodePools(ctx context.Context) ([]*v1.NodePool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pools, err := m.nodePools.get(func() ([]*v1.NodePool, error) { return m.view.NodePools(ctx) })
	return clip(pools), err
}

// GetInstanceTypes is remembered by the pool's name: NodePools answers the
// same pools for the whole pass.
func (m *memo) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if its, ok := m.instanceTypes[np.Name]; ok {
		return clip(its), nil
	}
	its, err := m.view.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	m.instanceTypes[np.Name] = its
	return clip(its), nil
}

func (m *memo) DaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ds, err := m.daemonSets.get(func() ([]*appsv1.DaemonSet, error) { return m.view.DaemonSets(ctx) })
	return clip(ds), err
}

func (m *memo) Namespaces(ctx context.Context) ([]*corev1.Namespace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns, err := m.namespaces.get(func() ([]*corev1.Namespace, error) { return m.view.Namespaces(ctx) })
	return clip(ns), err
}

func (m *memo) Volumes(ctx context.Context) (*Volumes, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, err := m.volumes.get(func() (*Volumes, error) { return m.view.Volumes(ctx) })
	if err != nil {
		return nil, err
	}
	if v == nil {
		return &Volumes{}, nil
	}
	return &Volumes{Claims: clip(v.Claims), Volumes: clip(v.Volumes), StorageClasses: clip(v.StorageClasses)}, nil
}

func (m *memo) ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := namespace + "/" + name
	if rs, ok := m.replicaSets[key]; ok {
		return rs, nil
	}
	rs, err := m.view.ReplicaSet(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	m.replicaSets[key] = rs
	return rs, nil
}

// clip keeps an append to the returned slice from writing into the memo's.
func clip[T any](s []T) []T { return s[:len(s):len(s)] }
