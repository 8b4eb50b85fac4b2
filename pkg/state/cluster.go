// Package state owns the cluster-state cache: an in-memory model of every
// machine Karpenter can see, each one a Node and its NodeClaim joined by
// provider ID (NodeClaims that have not launched yet are tracked by name),
// with the pods bound to it, the DaemonSets that add overhead everywhere,
// nominations and deletion marks. Informer-fed controllers keep it current;
// provisioning, limits and the NodePool counter read it instead of listing
// the API server on every decision.
package state

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// MinNominationWindow is the shortest time a nomination lasts.
const MinNominationWindow = 10 * time.Second

// Cluster is the cluster-state cache. It is safe for concurrent use.
type Cluster struct {
	kube      client.Client
	informers InformerGetter
	clock     clock.Clock
	// nominationWindow is max(2×batchMaxDuration, 10s): long enough for the
	// kube-scheduler to bind the pods a provisioning round planned.
	nominationWindow time.Duration
	podMetrics       bool

	mu                 sync.RWMutex
	nodes              map[string]*StateNode // by key (see nodeKey / nodeClaimKey)
	nodeNameToKey      map[string]string
	nodeClaimNameToKey map[string]string
	pods               map[types.NamespacedName]*corev1.Pod // bound, not terminal
	// podsByNode holds each node's bound pods with their cpu and memory
	// requests, summed once per pod update for the NodePool counter's
	// utilization, which runs every 5 s over every node.
	podsByNode    map[string]map[types.NamespacedName]podShare
	daemonSets    map[types.NamespacedName]*appsv1.DaemonSet
	daemonSetPods map[types.NamespacedName]*corev1.Pod // newest pod per DaemonSet
	podStates     map[types.NamespacedName]podState
	podSeries     podSeriesCache
	unsyncedSince time.Time

	logger        logr.Logger
	instanceTypes func(nodePool string) []*cloudprovider.InstanceType
	// parseWarned remembers, per NodeClaim UID, the generation whose
	// unparsable requirements were last logged, so each bad spec is
	// reported once rather than on every provisioning round.
	parseWarnMu sync.Mutex
	parseWarned map[types.UID]int64
	// dirtyPools are the NodePools whose usage gauges are stale. Summing a
	// pool's usage walks every node, so doing it on each node update made
	// loading N nodes cost N²; the gauges are refreshed instead whenever
	// usage is next computed (every provisioning round and every 5s by the
	// NodePool counter, which writes the same gauges).
	dirtyMu    sync.Mutex
	dirtyPools map[string]struct{}
	// times are the pending pods' scheduling timestamps (podtimes.go).
	times podTimes
}

// Options tune a Cluster.
type Options struct {
	// BatchMaxDuration sets the nomination window (2× it, at least 10s).
	BatchMaxDuration time.Duration
	// PodMetrics makes the cluster the source of karpenter_pods_state
	// (off when cluster-state observability is disabled; the latest
	// cluster built with it is the source).
	PodMetrics bool
	// Logger reports problems found while describing nodes (the zero
	// value logs through controller-runtime's global logger).
	Logger logr.Logger
	// InstanceTypes lists the instance types a NodePool may launch, so a
	// NodeClaim that has not launched yet is charged against the pool's
	// limits at the largest capacity its requirements allow, as the solver
	// charged it. It is called outside the cache's lock, once per update of
	// an unlaunched NodeClaim, and must not call back into the Cluster.
	// Nil (or no matching type) charges the NodeClaim's requests.
	InstanceTypes func(nodePool string) []*cloudprovider.InstanceType
	// Informers, when set (the manager's cache), has Synced read the
	// NodeClaim and Node informers' stores, the cached objects themselves,
	// instead of Lists that copy every object's struct on each call (every
	// provisioning round and disruption pass: 1.3 GB in a 1,000-node soak).
	Informers InformerGetter
}

