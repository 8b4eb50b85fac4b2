package repack_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/benchmark"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

var now = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

const zone = "z1"

// itype has cpu cores and 4 GiB per core, on-demand at price.
func itype(name string, cpu int64, price float64) *scheduling.InstanceType {
	return &scheduling.InstanceType{
		Name: name,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(cpu*4<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		},
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, name),
			scheduling.NewRequirement(corev1.LabelArchStable, scheduling.OpIn, "amd64"),
			scheduling.NewRequirement(corev1.LabelOSStable, scheduling.OpIn, "linux"),
			scheduling.NewRequirement(corev1.LabelTopologyZone, scheduling.OpIn, zone),
			scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeOnDemand),
		),
		Offerings: []scheduling.Offering{{Zone: zone, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}},
	}
}

func nodePool(name string, budget string) *v1.NodePool {
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{
			Disruption: v1.Disruption{ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter: v1.NewNillableDuration(0), Budgets: []v1.Budget{{Nodes: budget}}},
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}}}}},
		},
		// Ready, as the NodePool controllers leave a valid pool whose
		// NodeClass is ready: only Ready pools are launched into.
		Status: v1.NodePoolStatus{Conditions: []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}}},
	}
}

func pod(name string, milli int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", APIVersion: "apps/v1"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// node is an initialized, consolidatable node of it in pool "p" holding
// pods.
func node(name string, it *scheduling.InstanceType, pods ...*corev1.Pod) *disruption.Node {
	labels := map[string]string{
		corev1.LabelInstanceTypeStable: it.Name, v1.CapacityTypeLabelKey: v1.CapacityTypeOnDemand, corev1.LabelTopologyZone: zone,
		corev1.LabelHostname: name, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", v1.NodePoolLabelKey: "p",
	}
	ts := metav1.NewTime(now.Add(-time.Hour))
	n := &disruption.Node{
		NodeClaim: &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: ts},
			Status: v1.NodeClaimStatus{Conditions: []v1.Condition{
				{Type: v1.ConditionTypeInitialized, Status: "True", LastTransitionTime: ts},
				{Type: v1.ConditionTypeConsolidatable, Status: "True", LastTransitionTime: ts}}}},
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{Capacity: it.Capacity, Allocatable: it.Capacity,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
		NodePool: "p", Initialized: true,
	}
	for _, p := range pods {
		p.Spec.NodeName = name
		n.Pods = append(n.Pods, p)
	}
	return n
}

func snapshot(its []*scheduling.InstanceType, budget string, nodes ...*disruption.Node) *disruption.Snapshot {
	return &disruption.Snapshot{Now: now, Nodes: nodes, NodePools: map[string]*v1.NodePool{"p": nodePool("p", budget)},
		InstanceTypes: map[string][]*scheduling.InstanceType{"p": its}}
}

// shape summarises a command: candidates -> replacement cheapest types.
func shape(cmd *disruption.Command) string {
	var cands, reps []string
	for _, c := range cmd.Candidates {
		cands = append(cands, c.Name())
	}
	for _, r := range cmd.Replacements {
		reps = append(reps, r.InstanceTypes[0].Name)
	}
	return fmt.Sprintf("%v->%v", cands, reps)
}

func kinds(d *disruption.Decision) map[string]disruption.Kind {
	out := map[string]disruption.Kind{}
	for _, e := range d.Explanations {
		for _, v := range e.Verdicts {
			if v.Method == v1.DisruptionReasonUnderutilized || v.Kind == repack.KindCoolDown || v.Kind == repack.KindRecentlyEvicted {
				out[e.Node] = v.Kind
			}
		}
	}
	return out
}

