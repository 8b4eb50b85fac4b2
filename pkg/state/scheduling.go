package state

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// SchedulingNodes describes the nodes new pods may still land on, for the
// solver: every node and in-flight NodeClaim that is not being deleted,
// with its bound pods. Starting Karpenter nodes are described by their
// NodeClaim's promises (labels, requirements, taints, allocatable) since the
// Node does not show them all yet.
func (c *Cluster) SchedulingNodes() []*scheduling.ExistingNode {
	nodes := c.Nodes()
	out := make([]*scheduling.ExistingNode, 0, len(nodes))
	for _, n := range nodes {
		if n.Deleting() {
			continue
		}
		en := &scheduling.ExistingNode{
			Name:        n.Name(),
			Labels:      n.Labels(),
			Taints:      n.Taints(),
			Allocatable: n.Allocatable(),
			Initialized: n.Initialized(),
			Managed:     n.Managed(),
		}
		if n.NodeClaim != nil {
			en.NodeClaim = n.NodeClaim.Name
		}
		if n.NodeClaim != nil && !n.Initialized() {
			// A NodeClaim whose requirements do not parse is described by
			// its labels alone; say so, since it may attract pods its
			// launch will not suit.
			if reqs, err := cloudprovider.NodeClaimRequirements(n.NodeClaim); err == nil {
				en.Requirements = reqs
			} else {
				c.warnUnparsable(n.NodeClaim, err)
			}
		}
		names := make([]types.NamespacedName, 0, len(n.Pods))
		for nn := range n.Pods {
			names = append(names, nn)
		}
		sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
		for _, nn := range names {
			en.Pods = append(en.Pods, n.Pods[nn])
		}
		out = append(out, en)
	}
	return out
}

// launchCharge is what an unlaunched NodeClaim counts against its pool's
// limits: per resource, the largest capacity among the instance types its
// requirements still allow (the solver charged the plan the same), and at
// least its requests. Nil once the NodeClaim knows its capacity.
func (c *Cluster) launchCharge(nc *v1.NodeClaim) corev1.ResourceList {
	if len(nc.Status.Capacity) > 0 {
		return nil
	}
	out := nc.Spec.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	pool := nc.Labels[v1.NodePoolLabelKey]
	if c.instanceTypes == nil || pool == "" {
		return out
	}
	reqs, err := cloudprovider.NodeClaimRequirements(nc)
	if err != nil {
		c.warnUnparsable(nc, err)
		return out
	}
	allowed := reqs.Get(scheduling.LabelInstanceType)
	for _, it := range c.instanceTypes(pool) {
		if !allowed.Has(it.Name) || reqs.Intersects(it.Requirements) != nil {
			continue
		}
		maxInto(out, it.Capacity)
	}
	return out
}

// warnUnparsable logs a NodeClaim's requirement parse error once per
// NodeClaim generation.
func (c *Cluster) warnUnparsable(nc *v1.NodeClaim, err error) {
	c.parseWarnMu.Lock()
	gen, seen := c.parseWarned[nc.UID]
	if seen && gen == nc.Generation {
		c.parseWarnMu.Unlock()
		return
	}
	c.parseWarned[nc.UID] = nc.Generation
	c.parseWarnMu.Unlock()
	c.logger.Error(err, "ignoring nodeclaim requirements", "NodeClaim", map[string]string{"name": nc.Name}, "generation", nc.Generation)
}
