package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// NodePoolUsage is what a NodePool's nodes add up to.
type NodePoolUsage struct {
	// Resources sums the capacity of the pool's nodes and in-flight
	// NodeClaims, leaving out those being deleted. A NodeClaim that has
	// not launched yet counts the largest capacity its requirements allow
	// (see Options.InstanceTypes), so limits hold between creating a
	// NodeClaim and learning its real size, whichever type it gets.
	Resources corev1.ResourceList
	// Nodes counts them.
	Nodes int
}

// NodePoolUsage returns the usage of one NodePool.
func (c *Cluster) NodePoolUsage(name string) NodePoolUsage {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.usageLocked()[name]
}

// NodePoolsUsage returns the usage of every NodePool that has nodes.
func (c *Cluster) NodePoolsUsage() map[string]NodePoolUsage {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.usageLocked()
}

// NodePoolResources is NodePoolUsage as a resource list with the "nodes"
// pseudo-resource added, the shape of NodePool status.resources and
// spec.limits.
func (c *Cluster) NodePoolResources(nodePool string) corev1.ResourceList {
	u := c.NodePoolUsage(nodePool)
	out := u.Resources.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	out[ResourceNodes] = *resource.NewQuantity(int64(u.Nodes), resource.DecimalSI)
	return out
}

// NodeOffering is a launched node's offering and how much of it its pods
// request.
type NodeOffering struct {
	scheduling.OfferingKey
	// NodeClaim is the node's NodeClaim ("" for a Node without one).
	NodeClaim string
	// Utilization is the larger of the cpu and memory shares of the node's
	// allocatable that its pods (DaemonSet pods included) request, at most 1.
	Utilization float64
}

// NodePoolOfferings are the offerings the pool's launched nodes run on
// (instance type, zone and capacity type from their labels), one per node,
// leaving out nodes being deleted and NodeClaims that have not launched.
func (c *Cluster) NodePoolOfferings(nodePool string) []NodeOffering {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []NodeOffering
	for _, n := range c.nodes {
		if n.NodePoolName() != nodePool || n.Deleting() {
			continue
		}
		key := scheduling.OfferingKeyOf(n.Labels())
		if key.InstanceType == "" {
			continue
		}
		claim := ""
		if n.NodeClaim != nil {
			claim = n.NodeClaim.Name
		}
		out = append(out, NodeOffering{OfferingKey: key, NodeClaim: claim, Utilization: c.utilizationLocked(n)})
	}
	return out
}

// utilizationLocked is NodeOffering.Utilization, from the requests of the
// pods bound to n as recorded when each was last updated.
func (c *Cluster) utilizationLocked(n *StateNode) float64 {
	alloc := n.Allocatable()
	var requested podShare
	if n.Node != nil {
		for _, share := range c.podsByNode[n.Node.Name] {
			requested.cpu += share.cpu
			requested.memory += share.memory
		}
	}
	u := 0.0
	for _, r := range [...]struct {
		name corev1.ResourceName
		q    float64
	}{{corev1.ResourceCPU, requested.cpu}, {corev1.ResourceMemory, requested.memory}} {
		a, ok := alloc[r.name]
		if !ok || a.IsZero() {
			continue
		}
		u = max(u, r.q/a.AsApproximateFloat64())
	}
	return min(u, 1)
}

// podShare is what a bound pod requests of its node's cpu and memory.
type podShare struct{ cpu, memory float64 }

func shareOf(p *corev1.Pod) podShare {
	requests := scheduling.PodRequests(p)
	cpu, memory := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	return podShare{cpu: cpu.AsApproximateFloat64(), memory: memory.AsApproximateFloat64()}
}

// ResourceNodes is the pseudo-resource that counts a pool's nodes.
const ResourceNodes corev1.ResourceName = "nodes"

func (c *Cluster) usageLocked() map[string]NodePoolUsage {
	out := map[string]NodePoolUsage{}
	for _, n := range c.nodes {
		pool := n.NodePoolName()
		if pool == "" || n.Deleting() {
			continue
		}
		u, ok := out[pool]
		if !ok {
			u.Resources = corev1.ResourceList{}
		}
		capacity := n.Capacity()
		if len(capacity) == 0 && n.NodeClaim != nil {
			capacity = n.launchCharge
			if capacity == nil {
				capacity = n.NodeClaim.Spec.Resources.Requests
			}
		}
		addInto(u.Resources, capacity)
		u.Nodes++
		out[pool] = u
	}
	c.flushUsageGauges(out)
	return out
}

// nodesChangedLocked refreshes the node-count gauge and marks the pool's
// usage gauges stale.
func (c *Cluster) nodesChangedLocked(pool string) {
	metrics.ClusterStateNodeCount.Set(float64(len(c.nodes)))
	if pool == "" {
		return
	}
	c.dirtyMu.Lock()
	if c.dirtyPools == nil {
		c.dirtyPools = map[string]struct{}{}
	}
	c.dirtyPools[pool] = struct{}{}
	c.dirtyMu.Unlock()
}

// flushUsageGauges writes the usage gauges of the stale pools from usage,
// which covers every pool. Readers hold only the read lock, hence the
// separate mutex.
func (c *Cluster) flushUsageGauges(usage map[string]NodePoolUsage) {
	c.dirtyMu.Lock()
	defer c.dirtyMu.Unlock()
	for pool := range c.dirtyPools {
		metrics.NodePoolUsage.DeletePartialMatch(map[string]string{metrics.NodePoolLabel: pool})
		for name, q := range usage[pool].Resources {
			metrics.NodePoolUsage.WithLabelValues(pool, string(name)).Set(quantityValue(q))
		}
		delete(c.dirtyPools, pool)
	}
}

func quantityValue(q resource.Quantity) float64 { return q.AsApproximateFloat64() }
