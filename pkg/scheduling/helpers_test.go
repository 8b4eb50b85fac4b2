package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Test builders. They keep the table-driven tests short.

type podOpt func(*corev1.Pod)

func mkPod(name, cpu, mem string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{},
		}}}},
	}
	if cpu != "" {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withNS(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

func withNodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func withRequiredTerms(terms ...[]corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		ns := &corev1.NodeSelector{}
		for _, t := range terms {
			ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = ns
	}
}

func withPreferredNode(weight int32, exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func nsr(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

func term(key string, sel map[string]string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
}

func withPodAffinity(t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func withPreferredPodAffinity(w int32, t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: t})
	}
}

func withAntiAffinity(t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func withPreferredAntiAffinity(w int32, t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: w, PodAffinityTerm: t})
	}
}

func withSpread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, sel map[string]string, mod ...func(*corev1.TopologySpreadConstraint)) podOpt {
	return func(p *corev1.Pod) {
		tsc := corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
		for _, m := range mod {
			m(&tsc)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, tsc)
	}
}

func withToleration(key, value string, effect corev1.TaintEffect) podOpt {
	return func(p *corev1.Pod) {
		op := corev1.TolerationOpEqual
		if value == "" {
			op = corev1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	}
}

func withResource(name corev1.ResourceName, q string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q) }
}

func withHostPort(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

// mkType builds an instance type with one offering per zone × capacity type.
// The price is per offering: spot is 70% of on-demand.
func mkType(name string, cpu, memGi int, price float64, zones []string, cts []string, extra ...Requirement) *InstanceType {
	it := &InstanceType{
		Name: name,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(cpu), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(memGi)<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
	}
	it.Requirements = NewRequirements(append([]Requirement{
		NewRequirement(LabelInstanceType, OpIn, name),
		NewRequirement(LabelArch, OpIn, "amd64"),
		NewRequirement(LabelOS, OpIn, "linux"),
		NewRequirement(LabelZone, OpIn, zones...),
		NewRequirement(LabelCapacityType, OpIn, cts...),
	}, extra...)...)
	for _, z := range zones {
		for _, ct := range cts {
			p := price
			if ct == CapacityTypeSpot {
				p = price * 0.7
			}
			it.Offerings = append(it.Offerings, Offering{Zone: z, CapacityType: ct, Price: p, Available: true})
		}
	}
	return it
}

var (
	zones3 = []string{"zone-a", "zone-b", "zone-c"}
	odOnly = []string{CapacityTypeOnDemand}
	both   = []string{CapacityTypeSpot, CapacityTypeOnDemand}
)

// stdTypes is a small catalogue: sizes 1..64 cpu, 4 GiB per cpu, on-demand
// price 0.05/cpu, all zones, both capacity types.
func stdTypes() []*InstanceType {
	var out []*InstanceType
	for _, c := range []int{1, 2, 4, 8, 16, 32, 64} {
		out = append(out, mkType(fmt.Sprintf("m.%dx", c), c, 4*c, 0.05*float64(c), zones3, both))
	}
	return out
}

func mkPool(name string, types []*InstanceType, mods ...func(*NodePool)) *NodePool {
	np := &NodePool{Name: name, InstanceTypes: types}
	for _, m := range mods {
		m(np)
	}
	return np
}

func poolReqs(r ...Requirement) func(*NodePool) {
	return func(np *NodePool) { np.Requirements = NewRequirements(r...) }
}

func poolTaints(t ...corev1.Taint) func(*NodePool) { return func(np *NodePool) { np.Taints = t } }

func poolWeight(w int32) func(*NodePool) { return func(np *NodePool) { np.Weight = w } }

func poolRemaining(kv ...string) func(*NodePool) {
	return func(np *NodePool) {
		np.Remaining = corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			np.Remaining[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
	}
}

func mkNode(name string, cpu, mem string, labels map[string]string, pods ...*corev1.Pod) *ExistingNode {
	l := map[string]string{LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	return &ExistingNode{Name: name, Labels: l, Initialized: true, Pods: pods, Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
	}}
}

// where reports, for each pod name, "node:<name>", "claim:<i>" or "-".
func where(res *Result) map[string]string {
	out := map[string]string{}
	for _, p := range res.Placements {
		switch {
		case p.Node != "":
			out[p.Pod.Name] = "node:" + p.Node
		case p.NodeClaim >= 0:
			out[p.Pod.Name] = fmt.Sprintf("claim:%d", p.NodeClaim)
		default:
			out[p.Pod.Name] = "-"
		}
	}
	return out
}

func claimOf(res *Result, pod string) *NewNodeClaim {
	for _, p := range res.Placements {
		if p.Pod.Name == pod && p.NodeClaim >= 0 {
			return res.NewNodeClaims[p.NodeClaim]
		}
	}
	return nil
}

func placementOf(res *Result, pod string) Placement {
	for _, p := range res.Placements {
		if p.Pod.Name == pod {
			return p
		}
	}
	return Placement{}
}
