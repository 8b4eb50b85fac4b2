// Package benchmark measures consolidation offline, in the pure packages:
// synthetic clusters on the default kwok catalog, consolidated by the
// repacking planner and by upstream's methods in the same process, and a
// churn replay with a simulated clock. It owns the synthetic clusters, the
// way commands are carried out on them (evicted pods bound as a
// kube-scheduler would, leftovers provisioned by the solver), the cost
// lower bound, and the reports.
package benchmark

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// Epoch is the synthetic clock's start.
var Epoch = time.Date(2026, 3, 4, 8, 0, 0, 0, time.UTC)

// PodsPerNode is how many application pods each synthetic node starts with.
const PodsPerNode = 10

// Pools are the synthetic NodePools: on-demand amd64, spot amd64 and
// on-demand arm64, each c/m/r families only.
var Pools = []string{"general", "spot", "arm"}

// shape is one pod size.
type shape struct {
	name   string
	cpu    int64 // millicores
	memory int64 // MiB
}

// shapes mix cpu-heavy, balanced and memory-heavy pods of several sizes.
var shapes = []shape{
	{"small", 250, 512}, {"cpu1", 1000, 1024}, {"cpu2", 2000, 2048}, {"bal1", 500, 2048},
	{"bal2", 1000, 4096}, {"mem1", 500, 4096}, {"mem2", 1000, 8192}, {"tiny", 100, 256},
}

// daemon is the per-node agent every node runs.
var daemon = shape{"node-agent", 100, 128}

// Cluster is a synthetic cluster: a snapshot the benchmark mutates as
// commands are carried out, and the catalog behind it.
type Cluster struct {
	Snap    *disruption.Snapshot
	Catalog []*scheduling.InstanceType
	rng     *rand.Rand
	seq     int
	// Fresh counts evicted pods that found no existing node and needed a
	// newly provisioned one.
	Fresh int
	// Evictions counts pods evicted by disruption commands.
	Evictions int
	// Reevictions counts the evictions of pods that replace an evicted
	// pod: pods a move put somewhere a later move evicted again.
	Reevictions int
	// Commands counts commands carried out.
	Commands int
	// pools are the NodePools new NodeClaims may come from (Pools when
	// nil); noDaemon: nodes run no DaemonSet pod.
	pools    []string
	noDaemon bool
}

// poolNames are the pools new NodeClaims may come from.
func (c *Cluster) poolNames() []string {
	if c.pools != nil {
		return c.pools
	}
	return Pools
}

// NewCluster builds nodes nodes (spread evenly over Pools) of PodsPerNode
// pods each, every node the cheapest type of its pool that holds its pods
// and the DaemonSet, then scales in: removes scaleIn (0.3) of the
// application pods at random. It is deterministic for a seed.
func NewCluster(nodes int, scaleIn float64, seed int64) (*Cluster, error) {
	cat, err := kwok.LoadCatalog(kwok.CatalogDefault)
	if err != nil {
		return nil, fmt.Errorf("loading the kwok catalog: %w", err)
	}
	c := &Cluster{Catalog: cat, rng: rand.New(rand.NewSource(seed))}
	c.Snap = &disruption.Snapshot{Now: Epoch, NodePools: map[string]*v1.NodePool{}, InstanceTypes: map[string][]*scheduling.InstanceType{}}
	for _, name := range Pools {
		c.Snap.NodePools[name] = nodePool(name)
		c.Snap.InstanceTypes[name] = cat
	}
	for i := 0; i < nodes; i++ {
		pool := Pools[i%len(Pools)]
		var pods []*corev1.Pod
		for j := 0; j < PodsPerNode; j++ {
			pods = append(pods, c.appPod(pool, shapes[c.rng.Intn(len(shapes))]))
		}
		it, o, err := c.cheapestFit(pool, pods, fmt.Sprintf("test-zone-%c", 'a'+i%3))
		if err != nil {
			return nil, err
		}
		n := c.AddNode(pool, it, o, Epoch.Add(-2*time.Hour))
		for _, p := range pods {
			c.Bind(p, n)
		}
	}
	if scaleIn > 0 {
		c.ScaleIn(scaleIn)
	}
	return c, nil
}

// nodePool is a pool that consolidates at once (consolidateAfter 0,
// budget 100%).
func nodePool(name string) *v1.NodePool {
	reqs := []v1.NodeSelectorRequirementWithMinValues{
		{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
	}
	switch name {
	case "spot":
		reqs = append(reqs, v1.NodeSelectorRequirementWithMinValues{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}},
			v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
	case "arm":
		reqs = append(reqs, v1.NodeSelectorRequirementWithMinValues{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
			v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}})
	default:
		reqs = append(reqs, v1.NodeSelectorRequirementWithMinValues{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
			v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
	}
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{
			Disruption: v1.Disruption{
				ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter:    v1.NewNillableDuration(0),
				Budgets:             []v1.Budget{{Nodes: "100%"}},
			},
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{Requirements: reqs}},
		},
		Status: readyStatus(),
	}
}