func TestPlanner(t *testing.T) {
	small, big := itype("small", 4, 0.30), itype("big", 8, 1.00)
	cheapBig := itype("big", 8, 0.50)
	tests := []struct {
		name     string
		snap     func() *disruption.Snapshot
		opts     repack.Options
		hist     repack.History
		commands []string
		verdicts map[string]disruption.Kind
		check    func(t *testing.T, d *disruption.Decision)
	}{
		{
			name: "an underused node's pods move into free room elsewhere: delete",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			commands: []string{"[a]->[]"},
			verdicts: map[string]disruption.Kind{"b": repack.KindReceiver},
			check: func(t *testing.T, d *disruption.Decision) {
				pb := d.Commands[0].Payback()
				require.NotNil(t, pb)
				assert.InDelta(t, 0.5, pb.PriceBefore, 1e-9)
				assert.Zero(t, pb.PriceAfter)
				assert.Equal(t, time.Hour, pb.Horizon)
				assert.InDelta(t, 0.5, pb.Saving, 1e-9)
				assert.InDelta(t, repack.DefaultRestartCost, pb.Cost, 1e-9)
				assert.Equal(t, 1, pb.Evictions)
			},
		},
		{
			// b's free room is what the pending pod needs: a's pod may not
			// take it (upstream simulates pending pods with the moved ones).
			name: "a pending pod keeps the free room it needs",
			snap: func() *disruption.Snapshot {
				s := snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
				s.Pending = []*corev1.Pod{pod("p1", 1000)}
				return s
			},
			verdicts: map[string]disruption.Kind{"a": repack.KindSameInstanceType, "b": disruption.KindNominated},
		},
		{
			// c's command is in flight: its pod takes b's room before a's
			// can, however the next pass sees the cluster.
			name: "the pods of a node already leaving keep the free room they need",
			snap: func() *disruption.Snapshot {
				c := node("c", cheapBig, pod("c1", 1000))
				c.InQueue = true
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)), c)
			},
			verdicts: map[string]disruption.Kind{"a": repack.KindSameInstanceType, "b": disruption.KindNominated},
		},
		{
			name: "payback gate: a saving below the restart cost is refused with both figures",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			opts:     repack.Options{RestartCost: 2},
			verdicts: map[string]disruption.Kind{"a": repack.KindPaybackGate, "b": repack.KindPaybackGate},
			check: func(t *testing.T, d *disruption.Decision) {
				for _, e := range d.Explanations {
					for _, v := range e.Verdicts {
						if v.Kind == repack.KindPaybackGate {
							assert.Contains(t, repack.Message(v), "Saving $0.5000 over 1h0m0s")
							assert.Contains(t, repack.Message(v), "below the disruption cost $2.0000 of 1 pod(s)")
						}
					}
				}
			},
		},
		{
			name: "the horizon is bounded by the remaining lifetime under expireAfter",
			snap: func() *disruption.Snapshot {
				a := node("a", cheapBig, pod("a1", 1000))
				a.NodeClaim.Spec.ExpireAfter = v1.NewNillableDuration(70 * time.Minute) // 10 minutes left
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%", a, node("b", cheapBig, pod("b1", 7000)))
			},
			// 1 pod at cost 1 × 10/70 lifetime left: $0.14, more than the
			// $0.08 saved in 10 minutes (though less than the $0.50 of an hour).
			opts:     repack.Options{RestartCost: 1},
			verdicts: map[string]disruption.Kind{"a": repack.KindPaybackGate},
		},
		{
			name: "take any saving ignores the gate",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			opts:     repack.Options{RestartCost: 2, TakeAnySaving: true},
			commands: []string{"[a]->[]"},
		},
		{
			name: "split: one dear large node becomes two cheaper small ones",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{small, big}, "100%", node("a", big, pod("a1", 3000), pod("a2", 3000)))
			},
			commands: []string{"[a]->[small small]"},
		},
		{
			name: "a split saving less than SplitSaving of the node's price is not taken",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{small, big}, "100%", node("a", big, pod("a1", 3000), pod("a2", 3000)))
			},
			opts:     repack.Options{SplitSaving: 0.5},
			verdicts: map[string]disruption.Kind{"a": repack.KindSameInstanceType},
		},
		{
			name: "never the same instance type and capacity type",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{small}, "100%", node("a", small, pod("a1", 500)))
			},
			opts:     repack.Options{KeepEfficiency: 1},
			verdicts: map[string]disruption.Kind{"a": repack.KindSameInstanceType},
		},
		{
			// Each node's free room takes one of another's three pods, so
			// no node can be deleted; together they fit one cheaper machine.
			name: "N→M: three dear nodes become one cheaper large one",
			snap: func() *disruption.Snapshot {
				huge := itype("huge", 24, 1.50)
				return snapshot([]*scheduling.InstanceType{big, huge}, "100%",
					node("a", big, pod("a1", 2000), pod("a2", 2000), pod("a3", 2000)),
					node("b", big, pod("b1", 2000), pod("b2", 2000), pod("b3", 2000)),
					node("c", big, pod("c1", 2000), pod("c2", 2000), pod("c3", 2000)))
			},
			opts:     repack.Options{NoSplit: true},
			commands: []string{"[a b c]->[huge]"},
			check: func(t *testing.T, d *disruption.Decision) {
				assert.InDelta(t, 1.5, d.Commands[0].Payback().PriceBefore-d.Commands[0].Payback().PriceAfter, 1e-9)
			},
		},
		{
			// No node is efficient enough to keep, and the budget is too
			// small for a group: a's pods go into b's and c's free room.
			name: "without a group move, a delete fills any node's free room",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "1",
					node("a", cheapBig, pod("a1", 2000), pod("a2", 2000)),
					node("b", cheapBig, pod("b1", 2000), pod("b2", 2000)),
					node("c", cheapBig, pod("c1", 2000), pod("c2", 2000)))
			},
			commands: []string{"[a]->[]"},
			verdicts: map[string]disruption.Kind{"b": repack.KindReceiver},
		},
		{
			// The same with room for a group: moving the three nodes onto
			// two new ones saves no more than deleting a, for three times
			// the evictions, so the deletes-first plan is kept.
			name: "deletes first when they save as much for fewer evictions",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 2000), pod("a2", 2000)),
					node("b", cheapBig, pod("b1", 2000), pod("b2", 2000)),
					node("c", cheapBig, pod("c1", 2000), pod("c2", 2000)))
			},
			opts:     repack.Options{NoSplit: true},
			commands: []string{"[a]->[]"},
			verdicts: map[string]disruption.Kind{"b": repack.KindReceiver},
		},
		{
			// Deleting a into b's room saves $1/h for one eviction; the
			// group onto one huge machine saves $1.50/h, so the
			// groups-first plan is kept.
			name: "a group move comes before deletes when it saves more",
			snap: func() *disruption.Snapshot {
				huge := itype("huge", 24, 1.50)
				return snapshot([]*scheduling.InstanceType{big, huge}, "100%",
					node("a", big, pod("a1", 2000)),
					node("b", big, pod("b1", 2000), pod("b2", 2000), pod("b3", 2000)),
					node("c", big, pod("c1", 2000), pod("c2", 2000), pod("c3", 2000)))
			},
			opts:     repack.Options{NoSplit: true},
			commands: []string{"[a b c]->[huge]"},
		},
		{
			// One by one, a's pod would spread onto b (the emptiest node),
			// which then could not leave; together, a and b go into c's
			// and d's holes for two evictions, where the group of all
			// four (the same two nodes saved) evicts eight pods.
			name: "the emptiest nodes are deleted together",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 2000)),
					node("b", cheapBig, pod("b1", 2000)),
					node("c", cheapBig, pod("c1", 2000), pod("c2", 2000), pod("c3", 2000)),
					node("d", cheapBig, pod("d1", 2000), pod("d2", 2000), pod("d3", 2000)))
			},
			opts:     repack.Options{NoSplit: true},
			commands: []string{"[a]->[]", "[b]->[]"},
			verdicts: map[string]disruption.Kind{"c": repack.KindReceiver, "d": repack.KindReceiver},
		},
		{
			name: "budget: one node allowed, the other told why",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "1",
					node("a", cheapBig, pod("a1", 500)), node("b", cheapBig, pod("b1", 3000)), node("c", cheapBig, pod("c1", 2000)))
			},
			commands: []string{"[a]->[]"},
			verdicts: map[string]disruption.Kind{"b": disruption.KindBudgetExhausted},
		},
		{
			name: "cool-down: a node a recent move launched is left alone",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			hist:     repack.History{Moves: []repack.PastMove{{At: now.Add(-2 * time.Minute), NodePool: "p", Launched: []string{"a"}}}},
			verdicts: map[string]disruption.Kind{"a": repack.KindCoolDown},
			check: func(t *testing.T, d *disruption.Decision) {
				for _, e := range d.Explanations {
					for _, v := range e.Verdicts {
						if v.Kind == repack.KindCoolDown {
							require.NotNil(t, v.Until)
							assert.Equal(t, now.Add(3*time.Minute), *v.Until)
						}
					}
				}
			},
		},
		{
			name: "cool-down over: the same node moves",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			hist:     repack.History{Moves: []repack.PastMove{{At: now.Add(-40 * time.Minute), NodePool: "p", Launched: []string{"a"}}}},
			commands: []string{"[a]->[]"},
		},
		{
			name: "a pod evicted by consolidation is not evicted again within the cool-down",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			hist:     repack.History{Evicted: map[string]time.Time{"default/a1": now.Add(-2 * time.Minute)}},
			verdicts: map[string]disruption.Kind{"a": repack.KindRecentlyEvicted},
		},
		{
			// A ReplicaSet replaces an evicted pod with a new name; the
			// replacement (same owner, created after the eviction) is
			// protected as the evicted pod was, an older pod is not.
			name: "the replacement of an evicted pod is not evicted within the cool-down",
			snap: func() *disruption.Snapshot {
				replacement := pod("a9", 1000)
				replacement.CreationTimestamp = metav1.NewTime(now.Add(-1 * time.Minute))
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, replacement), node("b", cheapBig, pod("b1", 7000)))
			},
			hist:     repack.History{Owners: map[string][]time.Time{"default/ReplicaSet/rs": {now.Add(-2 * time.Minute)}}},
			verdicts: map[string]disruption.Kind{"a": repack.KindRecentlyEvicted},
			check: func(t *testing.T, d *disruption.Decision) {
				for _, e := range d.Explanations {
					if e.Node == "a" {
						assert.Contains(t, repack.Message(e.Verdicts[len(e.Verdicts)-1]), `Pod "default/a9" replaces a pod of default/ReplicaSet/rs evicted by consolidation`)
					}
				}
			},
		},
		{
			// One eviction, two new pods of the owner: the earlier is the
			// replacement, the later (a scale-up) may move.
			name: "one replacement per evicted pod",
			snap: func() *disruption.Snapshot {
				first, second := pod("a9", 1000), pod("c9", 1000)
				first.CreationTimestamp = metav1.NewTime(now.Add(-2 * time.Minute))
				second.CreationTimestamp = metav1.NewTime(now.Add(-1 * time.Minute))
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, first), node("b", cheapBig, pod("b1", 3500), pod("b2", 3500)), node("c", cheapBig, second))
			},
			hist:     repack.History{Owners: map[string][]time.Time{"default/ReplicaSet/rs": {now.Add(-3 * time.Minute)}}},
			commands: []string{"[c]->[]"},
			verdicts: map[string]disruption.Kind{"a": repack.KindRecentlyEvicted},
		},
		{
			name: "an older pod of an owner that lost a pod still moves",
			snap: func() *disruption.Snapshot {
				older := pod("a9", 1000)
				older.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, older), node("b", cheapBig, pod("b1", 7000)))
			},
			hist:     repack.History{Owners: map[string][]time.Time{"default/ReplicaSet/rs": {now.Add(-5 * time.Minute)}}},
			commands: []string{"[a]->[]"},
		},
		{
			// Best-fit puts a's 3-CPU pod in b's 3 free CPUs and its 1-CPU
			// pod in c's 1; the kube-scheduler, spreading, puts the 1-CPU
			// pod in b (the most room) and the other then fits nowhere.
			// (The budget of one node rules out replacing a and b together.)
			name: "a delete only the planner's packing places is not taken",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "1",
					node("a", cheapBig, pod("a1", 1000), pod("a2", 3000)), node("b", cheapBig, pod("b1", 5000)), node("c", cheapBig, pod("c1", 7000)))
			},
		},
		{
			name: "a delete the kube-scheduler's spreading also places is taken",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "1",
					node("a", cheapBig, pod("a1", 1000), pod("a2", 3000)), node("b", cheapBig, pod("b1", 2000), pod("b2", 2000)), node("c", cheapBig, pod("c1", 7000)))
			},
			commands: []string{"[a]->[]"},
		},
		{
			// a's three 900m pods go into the kept nodes' 1.6-CPU holes and
			// its three 3.5-CPU pods onto an x8 and an x4 ($1.20/h for
			// $1.60/h). The kube-scheduler, placing the small pods first,
			// puts them on the new nodes (the emptiest), and two large pods
			// then fit nowhere: the move is refused.
			name: "a replacement only the planner's packing places is not taken",
			snap: func() *disruption.Snapshot {
				x4, x8, x16 := itype("x4", 4, 0.40), itype("x8", 8, 0.80), itype("x16", 16, 1.60)
				return snapshot([]*scheduling.InstanceType{x4, x8, x16}, "100%",
					node("a", x16, pod("a1", 3500), pod("a2", 3500), pod("a3", 3500), pod("a4", 900), pod("a5", 900), pod("a6", 900)),
					node("k1", x16, pod("k1a", 14400)), node("k2", x16, pod("k2a", 14400)), node("k3", x16, pod("k3a", 14400)))
			},
			verdicts: map[string]disruption.Kind{"a": repack.KindSpreadMisfit},
			check: func(t *testing.T, d *disruption.Decision) {
				for _, e := range d.Explanations {
					if e.Node == "a" {
						assert.Contains(t, repack.Message(e.Verdicts[len(e.Verdicts)-1]), "($1.6000/h → $1.2000/h) places its pods only as planned")
					}
				}
			},
		},
		{
			// The same with one small pod: spread onto the x8 first, it
			// leaves room there for two large pods, and the x4 takes the
			// third.
			name: "a replacement the kube-scheduler's spreading also places is taken",
			snap: func() *disruption.Snapshot {
				x4, x8, x16 := itype("x4", 4, 0.40), itype("x8", 8, 0.80), itype("x16", 16, 1.60)
				return snapshot([]*scheduling.InstanceType{x4, x8, x16}, "100%",
					node("a", x16, pod("a1", 3500), pod("a2", 3500), pod("a3", 3500), pod("a4", 900)),
					node("k1", x16, pod("k1a", 14400)), node("k2", x16, pod("k2a", 14400)), node("k3", x16, pod("k3a", 14400)))
			},
			commands: []string{"[a]->[x8 x4]"},
		},
		{
			// c's pod fits k's room by size but not by its anti-affinity to
			// k's pod, so c's delete is refused by the solver. The room the
			// kube-scheduler's spreading would have given c's pod stays
			// free for a's replacement.
			name: "a refused delete takes no room from the next move's spreading check",
			snap: func() *disruption.Snapshot {
				x2, x4, x8 := itype("x2", 2, 0.10), itype("x4", 4, 0.20), itype("x8", 8, 0.40)
				k1 := pod("k1", 6500)
				k1.Labels = map[string]string{"app": "z"}
				c1 := pod("c1", 1500)
				c1.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "z"}}, TopologyKey: corev1.LabelHostname}}}}
				return snapshot([]*scheduling.InstanceType{x2, x4, x8}, "100%",
					node("a", x4, pod("a1", 1500), pod("a2", 1500)), node("c", x2, c1), node("k", x8, k1))
			},
			opts:     repack.Options{GroupSize: 1},
			commands: []string{"[a]->[x2]"},
		},
		{
			name: "a node that receives moved pods keeps its own",
			snap: func() *disruption.Snapshot {
				return snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
					node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7000)))
			},
			commands: []string{"[a]->[]"},
			verdicts: map[string]disruption.Kind{"b": repack.KindReceiver},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := repack.Explain(tt.snap(), tt.hist, tt.opts)
			require.NoError(t, err)
			var got []string
			for _, cmd := range d.Commands {
				got = append(got, shape(cmd))
			}
			assert.Equal(t, tt.commands, got)
			k := kinds(d)
			for name, want := range tt.verdicts {
				assert.Equal(t, want, k[name], "verdict of %s", name)
			}
			// Every candidate left alone has a verdict.
			for _, e := range d.Explanations {
				assert.NotEmpty(t, e.Verdicts, "node %s", e.Node)
			}
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}

