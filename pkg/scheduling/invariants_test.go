package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkInvariants verifies a Result against its Input independently of the
// solver's internals: no over-commit, no untolerated taint, requirements
// respected, required anti-affinity and affinity honoured.
func checkInvariants(in *Input, res *Result) error {
	if len(res.Placements) != len(in.Pods) {
		return fmt.Errorf("%d placements for %d pods", len(res.Placements), len(in.Pods))
	}
	pools := map[string]*NodePool{}
	for _, np := range in.NodePools {
		pools[np.Name] = np
	}
	nodes := map[string]*ExistingNode{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	type binView struct {
		name   string
		reqs   Requirements // node labels or claim requirements
		pods   []*corev1.Pod
		isNode bool
	}
	bins := map[string]*binView{}
	onNode := map[string][]*corev1.Pod{}
	onClaim := map[int][]*corev1.Pod{}
	for i, p := range res.Placements {
		if p.Pod != in.Pods[i] {
			return fmt.Errorf("placement %d is for another pod", i)
		}
		switch {
		case p.Node != "" && p.NodeClaim >= 0:
			return fmt.Errorf("pod %s placed twice", p.Pod.Name)
		case p.Node != "":
			if nodes[p.Node] == nil {
				return fmt.Errorf("pod %s on unknown node %s", p.Pod.Name, p.Node)
			}
			onNode[p.Node] = append(onNode[p.Node], p.Pod)
		case p.NodeClaim >= 0:
			if p.NodeClaim >= len(res.NewNodeClaims) {
				return fmt.Errorf("pod %s on unknown claim %d", p.Pod.Name, p.NodeClaim)
			}
			onClaim[p.NodeClaim] = append(onClaim[p.NodeClaim], p.Pod)
		default:
			if len(p.Errors) == 0 {
				return fmt.Errorf("pod %s unplaced without a reason", p.Pod.Name)
			}
		}
	}
	podReqsOK := func(p *corev1.Pod, r Requirements, allowUndefined bool) error {
		var wellKnown map[string]bool
		if allowUndefined {
			wellKnown = wellKnownSet(in.WellKnownLabels)
		}
		ns := RequirementsFromLabels(p.Spec.NodeSelector)
		if err := r.compatible(ns, "target", wellKnown); err != nil {
			return err
		}
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			var last error
			for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				tr, err := RequirementsFromNodeSelector(t.MatchExpressions)
				if err != nil {
					return err
				}
				if last = r.compatible(tr, "target", wellKnown); last == nil {
					return nil
				}
			}
			return last
		}
		return nil
	}
	// existing nodes
	for name, pods := range onNode {
		n := nodes[name]
		ri := newResIndex()
		used := corev1.ResourceList{}
		live := 0
		for _, p := range append(append([]*corev1.Pod(nil), n.Pods...), pods...) {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			live++
			addList(used, PodRequests(p))
		}
		ri.addAll(used)
		ri.addAll(n.Allocatable)
		u, a := ri.vec(used), ri.vec(n.Allocatable)
		if _, ok := n.Allocatable[corev1.ResourcePods]; ok {
			u[resPods] = int64(live)
		}
		for i := range u {
			if u[i] > a[i] {
				return fmt.Errorf("node %s over-committed on %s: %d > %d", name, ri.names[i], u[i], a[i])
			}
		}
		r := RequirementsFromLabels(n.Labels)
		for _, p := range pods {
			var skip func(*corev1.Taint) bool
			if n.Managed && !n.Initialized {
				skip = ephemeralTaint
			}
			if t := untolerated(p.Spec.Tolerations, n.Taints, false, skip); t != nil {
				return fmt.Errorf("pod %s on node %s does not tolerate %s", p.Name, name, taintString(t))
			}
			if err := podReqsOK(p, r, n.Requirements != nil); err != nil {
				return fmt.Errorf("pod %s on node %s: %v", p.Name, name, err)
			}
		}
		bins["node/"+name] = &binView{name: name, reqs: r, pods: append(append([]*corev1.Pod(nil), n.Pods...), pods...), isNode: true}
	}
	for _, n := range in.Nodes {
		if _, ok := bins["node/"+n.Name]; !ok && len(n.Pods) > 0 {
			bins["node/"+n.Name] = &binView{name: n.Name, reqs: RequirementsFromLabels(n.Labels), pods: n.Pods, isNode: true}
		}
	}
	// new NodeClaims
	for i, nc := range res.NewNodeClaims {
		np := pools[nc.NodePool]
		if np == nil {
			return fmt.Errorf("claim %d from unknown pool %s", i, nc.NodePool)
		}
		if len(nc.InstanceTypes) == 0 {
			return fmt.Errorf("claim %d has no instance types", i)
		}
		if len(nc.Pods) != len(onClaim[i]) {
			return fmt.Errorf("claim %d lists %d pods but %d placements point to it", i, len(nc.Pods), len(onClaim[i]))
		}
		req := corev1.ResourceList{}
		for _, p := range nc.Pods {
			addList(req, PodRequests(p))
		}
		for _, it := range nc.InstanceTypes {
			ri := newResIndex()
			ri.addAll(req)
			ri.addAll(it.Capacity)
			alloc := ri.vec(it.Capacity)
			alloc.sub(ri.vec(it.Overhead))
			u := ri.vec(req)
			u[resPods] = int64(len(nc.Pods))
			if _, ok := it.Capacity[corev1.ResourcePods]; !ok {
				alloc[resPods] = 1 << 40
			}
			for j := range u {
				if u[j] > alloc[j] {
					return fmt.Errorf("claim %d over-commits %s on %s: %d > %d", i, ri.names[j], it.Name, u[j], alloc[j])
				}
			}
			if err := it.Requirements.Intersects(nc.Requirements); err != nil {
				return fmt.Errorf("claim %d lists incompatible type %s: %v", i, it.Name, err)
			}
		}
		poolR := np.Requirements.Copy()
		if poolR == nil {
			poolR = Requirements{}
		}
		if err := nc.Requirements.Intersects(poolR); err != nil {
			return fmt.Errorf("claim %d breaks its pool's requirements: %v", i, err)
		}
		r := nc.Requirements.Copy()
		r[LabelHostname] = NewRequirement(LabelHostname, OpIn, nc.Hostname)
		for _, p := range nc.Pods {
			if t := untolerated(p.Spec.Tolerations, np.Taints, false, nil); t != nil {
				return fmt.Errorf("pod %s on claim %d (pool %s) does not tolerate %s", p.Name, i, np.Name, taintString(t))
			}
			if err := podReqsOK(p, r, true); err != nil {
				return fmt.Errorf("pod %s on claim %d: %v", p.Name, i, err)
			}
		}
		bins[fmt.Sprintf("claim/%d", i)] = &binView{name: nc.Hostname, reqs: r, pods: nc.Pods}
	}
	// required pod anti-affinity: a pod with a term never shares a possible
	// domain with a pod its selector matches.
	sel := func(t *corev1.PodAffinityTerm, owner *corev1.Pod, p *corev1.Pod) bool {
		if t.LabelSelector == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			return false
		}
		nsOK := p.Namespace == owner.Namespace
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			nsOK = false
			for _, n := range t.Namespaces {
				nsOK = nsOK || n == p.Namespace
			}
			if t.NamespaceSelector != nil && len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
				nsOK = true
			}
		}
		return nsOK && s.Matches(labels.Set(p.Labels))
	}
	type placed struct {
		p *corev1.Pod
		b *binView
	}
	var all []placed
	for _, k := range sortedKeys(bins) {
		for _, p := range bins[k].pods {
			all = append(all, placed{p, bins[k]})
		}
	}
	newPod := map[*corev1.Pod]bool{}
	for _, p := range in.Pods {
		newPod[p] = true
	}
	// index pods by the single domain their bin is pinned to, per key
	byDomain := map[string]map[string][]placed{}
	domainOf := func(x placed, key string) string {
		if key == LabelHostname {
			return x.b.name
		}
		r := x.b.reqs.Get(key)
		if r.Len() == 1 {
			return r.Values()[0]
		}
		return ""
	}
	index := func(key string) map[string][]placed {
		if m, ok := byDomain[key]; ok {
			return m
		}
		m := map[string][]placed{}
		for _, x := range all {
			if d := domainOf(x, key); d != "" {
				m[d] = append(m[d], x)
			}
		}
		byDomain[key] = m
		return m
	}
	for _, a := range all {
		if a.p.Spec.Affinity == nil || a.p.Spec.Affinity.PodAntiAffinity == nil {
			continue
		}
		for ti := range a.p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			t := &a.p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[ti]
			key := NormalizeKey(t.TopologyKey)
			d := domainOf(a, key)
			if d == "" {
				continue
			}
			for _, b := range index(key)[d] {
				if a.p == b.p || !(newPod[a.p] || newPod[b.p]) || !sel(t, a.p, b.p) {
					continue
				}
				return fmt.Errorf("anti-affinity on %s: %s and %s share %s", key, a.p.Name, b.p.Name, d)
			}
		}
	}
	// required pod affinity: a non-self-selecting pod has a matching pod in
	// its (pinned) domain.
	for _, a := range all {
		if !newPod[a.p] || a.p.Spec.Affinity == nil || a.p.Spec.Affinity.PodAffinity == nil {
			continue
		}
		for ti := range a.p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			t := &a.p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[ti]
			key := NormalizeKey(t.TopologyKey)
			if sel(t, a.p, a.p) {
				continue
			}
			d := domainOf(a, key)
			ok := false
			for _, b := range index(key)[d] {
				if d != "" && b.p != a.p && sel(t, a.p, b.p) {
					ok = true
					break
				}
			}
			if !ok {
				return fmt.Errorf("pod affinity of %s on %s not satisfied", a.p.Name, key)
			}
		}
	}
	return nil
}