// readyStatus is a pool's status once the NodePool controllers found it
// valid and its NodeClass ready: only Ready pools are launched into.
func readyStatus() v1.NodePoolStatus {
	return v1.NodePoolStatus{Conditions: []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}}}
}

func (c *Cluster) name(prefix string) string {
	c.seq++
	return fmt.Sprintf("%s-%06d", prefix, c.seq)
}

// appPod is a ReplicaSet pod of shape s pinned to pool.
func (c *Cluster) appPod(pool string, s shape) *corev1.Pod {
	name := c.name(pool + "-" + s.name)
	return newPod(name, pool, s, "ReplicaSet", pool+"-"+s.name)
}

func newPod(name, pool string, s shape, ownerKind, owner string) *corev1.Pod {
	controller := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name), Labels: map[string]string{"app": owner},
			OwnerReferences:   []metav1.OwnerReference{{Kind: ownerKind, Name: owner, APIVersion: "apps/v1", Controller: &controller}},
			CreationTimestamp: metav1.NewTime(Epoch.Add(-2 * time.Hour)),
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(s.cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(s.memory<<20, resource.BinarySI),
		}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if pool != "" {
		p.Spec.NodeSelector = map[string]string{v1.NodePoolLabelKey: pool}
	}
	return p
}

// allocatable is capacity minus overhead.
func allocatable(it *scheduling.InstanceType) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, q := range it.Capacity {
		q = q.DeepCopy()
		if o, ok := it.Overhead[k]; ok {
			q.Sub(o)
		}
		out[k] = q
	}
	return out
}

// poolReqs are the pool's requirements.
func (c *Cluster) poolReqs(pool string) scheduling.Requirements {
	reqs, err := snapshot.Requirements(c.Snap.NodePools[pool].Spec.Template.Spec.Requirements)
	if err != nil {
		panic(err) // the pools above are valid
	}
	return reqs
}

// poolOffer is the cheapest offering of it the pool may buy in zone ("":
// any), or nil when the pool cannot use it.
func (c *Cluster) poolOffer(pool string, it *scheduling.InstanceType, zone string) *scheduling.Offering {
	return cheapestOffer(c.poolReqs(pool), it, zone)
}

// cheapestOffer is the cheapest available offering of it that reqs allow
// in zone ("": any), or nil when reqs rule the type out.
func cheapestOffer(reqs scheduling.Requirements, it *scheduling.InstanceType, zone string) *scheduling.Offering {
	for _, k := range reqs.Keys() {
		if k == v1.CapacityTypeLabelKey || k == corev1.LabelTopologyZone {
			continue
		}
		if it.Requirements.Has(k) && !reqs.Get(k).Overlaps(it.Requirements.Get(k)) {
			return nil
		}
		if !it.Requirements.Has(k) && !reqs.Get(k).IsComplement() {
			return nil
		}
	}
	var best *scheduling.Offering
	for i := range it.Offerings {
		o := &it.Offerings[i]
		if !o.Available || !reqs.Get(v1.CapacityTypeLabelKey).Has(o.CapacityType) || (zone != "" && o.Zone != zone) {
			continue
		}
		if best == nil || o.Price < best.Price {
			best = o
		}
	}
	return best
}