// TestDeterministic: the plan does not depend on the number of goroutines.
func TestDeterministic(t *testing.T) {
	plan := func(par int) ([]string, []string) {
		c, err := benchmark.NewCluster(90, 0.3, 3)
		require.NoError(t, err)
		d, err := repack.Explain(c.Snap, repack.History{}, repack.Options{Parallelism: par, SpotToSpot: true})
		require.NoError(t, err)
		var cmds, vs []string
		for _, cmd := range d.Commands {
			cmds = append(cmds, shape(cmd)+fmt.Sprintf("%.6f", cmd.Payback().PriceAfter))
		}
		for _, e := range d.Explanations {
			for _, v := range e.Verdicts {
				vs = append(vs, e.Node+":"+string(v.Kind))
			}
		}
		return cmds, vs
	}
	c1, v1 := plan(1)
	require.NotEmpty(t, c1)
	for _, par := range []int{2, 4} {
		c, v := plan(par)
		assert.Equal(t, c1, c, "commands with %d goroutines", par)
		assert.Equal(t, v1, v, "verdicts with %d goroutines", par)
	}
}

// TestRecorder: history keeps what is inside the cool-down.
func TestRecorder(t *testing.T) {
	r := repack.NewRecorder(30 * time.Minute)
	n := node("a", itype("small", 4, 0.3), pod("a1", 100))
	cand := &disruption.Candidate{Node: n, NodePool: nodePool("p", "100%"), Reschedulable: n.Pods}
	r.Record(now, []*disruption.Command{{Candidates: []*disruption.Candidate{cand}}}, [][]string{{"new-1"}})
	h := r.History(now.Add(10 * time.Minute))
	require.Len(t, h.Moves, 1)
	assert.Equal(t, []string{"a"}, h.Moves[0].Removed)
	assert.Equal(t, []string{"new-1"}, h.Moves[0].Launched)
	assert.Equal(t, now, h.Evicted["default/a1"])
	assert.Equal(t, []time.Time{now}, h.Owners["default/ReplicaSet/rs"])
	h = r.History(now.Add(31 * time.Minute))
	assert.Empty(t, h.Moves)
	assert.Empty(t, h.Evicted)
	assert.Empty(t, h.Owners)
}