// InformerGetter gets the informer of a kind; controller-runtime's cache
// implements it.
type InformerGetter interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// NewCluster returns an empty cache. kube is used by Synced to compare the
// cache with the API server (normally the manager's cached client).
func NewCluster(clk clock.Clock, kube client.Client, opts Options) *Cluster {
	logger := opts.Logger
	if logger.GetSink() == nil {
		logger = log.Log.WithName("state")
	}
	c := &Cluster{
		kube:               kube,
		informers:          opts.Informers,
		clock:              clk,
		nominationWindow:   max(2*opts.BatchMaxDuration, MinNominationWindow),
		podMetrics:         opts.PodMetrics,
		nodes:              map[string]*StateNode{},
		nodeNameToKey:      map[string]string{},
		nodeClaimNameToKey: map[string]string{},
		pods:               map[types.NamespacedName]*corev1.Pod{},
		podsByNode:         map[string]map[types.NamespacedName]podShare{},
		daemonSets:         map[types.NamespacedName]*appsv1.DaemonSet{},
		daemonSetPods:      map[types.NamespacedName]*corev1.Pod{},
		podStates:          map[types.NamespacedName]podState{},
		logger:             logger,
		instanceTypes:      opts.InstanceTypes,
		parseWarned:        map[types.UID]int64{},
	}
	if c.podMetrics {
		c.publishPodStates()
	}
	return c
}

// Keys: a provider ID when known; otherwise a prefixed name so that a
// NodeClaim and an unrelated Node of the same name never collide.
func nodeKey(n *corev1.Node) string {
	if n.Spec.ProviderID != "" {
		return n.Spec.ProviderID
	}
	return "node/" + n.Name
}

func nodeClaimKey(nc *v1.NodeClaim) string {
	if nc.Status.ProviderID != "" {
		return nc.Status.ProviderID
	}
	return "nodeclaim/" + nc.Name
}

// UpdateNode records a Node (the object must not be modified afterwards).
func (c *Cluster) UpdateNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := nodeKey(node)
	if old, ok := c.nodeNameToKey[node.Name]; ok && old != key {
		c.detachLocked(old, func(n *StateNode) { n.Node = nil })
	}
	entry := c.entryLocked(key)
	entry.Node = node
	c.nodeNameToKey[node.Name] = key
	c.nodesChangedLocked(entry.NodePoolName())
}

// DeleteNode forgets the Node with this name.
func (c *Cluster) DeleteNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.nodeNameToKey[name]
	if !ok {
		return
	}
	pool := c.nodes[key].NodePoolName()
	delete(c.nodeNameToKey, name)
	c.detachLocked(key, func(n *StateNode) { n.Node = nil })
	c.nodesChangedLocked(pool)
}

// UpdateNodeClaim records a NodeClaim. Once it has a provider ID it joins
// the Node with the same one.
func (c *Cluster) UpdateNodeClaim(nc *v1.NodeClaim) {
	charge := c.launchCharge(nc) // outside the lock: it may ask the cloud provider
	c.mu.Lock()
	defer c.mu.Unlock()
	key := nodeClaimKey(nc)
	if old, ok := c.nodeClaimNameToKey[nc.Name]; ok && old != key {
		c.detachLocked(old, func(n *StateNode) { n.NodeClaim = nil })
	}
	entry := c.entryLocked(key)
	entry.NodeClaim = nc
	entry.launchCharge = charge
	c.nodeClaimNameToKey[nc.Name] = key
	c.nodesChangedLocked(entry.NodePoolName())
}

// DeleteNodeClaim forgets the NodeClaim with this name.
func (c *Cluster) DeleteNodeClaim(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key, ok := c.nodeClaimNameToKey[name]
	if !ok {
		return
	}
	pool := c.nodes[key].NodePoolName()
	if nc := c.nodes[key].NodeClaim; nc != nil {
		c.parseWarnMu.Lock()
		delete(c.parseWarned, nc.UID)
		c.parseWarnMu.Unlock()
	}
	delete(c.nodeClaimNameToKey, name)
	c.detachLocked(key, func(n *StateNode) { n.NodeClaim = nil })
	c.nodesChangedLocked(pool)
}

func (c *Cluster) entryLocked(key string) *StateNode {
	entry, ok := c.nodes[key]
	if !ok {
		entry = &StateNode{}
		c.nodes[key] = entry
	}
	return entry
}

// detachLocked clears one side of an entry and drops the entry once neither
// side is left.
func (c *Cluster) detachLocked(key string, clear func(*StateNode)) {
	entry, ok := c.nodes[key]
	if !ok {
		return
	}
	clear(entry)
	if entry.Node == nil && entry.NodeClaim == nil {
		delete(c.nodes, key)
	}
}