// PodFloor is a floor under the $/h of any fleet, of types reqs allow,
// that runs n pods requesting cpu millicores and mem bytes: a machine
// holds at most as many of them as its allocatable has room for, so the
// fleet costs at least n times the cheapest price per pod over the types.
// Other pods only add to it, so it bounds a whole fleet from below.
func PodFloor(types []*scheduling.InstanceType, reqs scheduling.Requirements, cpu, mem int64, n int) float64 {
	best := math.Inf(1)
	for _, it := range types {
		o := cheapestOffer(reqs, it, "")
		if o == nil {
			continue
		}
		a := allocatable(it)
		k := min(a.Cpu().MilliValue()/cpu, a.Memory().Value()/mem, a.Pods().Value())
		if k > 0 {
			best = math.Min(best, o.Price/float64(k))
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best * float64(n)
}

// cheapestFit is the cheapest type of pool (in zone) whose allocatable
// holds pods and the DaemonSet pod.
func (c *Cluster) cheapestFit(pool string, pods []*corev1.Pod, zone string) (*scheduling.InstanceType, *scheduling.Offering, error) {
	var need [2]float64
	for _, p := range append(pods, newPod("probe", "", daemon, "DaemonSet", "x")) {
		r := scheduling.PodRequests(p)
		need[0] += float64(r.Cpu().MilliValue())
		need[1] += float64(r.Memory().Value())
	}
	var bestIt *scheduling.InstanceType
	var bestO *scheduling.Offering
	for _, it := range c.Catalog {
		a := allocatable(it)
		if float64(a.Cpu().MilliValue()) < need[0] || float64(a.Memory().Value()) < need[1] || a.Pods().Value() < int64(len(pods)+1) {
			continue
		}
		o := c.poolOffer(pool, it, zone)
		if o == nil {
			continue
		}
		if bestO == nil || o.Price < bestO.Price || (o.Price == bestO.Price && it.Name < bestIt.Name) {
			bestIt, bestO = it, o
		}
	}
	if bestIt == nil {
		return nil, nil, fmt.Errorf("no type of pool %s holds %.0fm cpu and %.0f bytes", pool, need[0], need[1])
	}
	return bestIt, bestO, nil
}

// AddNode creates an initialized, consolidatable node of it bought with o
// in pool, running the DaemonSet pod.
func (c *Cluster) AddNode(pool string, it *scheduling.InstanceType, o *scheduling.Offering, created time.Time) *disruption.Node {
	name := c.name("node")
	labels := map[string]string{}
	for _, k := range it.Requirements.Keys() {
		r := it.Requirements.Get(k)
		if !r.IsComplement() && r.Len() == 1 {
			labels[k] = r.Values()[0]
		}
	}
	labels[corev1.LabelInstanceTypeStable] = it.Name
	labels[corev1.LabelTopologyZone] = o.Zone
	labels[v1.CapacityTypeLabelKey] = o.CapacityType
	labels[v1.NodePoolLabelKey] = pool
	labels[corev1.LabelHostname] = name
	nodeLabels := map[string]string{}
	for k, v := range labels {
		nodeLabels[k] = v
	}
	ts := metav1.NewTime(created)
	n := &disruption.Node{
		NodeClaim: &v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: ts},
			Status: v1.NodeClaimStatus{Conditions: []v1.Condition{
				{Type: v1.ConditionTypeInitialized, Status: "True", LastTransitionTime: ts},
				{Type: v1.ConditionTypeConsolidatable, Status: "True", LastTransitionTime: ts},
			}},
		},
		Node: &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels, CreationTimestamp: ts},
			Status: corev1.NodeStatus{
				Capacity: it.Capacity, Allocatable: allocatable(it),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		},
		NodePool:    pool,
		Initialized: true,
	}
	if !c.noDaemon {
		ds := newPod(name+"-agent", "", daemon, "DaemonSet", daemon.name)
		ds.Namespace = "kube-system"
		ds.Spec.NodeName = name
		n.Pods = append(n.Pods, ds)
	}
	c.Snap.Nodes = append(c.Snap.Nodes, n)
	return n
}

// Bind puts p on n.
func (c *Cluster) Bind(p *corev1.Pod, n *disruption.Node) {
	p.Spec.NodeName = n.Name()
	n.Pods = append(n.Pods, p)
}

// ScaleIn removes share of the application pods at random.
func (c *Cluster) ScaleIn(share float64) {
	type ref struct {
		n *disruption.Node
		i int
	}
	var all []ref
	for _, n := range c.Snap.Nodes {
		for i, p := range n.Pods {
			if disruption.Reschedulable(p) {
				all = append(all, ref{n, i})
			}
		}
	}
	drop := map[*corev1.Pod]bool{}
	perm := c.rng.Perm(len(all))
	for _, k := range perm[:int(math.Round(share*float64(len(all))))] {
		drop[all[k].n.Pods[all[k].i]] = true
	}
	for _, n := range c.Snap.Nodes {
		kept := n.Pods[:0]
		for _, p := range n.Pods {
			if !drop[p] {
				kept = append(kept, p)
			}
		}
		n.Pods = kept
	}
}

// Price is the fleet's $/h: every node at its cheapest offering matching
// its labels.
func (c *Cluster) Price() float64 {
	total := 0.0
	for _, n := range c.Snap.Nodes {
		total += nodePrice(c.Snap, n)
	}
	return total
}

func nodePrice(snap *disruption.Snapshot, n *disruption.Node) float64 {
	labels := n.Node.Labels
	for _, it := range snap.InstanceTypes[n.NodePool] {
		if it.Name != labels[corev1.LabelInstanceTypeStable] {
			continue
		}
		price, _ := it.PriceFor(labels) // +Inf when no offering matches
		return price
	}
	return math.Inf(1)
}

// AppPods counts the application (reschedulable) pods.
func (c *Cluster) AppPods() int {
	total := 0
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			if disruption.Reschedulable(p) {
				total++
			}
		}
	}
	return total
}

// sortNodes keeps the snapshot in name order (deterministic passes).
func (c *Cluster) sortNodes() {
	sort.SliceStable(c.Snap.Nodes, func(i, j int) bool { return c.Snap.Nodes[i].Name() < c.Snap.Nodes[j].Name() })
}