// planning is a pass's methods with p in place of upstream's consolidation.
func planning(p repack.Planner) []disruption.Method {
	return append(disruption.NonConsolidationMethods(), p)
}

// TestStrategy: the planner takes the place of upstream's multi- and
// single-node consolidation only; Emptiness still deletes empty nodes
// (the planner, like upstream's consolidation, leaves them alone).
func TestStrategy(t *testing.T) {
	methodKinds := func(ms []disruption.Method) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%s/%s", m.Reason(), m.ConsolidationType()))
		}
		return out
	}
	upstream := disruption.NewUpstream(disruption.ConsolidationOptions{})
	assert.Equal(t, []string{"Empty/empty", "Drifted/", "Drifted/", "Underutilized/multi", "Underutilized/single"}, methodKinds(disruption.MethodsOf(upstream)))
	planner := repack.NewStrategy(repack.Options{})
	got := disruption.MethodsOf(planner)
	assert.Equal(t, []string{"Empty/empty", "Drifted/", "Drifted/", "Underutilized/" + repack.ConsolidationType}, methodKinds(got))
	_, isPlanner := got[len(got)-1].(repack.Planner)
	assert.True(t, isPlanner)
	assert.False(t, upstream.ReadsPending(), "upstream's methods need no pending pods in the snapshot")
	assert.True(t, planner.ReadsPending(), "the planner reads them")

	// An empty node is Emptiness's, not left standing.
	n := node("idle", itype("small", 4, 0.3))
	snap := snapshot([]*scheduling.InstanceType{itype("small", 4, 0.3)}, "100%", n)
	d, err := disruption.Disrupt(snap, got, nil)
	require.NoError(t, err)
	require.Len(t, d.Commands, 1)
	assert.Equal(t, v1.DisruptionReasonEmpty, d.Method.Reason())
}