// UpdatePod records where a pod is bound. Terminal and unbound pods hold no
// resources and are dropped; terminating pods still do until they are gone.
func (c *Cluster) UpdatePod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nn := client.ObjectKeyFromObject(pod)
	if ds := daemonSetOwner(pod); ds != nil {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: ds.Name}
		if cur, ok := c.daemonSetPods[key]; !ok || !pod.CreationTimestamp.Before(&cur.CreationTimestamp) {
			c.daemonSetPods[key] = pod
		}
	}
	c.unbindLocked(nn)
	if pod.Spec.NodeName != "" && !terminal(pod) {
		c.pods[nn] = pod
		set, ok := c.podsByNode[pod.Spec.NodeName]
		if !ok {
			set = map[types.NamespacedName]podShare{}
			c.podsByNode[pod.Spec.NodeName] = set
		}
		set[nn] = shareOf(pod)
	}
	if c.podMetrics {
		c.updatePodStateLocked(nn, pod)
	}
}

// DeletePod forgets a pod.
func (c *Cluster) DeletePod(nn types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unbindLocked(nn)
	for key, p := range c.daemonSetPods {
		if p.Namespace == nn.Namespace && p.Name == nn.Name {
			delete(c.daemonSetPods, key)
		}
	}
	delete(c.podStates, nn)
	c.ClearPodSchedulingTimes(nn)
}

func (c *Cluster) unbindLocked(nn types.NamespacedName) {
	old, ok := c.pods[nn]
	if !ok {
		return
	}
	delete(c.pods, nn)
	if set := c.podsByNode[old.Spec.NodeName]; set != nil {
		delete(set, nn)
		if len(set) == 0 {
			delete(c.podsByNode, old.Spec.NodeName)
		}
	}
}

// UpdateDaemonSet records a DaemonSet.
func (c *Cluster) UpdateDaemonSet(ds *appsv1.DaemonSet) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.daemonSets[client.ObjectKeyFromObject(ds)] = ds
}

// DeleteDaemonSet forgets a DaemonSet.
func (c *Cluster) DeleteDaemonSet(nn types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.daemonSets, nn)
	delete(c.daemonSetPods, nn)
}

// DaemonSets returns the known DaemonSets, sorted by namespace/name.
func (c *Cluster) DaemonSets() []*appsv1.DaemonSet {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*appsv1.DaemonSet, 0, len(c.daemonSets))
	for _, ds := range c.daemonSets {
		out = append(out, ds)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// DaemonSetPod returns the newest pod of a DaemonSet, whose requests reflect
// admission defaults (LimitRanges) that the template lacks; nil if none.
func (c *Cluster) DaemonSetPod(ds *appsv1.DaemonSet) *corev1.Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.daemonSetPods[client.ObjectKeyFromObject(ds)]
}

// NominateNodeForPod marks the node (by Node or NodeClaim name) as the
// planned home of pending pods for the nomination window.
func (c *Cluster) NominateNodeForPod(ctx context.Context, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if entry := c.byNameLocked(name); entry != nil {
		entry.nominatedUntil = c.clock.Now().Add(c.nominationWindow)
		return
	}
	log.FromContext(ctx).V(1).Info("nominated node not in cluster state", "name", name)
}

// MarkForDeletion flags nodes (by Node or NodeClaim name) that a controller
// is about to delete, so that scheduling stops counting on them.
func (c *Cluster) MarkForDeletion(names ...string) { c.setMark(true, names) }

// UnmarkForDeletion undoes MarkForDeletion (e.g. a disruption was aborted).
func (c *Cluster) UnmarkForDeletion(names ...string) { c.setMark(false, names) }

func (c *Cluster) setMark(mark bool, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		if entry := c.byNameLocked(name); entry != nil {
			entry.markedForDeletion = mark
		}
	}
}

func (c *Cluster) byNameLocked(name string) *StateNode {
	if key, ok := c.nodeNameToKey[name]; ok {
		return c.nodes[key]
	}
	if key, ok := c.nodeClaimNameToKey[name]; ok {
		return c.nodes[key]
	}
	return nil
}

// Node returns a copy of the state node with this Node or NodeClaim name.
func (c *Cluster) Node(name string) (*StateNode, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	entry := c.byNameLocked(name)
	if entry == nil {
		return nil, false
	}
	return c.snapshotLocked(entry), true
}

