package benchmark

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

func (c *checker) checkNode(h *planHost) {
	if len(h.new) == 0 {
		return
	}
	d := sumRequests(nil, h.old...)
	sumRequests(d, h.new...)
	if name, need, have, bad := overCommitted(d, h.node.Allocatable); bad {
		c.fail("node %s over-committed on %s: %g requested, %g allocatable", h.name, name, need, have)
	}
	for _, p := range h.new {
		for _, t := range h.node.Taints {
			if !tolerates(p, t) {
				c.fail("pod %s on node %s does not tolerate taint %s", podName(p), h.name, t.ToString())
			}
		}
		for k, v := range p.Spec.NodeSelector {
			if h.node.Labels[scheduling.NormalizeKey(k)] != v && h.node.Labels[k] != v {
				c.fail("pod %s on node %s: nodeSelector %s=%s not met", podName(p), h.name, k, v)
			}
		}
	}
}

// launchPrice is the cheapest offering of it that nc may launch.
func (c *checker) launchPrice(nc *scheduling.NewNodeClaim, it *scheduling.InstanceType) (float64, bool) {
	zones := nc.Requirements.Get(scheduling.LabelZone)
	cts := nc.Requirements.Get(scheduling.LabelCapacityType)
	best := math.Inf(1)
	for _, o := range it.Offerings {
		if !o.Available || !zones.Has(o.Zone) || !cts.Has(o.CapacityType) {
			continue
		}
		if c.unavailable(it.Name, o) {
			continue
		}
		best = math.Min(best, o.Price)
	}
	return best, !math.IsInf(best, 1)
}

func (c *checker) unavailable(name string, o scheduling.Offering) bool {
	for _, k := range c.in.Unavailable {
		if k.InstanceType == name && k.Zone == o.Zone && k.CapacityType == o.CapacityType {
			return true
		}
	}
	return false
}

// daemonOverhead sums the DaemonSets whose pods would run on nc: they
// tolerate its taints and their nodeSelector can hold there.
func (c *checker) daemonOverhead(nc *scheduling.NewNodeClaim) workload.Demand {
	d := workload.Demand{}
	for _, ds := range c.in.DaemonSets {
		p := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		ok := true
		for _, t := range nc.Taints {
			ok = ok && tolerates(p, t)
		}
		for k, v := range p.Spec.NodeSelector {
			ok = ok && (nc.Labels[k] == v || nc.Requirements.Get(scheduling.NormalizeKey(k)).Has(v))
		}
		if ok {
			sumRequests(d, p)
		}
	}
	return d
}

func (c *checker) checkNodeClaim(h *planHost, pool *scheduling.NodePool) {
	nc := h.nc
	if pool == nil {
		c.fail("nodeclaim %s: unknown nodepool %q", h.name, nc.NodePool)
		return
	}
	if !samePods(h.new, nc.Pods) {
		c.fail("nodeclaim %s: Pods lists %d pods, placements put %d there", h.name, len(nc.Pods), len(h.new))
	}
	if len(h.new) == 0 {
		c.fail("nodeclaim %s has no pods", h.name)
	}
	maxTypes := c.in.Options.MaxInstanceTypes
	if maxTypes == 0 {
		maxTypes = scheduling.DefaultMaxInstanceTypes
	}
	if len(nc.InstanceTypes) == 0 || len(nc.InstanceTypes) > maxTypes {
		c.fail("nodeclaim %s lists %d instance types (1..%d allowed)", h.name, len(nc.InstanceTypes), maxTypes)
	}
	for _, t := range pool.Taints {
		if !hasTaint(nc.Taints, t) {
			c.fail("nodeclaim %s lacks its nodepool's taint %s", h.name, t.ToString())
		}
	}
	for _, p := range h.new {
		for _, t := range nc.Taints {
			if !tolerates(p, t) {
				c.fail("pod %s on nodeclaim %s does not tolerate taint %s", podName(p), h.name, t.ToString())
			}
		}
	}
	demand := sumRequests(c.daemonOverhead(nc), h.new...)
	// The instance-type key is checked by lookup: intersecting a long In
	// list with each listed type is quadratic.
	types := nc.Requirements.Get(scheduling.LabelInstanceType)
	rest := nc.Requirements.Copy()
	delete(rest, scheduling.LabelInstanceType)
	// Problems with listed types are grouped by kind, one error per kind
	// per NodeClaim, so that a bad NodeClaim with 600 types is one finding.
	type finding struct {
		count int
		first string
	}
	findings := map[string]*finding{}
	var kinds []string
	note := func(kind, detail string) {
		f := findings[kind]
		if f == nil {
			f = &finding{first: detail}
			findings[kind] = f
			kinds = append(kinds, kind)
		}
		f.count++
	}
	prev := math.Inf(-1)
	for _, it := range nc.InstanceTypes {
		if !types.Has(it.Name) {
			note("lists types its "+scheduling.LabelInstanceType+" requirement excludes", it.Name)
		}
		if err := it.Requirements.Intersects(rest); err != nil {
			note("lists types that conflict with its requirements", fmt.Sprintf("%s: %v", it.Name, err))
		}
		price, ok := c.launchPrice(nc, it)
		if !ok {
			note("lists types with no launchable offering", it.Name)
		} else if price < prev-1e-9 {
			note("lists instance types not cheapest first", it.Name)
		}
		prev = math.Max(prev, price)
		if name, need, have, bad := overCommitted(demand, c.allocatable(it)); bad {
			note("over-committed", fmt.Sprintf("as %s on %s: %g requested, %g allocatable", it.Name, name, need, have))
		}
		for _, p := range h.new {
			for k, v := range p.Spec.NodeSelector {
				if nc.Labels[k] == v {
					continue
				}
				key := scheduling.NormalizeKey(k)
				r := nc.Requirements.Get(key).Intersect(it.Requirements.Get(key))
				if r.IsComplement() || len(r.Values()) != 1 || r.Values()[0] != v {
					note(fmt.Sprintf("does not guarantee nodeSelector %s=%s of pod %s", k, v, podName(p)),
						fmt.Sprintf("%s (%s)", it.Name, r))
				}
			}
		}
	}
	for _, kind := range kinds {
		f := findings[kind]
		c.fail("nodeclaim %s %s (%d of %d listed types; first: %s)", h.name, kind, f.count, len(nc.InstanceTypes), f.first)
	}
}

// checkLimits: launching any listed type of every NodeClaim must stay within
// the pool's remaining headroom, so each NodeClaim is charged its largest
// listed type.
func (c *checker) checkLimits(pools map[string]*scheduling.NodePool) {
	used := map[string]workload.Demand{}
	for _, nc := range c.res.NewNodeClaims {
		if pools[nc.NodePool] == nil {
			continue
		}
		u := used[nc.NodePool]
		if u == nil {
			u = workload.Demand{}
			used[nc.NodePool] = u
		}
		u[scheduling.ResourceNodes]++
		most := workload.Demand{}
		for _, it := range nc.InstanceTypes {
			for n, q := range it.Capacity {
				most[n] = math.Max(most[n], q.AsApproximateFloat64())
			}
		}
		for n, v := range most {
			u[n] += v
		}
	}
	for _, name := range sortedPoolNames(pools) {
		p := pools[name]
		for n, q := range p.Remaining {
			if v := used[name][n]; v > q.AsApproximateFloat64()+1e-9 {
				c.fail("nodepool %s: nodeclaims may use %g %s, %s remaining", name, v, n, q.String())
			}
		}
	}
}