// TestDrain: a node the history rules hold is drained when the keep rule
// does not keep it (and the plan does not put pods on it), kept as a
// destination when it is efficient.
func TestDrain(t *testing.T) {
	cheapBig := itype("big", 8, 0.50)
	tests := []struct {
		name     string
		held     *corev1.Pod
		commands []string
		drain    []string
	}{
		// a holds one 1-CPU pod a move evicted: a quarter of a cent's
		// worth on a $0.50 node. b's pod could go there, but a drained
		// node receives nothing, and no cheaper type exists for b.
		{name: "inefficient and held: drained", held: pod("a1", 1000), drain: []string{"a", "b"}},
		// a is full: efficient, kept, and b's pod cannot fit there either.
		{name: "efficient and held: kept", held: pod("a1", 8000), drain: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot([]*scheduling.InstanceType{cheapBig}, "100%", node("a", cheapBig, tt.held), node("b", cheapBig, pod("b1", 1000)))
			hist := repack.History{Evicted: map[string]time.Time{"default/a1": now.Add(-2 * time.Minute)}}
			got, drained := planWithDrain(t, snap, hist)
			assert.Equal(t, tt.commands, got)
			assert.Equal(t, tt.drain, drained)
		})
	}
}

// An empty node Emptiness will delete is no destination (filling it only
// trades the deleted node for one that would have gone for nothing) and
// is drained so that the kube-scheduler does not fill it either; while
// pods are pending, a nominated one may still be what they need.
func TestEmptiedNodes(t *testing.T) {
	cheapBig := itype("big", 8, 0.50)
	tests := []struct {
		name     string
		pending  []*corev1.Pod
		commands []string
		drain    []string
	}{
		{name: "no pending pod: e receives nothing and is drained", drain: []string{"a", "e"}},
		{name: "a pending pod may take e: a's pod goes there too", pending: []*corev1.Pod{pod("p1", 500)}, commands: []string{"[a]->[]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// e was nominated for pods the kube-scheduler bound elsewhere.
			e := node("e", cheapBig)
			e.Nominated = true
			snap := snapshot([]*scheduling.InstanceType{cheapBig}, "100%",
				node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", 7500)), e)
			snap.Pending = tt.pending
			got, drained := planWithDrain(t, snap, repack.History{})
			assert.Equal(t, tt.commands, got)
			assert.Equal(t, tt.drain, drained)
		})
	}
}

// planWithDrain runs one planner pass over snap with hist and returns its
// commands (as shape) and the nodes it drains.
func planWithDrain(t *testing.T, snap *disruption.Snapshot, hist repack.History) (commands, drained []string) {
	t.Helper()
	p := repack.Planner{History: func(time.Time) repack.History { return hist }, Drained: func(n []string) { drained = n }}
	d, err := disruption.Disrupt(snap, planning(p), nil)
	require.NoError(t, err)
	for _, cmd := range d.Commands {
		commands = append(commands, shape(cmd))
	}
	return commands, drained
}

// In a pass where Emptiness acts, the planner plans for the nodes left
// (disruption.Follower): the empty node is no destination and uses its
// pool's budget.
func TestFollowsEmptiness(t *testing.T) {
	cheapBig := itype("big", 8, 0.50)
	tests := []struct {
		name     string
		budget   string
		bMilli   int64
		commands []string
		runs     int
	}{
		{name: "a's pod moves to b in the same pass", budget: "100%", bMilli: 7000, commands: []string{"[e]->[]", "[a]->[]"}, runs: 2},
		{name: "the empty node takes no pod", budget: "100%", bMilli: 7500, commands: []string{"[e]->[]"}, runs: 2},
		{name: "the empty node uses the budget", budget: "1", bMilli: 7000, commands: []string{"[e]->[]"}, runs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot([]*scheduling.InstanceType{cheapBig}, tt.budget,
				node("a", cheapBig, pod("a1", 1000)), node("b", cheapBig, pod("b1", tt.bMilli)), node("e", cheapBig))
			d, err := disruption.Disrupt(snap, planning(repack.Planner{}), nil)
			require.NoError(t, err)
			var got []string
			for _, cmd := range d.Commands {
				got = append(got, shape(cmd))
			}
			assert.Equal(t, tt.commands, got)
			assert.Equal(t, disruption.Emptiness{}, d.Method)
			// The commands come grouped by the method that made them, so
			// that each group is validated and started as its method wants.
			grouped := 0
			for _, g := range d.Groups {
				grouped += len(g.Commands)
			}
			assert.Equal(t, len(d.Commands), grouped)
			assert.Equal(t, disruption.Emptiness{}, d.Groups[0].Method)
			if len(d.Groups) > 1 {
				assert.IsType(t, repack.Planner{}, d.Groups[1].Method)
			}
			// Emptiness, then the planner; StaticDrift and Drift wait.
			require.Len(t, d.Runs, tt.runs)
			assert.Equal(t, repack.ConsolidationType, d.Runs[1].ConsolidationType)
			for _, n := range snap.Nodes {
				assert.False(t, n.MarkedForDeletion, "the caller's nodes are not changed")
			}
		})
	}
}