// Nodes returns copies of every state node, sorted by name. Their Pods maps
// are filled in.
func (c *Cluster) Nodes() []*StateNode {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*StateNode, 0, len(c.nodes))
	for _, entry := range c.nodes {
		out = append(out, c.snapshotLocked(entry))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func (c *Cluster) snapshotLocked(entry *StateNode) *StateNode {
	out := entry.clone()
	out.Pods = map[types.NamespacedName]*corev1.Pod{}
	if entry.Node != nil {
		for nn := range c.podsByNode[entry.Node.Name] {
			out.Pods[nn] = c.pods[nn]
		}
	}
	return out
}

// Synced reports whether every NodeClaim and Node in the API server (as the
// client sees it) is in the cache, so that decisions made from the cache
// cannot miss capacity. It also keeps karpenter_cluster_state_synced.
func (c *Cluster) Synced(ctx context.Context) bool {
	synced, err := c.synced(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "checking cluster state sync")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if synced {
		c.unsyncedSince = time.Time{}
		metrics.ClusterStateSynced.Set(1)
		metrics.ClusterStateUnsyncedTimeSeconds.Set(0)
	} else {
		if c.unsyncedSince.IsZero() {
			c.unsyncedSince = now
		}
		metrics.ClusterStateSynced.Set(0)
		metrics.ClusterStateUnsyncedTimeSeconds.Set(now.Sub(c.unsyncedSince).Seconds())
	}
	return synced
}

func (c *Cluster) synced(ctx context.Context) (bool, error) {
	nodeClaims, err := listed[*v1.NodeClaim](ctx, c, &v1.NodeClaimList{}, &v1.NodeClaim{})
	if err != nil {
		return false, fmt.Errorf("listing nodeclaims: %w", err)
	}
	nodes, err := listed[*corev1.Node](ctx, c, &corev1.NodeList{}, &corev1.Node{})
	if err != nil {
		return false, fmt.Errorf("listing nodes: %w", err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, nc := range nodeClaims {
		key, ok := c.nodeClaimNameToKey[nc.Name]
		// A launched NodeClaim still keyed by name means the launch has not
		// reached the cache yet.
		if !ok || (nc.Status.ProviderID != "" && key != nc.Status.ProviderID) {
			return false, nil
		}
	}
	for _, n := range nodes {
		if _, ok := c.nodeNameToKey[n.Name]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// listed returns the objects of a kind as the client sees them, for
// reading only: the informer's stored objects when the cluster has
// informers whose store is synced, otherwise a List through the client
// without deep copies.
func listed[T client.Object](ctx context.Context, c *Cluster, list client.ObjectList, obj T) ([]T, error) {
	if c.informers != nil {
		inf, err := c.informers.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("getting the informer: %w", err)
		}
		if withStore, ok := inf.(interface{ GetStore() toolscache.Store }); ok && inf.HasSynced() {
			items := withStore.GetStore().List()
			out := make([]T, 0, len(items))
			for _, item := range items {
				if o, ok := item.(T); ok {
					out = append(out, o)
				}
			}
			return out, nil
		}
	}
	if err := c.kube.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(items))
	for _, item := range items {
		if o, ok := item.(T); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// Reset empties the cache (tests).
func (c *Cluster) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = map[string]*StateNode{}
	c.nodeNameToKey = map[string]string{}
	c.nodeClaimNameToKey = map[string]string{}
	c.pods = map[types.NamespacedName]*corev1.Pod{}
	c.podsByNode = map[string]map[types.NamespacedName]podShare{}
	c.daemonSets = map[types.NamespacedName]*appsv1.DaemonSet{}
	c.daemonSetPods = map[types.NamespacedName]*corev1.Pod{}
	c.podStates = map[types.NamespacedName]podState{}
	c.unsyncedSince = time.Time{}
	c.parseWarnMu.Lock()
	c.parseWarned = map[types.UID]int64{}
	c.parseWarnMu.Unlock()
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func daemonSetOwner(p *corev1.Pod) *metav1.OwnerReference {
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return ref
	}
	return nil
}

func isDaemonSetPod(p *corev1.Pod) bool { return daemonSetOwner(p) != nil }
