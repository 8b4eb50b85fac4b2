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
	nodes         []*scheduling.ExistingNode
	nodesRead     bool
	leaving       map[string]bool
	pods          []*corev1.Pod
	podsRead      bool
	nodePools     []*v1.NodePool
	poolsRead     bool
	instanceTypes map[string][]*scheduling.InstanceType
	resources     map[string]corev1.ResourceList
	daemonSets    []*appsv1.DaemonSet
	dsRead        bool
	namespaces    []*corev1.Namespace
	nsRead        bool
	volumes       *Volumes
	replicaSets   map[string]*appsv1.ReplicaSet
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
	if !m.nodesRead {
		// Prepared: every simulation solves over these same nodes.
		m.nodes, m.nodesRead = scheduling.PrepareNodes(m.view.SchedulingNodes()), true
	}
	return clip(m.nodes)
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
	if m.leaving == nil {
		leaving, err := m.view.LeavingNodes(ctx)
		if err != nil {
			return nil, err
		}
		if leaving == nil {
			leaving = map[string]bool{}
		}
		m.leaving = leaving
	}
	// Build adds the nodes a simulation removes to the map it gets.
	return maps.Clone(m.leaving), nil
}

func (m *memo) Pods(ctx context.Context) ([]*corev1.Pod, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.podsRead {
		pods, err := m.view.Pods(ctx)
		if err != nil {
			return nil, err
		}
		m.pods, m.podsRead = pods, true
	}
	return clip(m.pods), nil
}

func (m *memo) NodePools(ctx context.Context) ([]*v1.NodePool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.poolsRead {
		pools, err := m.view.NodePools(ctx)
		if err != nil {
			return nil, err
		}
		m.nodePools, m.poolsRead = pools, true
	}
	return clip(m.nodePools), nil
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
	if !m.dsRead {
		ds, err := m.view.DaemonSets(ctx)
		if err != nil {
			return nil, err
		}
		m.daemonSets, m.dsRead = ds, true
	}
	return clip(m.daemonSets), nil
}

func (m *memo) Namespaces(ctx context.Context) ([]*corev1.Namespace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.nsRead {
		ns, err := m.view.Namespaces(ctx)
		if err != nil {
			return nil, err
		}
		m.namespaces, m.nsRead = ns, true
	}
	return clip(m.namespaces), nil
}

func (m *memo) Volumes(ctx context.Context) (*Volumes, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.volumes == nil {
		v, err := m.view.Volumes(ctx)
		if err != nil {
			return nil, err
		}
		if v == nil {
			v = &Volumes{}
		}
		m.volumes = v
	}
	return &Volumes{Claims: clip(m.volumes.Claims), Volumes: clip(m.volumes.Volumes), StorageClasses: clip(m.volumes.StorageClasses)}, nil
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