// A pool's types are its NodeClass's, not filtered by the pool: a node's
// efficiency is priced with the types the pool may launch only. Priced
// with the cheaper type the pool excludes, every full node looked
// inefficient and was drained.
func TestEfficiencyCountsLaunchableTypesOnly(t *testing.T) {
	cheap, big := itype("cheap", 8, 0.20), itype("big", 8, 0.50)
	snap := snapshot([]*scheduling.InstanceType{cheap, big}, "100%",
		node("a", big, pod("a1", 7500)), node("b", big, pod("b1", 7500)))
	np := snap.NodePools["p"]
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"big"}})
	commands, drained := planWithDrain(t, snap, repack.History{})
	assert.Empty(t, commands)
	assert.Empty(t, drained, "full nodes of the only type the pool launches are kept")
}

// TestKeepRuleFollowsRestartCost: whether a node is kept follows from the
// restart cost and the horizon. Node a runs four 1.5 vCPU pods on an 8
// vCPU $0.50/h machine, the pool's only type: five such pods fit one, so
// its pods' floor is $0.40/h and a repack could save at most $0.10/h. The
// recent eviction of a1 holds a this pass; a node the rule does not keep
// is then drained, a kept one is not.
func TestKeepRuleFollowsRestartCost(t *testing.T) {
	big := itype("big", 8, 0.50)
	tests := []struct {
		name    string
		opts    repack.Options
		drained bool
	}{
		// 4 pods × $0.009 = $0.036 < $0.10 over 1 h: repacking pays.
		{name: "default restart cost: not kept", opts: repack.Options{}, drained: true},
		// 4 × $0.03 = $0.12 > $0.10: no repack of a can pay.
		{name: "dearer restarts: kept", opts: repack.Options{RestartCost: 0.03}, drained: false},
		// Over 2 h the saving is $0.20 > $0.12: repacking pays again.
		{name: "dearer restarts, longer horizon: not kept", opts: repack.Options{RestartCost: 0.03, Horizon: 2 * time.Hour}, drained: true},
		// A constant threshold replaces the rule: a is 75% efficient,
		// below 0.88.
		{name: "keep efficiency over the rule", opts: repack.Options{RestartCost: 0.03, KeepEfficiency: 0.88}, drained: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot([]*scheduling.InstanceType{big}, "100%",
				node("a", big, pod("a1", 1500), pod("a2", 1500), pod("a3", 1500), pod("a4", 1500)))
			hist := repack.History{Evicted: map[string]time.Time{"default/a1": now.Add(-2 * time.Minute)}}
			var drained []string
			p := repack.Planner{Options: tt.opts, History: func(time.Time) repack.History { return hist }, Drained: func(n []string) { drained = n }}
			_, err := disruption.Disrupt(snap, planning(p), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.drained, slices.Contains(drained, "a"), "drained: %v", drained)
		})
	}
}

// TestKeptVerdictNamesTheRule: a node the rule keeps is told so with the
// rule's figures (what the cheapest machines would save, over the horizon,
// against its pods' disruption cost), for `karpenter why node`.
func TestKeptVerdictNamesTheRule(t *testing.T) {
	big := itype("big", 8, 0.50)
	snap := snapshot([]*scheduling.InstanceType{big}, "100%",
		node("a", big, pod("a1", 1500), pod("a2", 1500), pod("a3", 1500), pod("a4", 1500)))
	p := repack.Planner{Options: repack.Options{RestartCost: 0.03}}
	d, err := disruption.Disrupt(snap, planning(p), nil)
	require.NoError(t, err)
	var got []string
	for _, e := range d.Explanations {
		for _, v := range e.Verdicts {
			if e.Node == "a" && v.Kind == repack.KindNoCheaperPlacement {
				got = append(got, v.Detail)
			}
		}
	}
	require.Len(t, got, 1)
	assert.Equal(t, "Node is kept: the cheapest machines would run its pods for $0.1000/h less than its $0.5000/h, $0.1000 over 1h0m0s, not more than the disruption cost $0.1200 of its 4 pod(s)", got[0])
}
