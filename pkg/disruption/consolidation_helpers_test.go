package disruption

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

const zone = "z1"

// cType is an instance type with cpu cores, 4 GiB per core, 100m of cpu
// overhead, on-demand at price and spot at 70% of it, in one zone.
func cType(name string, cpu int64, price float64) *scheduling.InstanceType {
	it := &scheduling.InstanceType{
		Name: name,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(cpu*4<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, name),
			scheduling.NewRequirement(corev1.LabelArchStable, scheduling.OpIn, "amd64"),
			scheduling.NewRequirement(corev1.LabelOSStable, scheduling.OpIn, "linux"),
			scheduling.NewRequirement(corev1.LabelTopologyZone, scheduling.OpIn, zone),
			scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeOnDemand, v1.CapacityTypeSpot),
		),
		Offerings: []scheduling.Offering{
			{Zone: zone, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true},
			{Zone: zone, CapacityType: v1.CapacityTypeSpot, Price: price * 0.7, Available: true},
		},
	}
	return it
}

// catalog is m.2x, m.4x, m.8x, m.16x at $0.05 per core and hour.
func catalog() []*scheduling.InstanceType {
	var out []*scheduling.InstanceType
	for _, c := range []int64{2, 4, 8, 16} {
		out = append(out, cType(fmt.Sprintf("m.%dx", c), c, 0.05*float64(c)))
	}
	return out
}

// wideCatalog is twenty 4-core types t00..t19, each a cent dearer than
// the one before.
func wideCatalog() []*scheduling.InstanceType {
	var out []*scheduling.InstanceType
	for i := 0; i < 20; i++ {
		out = append(out, cType(fmt.Sprintf("t%02d", i), 4, 0.10+0.01*float64(i)))
	}
	return out
}

func typeNamed(its []*scheduling.InstanceType, name string) *scheduling.InstanceType {
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	panic("no instance type " + name)
}

func policy(p v1.ConsolidationPolicy) func(*v1.NodePool) {
	return func(np *v1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = p }
}

func capacityTypes(cts ...string) func(*v1.NodePool) {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: cts}}
	}
}

// cPool is a dynamic pool that consolidates underutilized nodes at once
// (consolidateAfter 0, budget 100%), on-demand only unless opts say.
func cPool(name string, opts ...func(*v1.NodePool)) *v1.NodePool {
	return pool(name, append([]func(*v1.NodePool){budgets(budget("100%")), policy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized)}, opts...)...)
}

// cNode is a consolidatable node of type it and capacity type ct, with
// the allocatable the type gives.
func cNode(name, poolName string, it *scheduling.InstanceType, ct string, opts ...nodeOpt) *Node {
	n := node(name, poolName, consolidatable, cond(v1.ConditionTypeInitialized, now.Add(-30*time.Minute)))
	for k, v := range map[string]string{
		corev1.LabelInstanceTypeStable: it.Name, v1.CapacityTypeLabelKey: ct, corev1.LabelTopologyZone: zone,
		corev1.LabelHostname: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
	} {
		n.Node.Labels[k] = v
		n.NodeClaim.Labels[k] = v
	}
	alloc := corev1.ResourceList{}
	for res, q := range it.Capacity {
		q := q.DeepCopy()
		if o, ok := it.Overhead[res]; ok {
			q.Sub(o)
		}
		alloc[res] = q
	}
	n.Node.Status.Allocatable, n.Node.Status.Capacity = alloc, it.Capacity
	for _, o := range opts {
		o(n)
	}
	return n
}

func cpuPod(name, cpu string, opts ...podOpt) *corev1.Pod {
	p := pod(name, opts...)
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
	}}}
	return p
}

// cSnap is a snapshot where every pool has the given instance types.
func cSnap(its []*scheduling.InstanceType, pools []*v1.NodePool, nodes []*Node) *Snapshot {
	s := testSnapshot(pools, nodes)
	s.InstanceTypes = map[string][]*scheduling.InstanceType{}
	for _, np := range pools {
		s.InstanceTypes[np.Name] = its
	}
	return s
}

func decide(t *testing.T, snap *Snapshot, methods ...Method) *Decision {
	t.Helper()
	d, err := Disrupt(snap, methods, SolverSimulator{View: snap.View()})
	require.NoError(t, err)
	return d
}

// verdictOf is the node's first verdict of kind k, or nil.
func verdictOf(d *Decision, nodeName string, k Kind) *Verdict {
	e := explanationOf(d, nodeName)
	if e == nil {
		return nil
	}
	for i := range e.Verdicts {
		if e.Verdicts[i].Kind == k {
			return &e.Verdicts[i]
		}
	}
	return nil
}

func typeNames(its []*scheduling.InstanceType) []string {
	out := make([]string, 0, len(its))
	for _, it := range its {
		out = append(out, it.Name)
	}
	return out
}

func single(opts ...ConsolidationOptions) Method {
	var o ConsolidationOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return NewSingleNodeConsolidation(o)
}

func multi(opts ...ConsolidationOptions) Method {
	var o ConsolidationOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return MultiNodeConsolidation{Options: o}
}
