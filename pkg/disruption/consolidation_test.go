package disruption

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

const od, spot = v1.CapacityTypeOnDemand, v1.CapacityTypeSpot

func TestSingleNodeConsolidation(t *testing.T) {
	its := catalog()
	m2, m4, m8, m16 := typeNamed(its, "m.2x"), typeNamed(its, "m.4x"), typeNamed(its, "m.8x"), typeNamed(its, "m.16x")
	tests := []struct {
		name     string
		pools    []*v1.NodePool
		nodes    []*Node
		delete   []string // candidates of a delete command
		replace  []string // candidates of a replace command
		types    []string // the replacement's instance types, cheapest first
		verdicts map[string]Kind
	}{
		{
			name:  "deleted when its pods fit elsewhere",
			pools: []*v1.NodePool{cPool("p")},
			nodes: []*Node{
				cNode("a", "p", m8, od, withPods(cpuPod("small", "1"))),
				cNode("b", "p", m8, od, withPods(cpuPod("big", "6"), cpuPod("big2", "0.5"))),
			},
			delete: []string{"a"}, verdicts: map[string]Kind{"b": KindConsolidationDeferred},
		},
		{
			name:    "replaced by a cheaper type when they do not",
			pools:   []*v1.NodePool{cPool("p")},
			nodes:   []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1")))},
			replace: []string{"a"}, types: []string{"m.2x", "m.4x", "m.8x"},
		},
		{
			name:     "never replaced by the same type",
			pools:    []*v1.NodePool{cPool("p")},
			nodes:    []*Node{cNode("a", "p", m2, od, withPods(cpuPod("x", "1500m")))},
			verdicts: map[string]Kind{"a": KindNotCheaper},
		},
		{
			name:     "a bigger replacement is not cheaper",
			pools:    []*v1.NodePool{cPool("p")},
			nodes:    []*Node{cNode("a", "p", m4, od, withPods(cpuPod("x", "3")))},
			verdicts: map[string]Kind{"a": KindNotCheaper},
		},
		{
			name:     "WhenEmpty keeps a busy node, with a verdict but no event",
			pools:    []*v1.NodePool{cPool("p", policy(v1.ConsolidationPolicyWhenEmpty))},
			nodes:    []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1")))},
			verdicts: map[string]Kind{"a": KindPolicyWhenEmpty},
		},
		{
			name:     "consolidateAfter Never",
			pools:    []*v1.NodePool{cPool("p", never)},
			nodes:    []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1")))},
			verdicts: map[string]Kind{"a": KindConsolidationDisabled},
		},
		{
			name:     "an unknown instance type cannot be priced",
			pools:    []*v1.NodePool{cPool("p")},
			nodes:    []*Node{cNode("a", "p", cType("gone", 16, 1), od, withPods(cpuPod("x", "1")))},
			verdicts: map[string]Kind{"a": KindInstanceTypeNotFound},
		},
		{
			name:  "a missing zone label",
			pools: []*v1.NodePool{cPool("p")},
			nodes: []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1")), func(n *Node) {
				delete(n.Node.Labels, corev1.LabelTopologyZone)
			})},
			verdicts: map[string]Kind{"a": KindMissingLabel},
		},
		{
			name:     "budget 0 for Underutilized",
			pools:    []*v1.NodePool{cPool("p", budgets(forReasons(budget("0"), v1.DisruptionReasonUnderutilized)))},
			nodes:    []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1")))},
			verdicts: map[string]Kind{"a": KindBudgetExhausted},
		},
		{
			name:     "a pod that fits nowhere keeps its node",
			pools:    []*v1.NodePool{cPool("p")},
			nodes:    []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1", selector("disk", "ssd"))))},
			verdicts: map[string]Kind{"a": KindPodsDoNotFit},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, cSnap(its, tt.pools, tt.nodes), single())
			switch {
			case tt.delete != nil:
				require.Len(t, d.Commands, 1)
				assert.Equal(t, "delete", d.Commands[0].Decision())
				assert.Equal(t, tt.delete, names(d.Commands[0].Candidates))
			case tt.replace != nil:
				require.Len(t, d.Commands, 1)
				cmd := d.Commands[0]
				assert.Equal(t, "replace", cmd.Decision())
				assert.Equal(t, tt.replace, names(cmd.Candidates))
				require.Len(t, cmd.Replacements, 1)
				assert.Equal(t, tt.types, typeNames(cmd.Replacements[0].InstanceTypes))
				assert.Equal(t, tt.types, cmd.Replacements[0].Requirements.Get(corev1.LabelInstanceTypeStable).Values(),
					"the requirement lists the same types")
			default:
				assert.Empty(t, d.Commands)
			}
			for name, k := range tt.verdicts {
				v := verdictOf(d, name, k)
				require.NotNil(t, v, "%s: want %s, got %s", name, k, explanationOf(d, name).Message())
				assert.NotEmpty(t, v.Message())
			}
		})
	}
}

func selector(k, val string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: val} }
}

func TestConsolidationVerdictDetails(t *testing.T) {
	its := catalog()
	t.Run("not cheaper names both prices", func(t *testing.T) {
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{cNode("a", "p", typeNamed(its, "m.2x"), od, withPods(cpuPod("x", "1500m")))}), single())
		v := verdictOf(d, "a", KindNotCheaper)
		require.NotNil(t, v)
		assert.True(t, v.Unconsolidatable)
		assert.InDelta(t, 0.1, v.Consolidation.Price, 1e-9)
		assert.InDelta(t, 0.1, v.Consolidation.ReplacementPrice, 1e-9)
		assert.Equal(t, "Can't replace with a cheaper node (current price $0.1000/h, cheapest replacement $0.1000/h)", v.Message())
	})
	t.Run("a pod that fits nowhere is named with the solver's reasons", func(t *testing.T) {
		n := cNode("a", "p", typeNamed(its, "m.16x"), od, withPods(cpuPod("x", "1", selector("disk", "ssd")), cpuPod("y", "1")))
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{n}), single())
		v := verdictOf(d, "a", KindPodsDoNotFit)
		require.NotNil(t, v)
		assert.Equal(t, []string{"default/x"}, v.Pods)
		require.NotEmpty(t, v.Consolidation.Refusals)
		assert.Equal(t, "disk", v.Consolidation.Refusals[0].Key)
		assert.Contains(t, v.Message(), `Pod "default/x" cannot be rescheduled: nodepool p:`)
	})
	t.Run("consolidateAfter not elapsed says until when", func(t *testing.T) {
		np := cPool("p", func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(10 * time.Minute) })
		n := cNode("a", "p", typeNamed(its, "m.16x"), od, withPods(cpuPod("x", "1")))
		n.NodeClaim.Status.Conditions = n.NodeClaim.Status.Conditions[1:] // not Consolidatable
		n.NodeClaim.Status.LastPodEventTime = metav1.NewTime(now.Add(-time.Minute))
		d := decide(t, cSnap(its, []*v1.NodePool{np}, []*Node{n}), single())
		v := verdictOf(d, "a", KindNotConsolidatable)
		require.NotNil(t, v)
		require.NotNil(t, v.Until)
		assert.Equal(t, now.Add(9*time.Minute), *v.Until)
		assert.False(t, v.Unconsolidatable, "upstream sends no event for a node inside consolidateAfter")
	})
}

func TestMultiNodeConsolidation(t *testing.T) {
	its := catalog()
	m2, m8 := typeNamed(its, "m.2x"), typeNamed(its, "m.8x")
	t.Run("two lightly used nodes become one cheaper node", func(t *testing.T) {
		nodes := []*Node{
			cNode("a", "p", m8, od, withPods(cpuPod("x", "1500m"))),
			cNode("b", "p", m8, od, withPods(cpuPod("y", "1500m"))),
		}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, nodes), DefaultMethods()...)
		require.Len(t, d.Commands, 1)
		cmd := d.Commands[0]
		assert.IsType(t, MultiNodeConsolidation{}, cmd.Method)
		assert.Equal(t, []string{"a", "b"}, names(cmd.Candidates))
		require.Len(t, cmd.Replacements, 1)
		assert.Equal(t, []string{"m.4x"}, typeNames(cmd.Replacements[0].InstanceTypes), "only types cheaper than the two m.8x")
	})
	t.Run("a replacement of one of the removed types is dropped: delete the others instead", func(t *testing.T) {
		nodes := []*Node{
			cNode("a", "p", m8, od, withPods(cpuPod("x", "500m"))),
			cNode("b", "p", m8, od, withPods(cpuPod("y", "500m"))),
			cNode("c", "p", m2, od, withPods(cpuPod("z", "500m"))),
		}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, nodes), multi())
		require.Len(t, d.Commands, 1)
		cmd := d.Commands[0]
		assert.Equal(t, "delete", cmd.Decision(), "[m.8x, m.8x, m.2x] -> m.2x is deleting the two m.8x")
		assert.Equal(t, []string{"a", "b"}, names(cmd.Candidates))
		assert.Equal(t, KindConsolidationDeferred, verdictOf(d, "c", KindConsolidationDeferred).Kind)
	})
	t.Run("binary search finds the longest removable prefix", func(t *testing.T) {
		// Five m.2x with a 1-core pod each: 3 pods fit one m.4x ($0.20 <
		// $0.30); 4 need an m.8x ($0.40, not cheaper); 2 an m.4x ($0.20,
		// not cheaper).
		nodes := make([]*Node, 5)
		for i := range nodes {
			nodes[i] = cNode(fmt.Sprintf("n%d", i), "p", m2, od, withPods(cpuPod(fmt.Sprintf("x%d", i), "1")))
		}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, nodes), multi())
		require.Len(t, d.Commands, 1)
		cmd := d.Commands[0]
		assert.Len(t, cmd.Candidates, 3)
		assert.Equal(t, []string{"m.4x"}, typeNames(cmd.Replacements[0].InstanceTypes))
	})
	t.Run("at most 100 candidates", func(t *testing.T) {
		nodes := make([]*Node, 120)
		for i := range nodes {
			nodes[i] = cNode(fmt.Sprintf("n%03d", i), "p", m2, od, withPods(cpuPod(fmt.Sprintf("x%03d", i), "100m")))
		}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, nodes), multi())
		require.Len(t, d.Commands, 1)
		assert.Equal(t, "delete", d.Commands[0].Decision())
		assert.Len(t, d.Commands[0].Candidates, MaxMultiNodeCandidates)
	})
	t.Run("a timeout returns what it has and is counted", func(t *testing.T) {
		clock := now
		var timeouts []string
		opts := ConsolidationOptions{
			Now:       func() time.Time { clock = clock.Add(40 * time.Second); return clock },
			OnTimeout: func(ct string) { timeouts = append(timeouts, ct) },
		}
		nodes := make([]*Node, 10)
		for i := range nodes {
			nodes[i] = cNode(fmt.Sprintf("n%d", i), "p", m2, od, withPods(cpuPod(fmt.Sprintf("x%d", i), "100m")))
		}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, nodes), multi(opts))
		assert.Equal(t, []string{ConsolidationTypeMulti}, timeouts)
		require.Len(t, d.Commands, 1, "the first batch was evaluated before the deadline")
		assert.Less(t, len(d.Commands[0].Candidates), 9)
	})
}

func TestCapacityTypeRules(t *testing.T) {
	its := catalog()
	t.Run("on-demand to spot: the replacement may only be spot", func(t *testing.T) {
		np := cPool("p", capacityTypes(od, spot))
		d := decide(t, cSnap(its, []*v1.NodePool{np}, []*Node{cNode("a", "p", typeNamed(its, "m.16x"), od, withPods(cpuPod("x", "1")))}), single())
		require.Len(t, d.Commands, 1)
		ct := d.Commands[0].Replacements[0].Requirements.Get(v1.CapacityTypeLabelKey)
		assert.True(t, ct.Has(spot))
		assert.False(t, ct.Has(od))
	})
	t.Run("on-demand stays on-demand when the pool allows only that", func(t *testing.T) {
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{cNode("a", "p", typeNamed(its, "m.16x"), od, withPods(cpuPod("x", "1")))}), single())
		require.Len(t, d.Commands, 1)
		ct := d.Commands[0].Replacements[0].Requirements.Get(v1.CapacityTypeLabelKey)
		assert.Equal(t, []string{od}, ct.Values())
	})
	wide := wideCatalog()
	spotNode := func(it string) []*Node {
		return []*Node{cNode("a", "p", typeNamed(wide, it), spot, withPods(cpuPod("x", "1")))}
	}
	spotPool := func() []*v1.NodePool { return []*v1.NodePool{cPool("p", capacityTypes(od, spot))} }
	tests := []struct {
		name    string
		gate    bool
		its     []*scheduling.InstanceType
		node    string
		kind    Kind
		options int
		launch  int
	}{
		{name: "spot-to-spot is off by default", gate: false, its: wide, node: "t19", kind: KindSpotToSpotDisabled},
		{name: "spot-to-spot needs 15 cheaper types", gate: true, its: wide, node: "t10", kind: KindSpotToSpotTooFewTypes, options: 10},
		{name: "spot-to-spot launches with the 15 cheapest", gate: true, its: wide, node: "t19", launch: 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, cSnap(tt.its, spotPool(), spotNode(tt.node)), single(ConsolidationOptions{SpotToSpot: tt.gate}))
			if tt.launch > 0 {
				require.Len(t, d.Commands, 1)
				r := d.Commands[0].Replacements[0]
				assert.Len(t, r.InstanceTypes, tt.launch)
				assert.Equal(t, "t00", r.InstanceTypes[0].Name)
				assert.Equal(t, "t14", r.InstanceTypes[14].Name)
				assert.Equal(t, []string{spot}, r.Requirements.Get(v1.CapacityTypeLabelKey).Values())
				return
			}
			assert.Empty(t, d.Commands)
			v := verdictOf(d, "a", tt.kind)
			require.NotNil(t, v, explanationOf(d, "a").Message())
			if tt.options > 0 {
				assert.Equal(t, tt.options, v.Consolidation.Options)
				assert.Contains(t, v.Message(), "requires 15 cheaper instance type options than the current candidate to consolidate, got 10")
			}
		})
	}
	t.Run("multi-node spot-to-spot needs no 15 types", func(t *testing.T) {
		nodes := []*Node{
			cNode("a", "p", typeNamed(wide, "t03"), spot, withPods(cpuPod("x", "1"))),
			cNode("b", "p", typeNamed(wide, "t03"), spot, withPods(cpuPod("y", "1"))),
		}
		d := decide(t, cSnap(wide, spotPool(), nodes), multi(ConsolidationOptions{SpotToSpot: true}))
		require.Len(t, d.Commands, 1)
		r := d.Commands[0].Replacements[0]
		assert.Equal(t, []string{"t00", "t01", "t02"}, typeNames(r.InstanceTypes), "cheaper than t03, the cheapest removed type")
	})
}

func TestBalanced(t *testing.T) {
	its := catalog()
	m4, m16 := typeNamed(its, "m.4x"), typeNamed(its, "m.16x")
	// One m.4x holds 8 small pods and could move to an m.2x, saving $0.10
	// of the pool's $0.80 for 9 of its 15 units of disruption.
	marginal := func(p v1.ConsolidationPolicy) (*Snapshot, []*Node) {
		var small []*corev1.Pod
		for i := 0; i < 8; i++ {
			small = append(small, cpuPod(fmt.Sprintf("s%d", i), "200m"))
		}
		nodes := []*Node{
			cNode("cand", "p", m4, od, withPods(small...)),
			cNode("full1", "p", m4, od, withPods(cpuPod("f1", "3500m"))),
			cNode("full2", "p", m4, od, withPods(cpuPod("f2", "3500m"))),
			cNode("full3", "p", m4, od, withPods(cpuPod("f3", "3500m"))),
		}
		return cSnap(its, []*v1.NodePool{cPool("p", policy(p))}, nodes), nodes
	}
	t.Run("WhenEmptyOrUnderutilized takes the marginal move", func(t *testing.T) {
		snap, _ := marginal(v1.ConsolidationPolicyWhenEmptyOrUnderutilized)
		d := decide(t, snap, DefaultMethods()...)
		require.Len(t, d.Commands, 1)
		assert.Equal(t, []string{"cand"}, names(d.Commands[0].Candidates))
		assert.Nil(t, d.Commands[0].BalancedScore())
	})
	t.Run("Balanced refuses it with the figures", func(t *testing.T) {
		snap, _ := marginal(v1.ConsolidationPolicyBalanced)
		d := decide(t, snap, DefaultMethods()...)
		assert.Empty(t, d.Commands)
		v := verdictOf(d, "cand", KindBalancedRejected)
		require.NotNil(t, v, explanationOf(d, "cand").Message())
		s := v.Consolidation.Score
		require.NotNil(t, s)
		assert.False(t, s.Approved)
		assert.InDelta(t, 15, s.PoolDisruption, 1e-9)
		assert.InDelta(t, 0.8, s.PoolCost, 1e-9)
		assert.Less(t, s.Score, 0.5)
		assert.Contains(t, v.Message(), "< threshold 0.50 (consolidationThreshold: 2.0")
	})
	t.Run("Balanced approves a move that pays", func(t *testing.T) {
		nodes := []*Node{cNode("a", "p", m16, od, withPods(cpuPod("x", "1")))}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p", policy(v1.ConsolidationPolicyBalanced))}, nodes), single())
		require.Len(t, d.Commands, 1)
		s := d.Commands[0].BalancedScore()
		require.NotNil(t, s)
		assert.True(t, s.Approved)
		// $0.80 -> $0.10 saves 87.5% of the pool for all of its disruption.
		assert.InDelta(t, 0.875, s.Score, 1e-9)
		assert.Equal(t, "score 0.88 >= threshold 0.50 (consolidationThreshold: 2.0, savings 87.5%, disruption 100.0%)", s.Message())
	})
	t.Run("a uniform pool's half-price replace sits exactly on the threshold", func(t *testing.T) {
		var nodes []*Node
		for i := 0; i < 4; i++ {
			nodes = append(nodes, cNode(fmt.Sprintf("n%d", i), "p", m4, od, withPods(cpuPod(fmt.Sprintf("x%d", i), "3500m"))))
		}
		totals := newBalancedTotals(cSnap(its, []*v1.NodePool{cPool("p", policy(v1.ConsolidationPolicyBalanced))}, nodes))
		c := &Candidate{Node: nodes[0], NodePool: cPool("p")}
		s := totals.score([]*Candidate{c}, 0.1) // half of $0.20
		assert.InDelta(t, 0.5, s.Score, 1e-9)
		assert.True(t, s.Approved)
		assert.False(t, totals.score([]*Candidate{c}, 0).Approved, "no saving, no move")
	})
}

func TestConsolidationSimulationRules(t *testing.T) {
	its := catalog()
	m8 := typeNamed(its, "m.8x")
	after := func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(10 * time.Minute) }
	recently := func(n *Node) { n.NodeClaim.Status.LastPodEventTime = metav1.NewTime(now.Add(-time.Minute)) }
	longAgo := func(n *Node) { n.NodeClaim.Status.LastPodEventTime = metav1.NewTime(now.Add(-time.Hour)) }
	t.Run("a destination inside its consolidateAfter window is not used", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			dest     nodeOpt
			decision string
		}{
			{"window elapsed: delete onto it", longAgo, "delete"},
			{"window open: replace instead", recently, "replace"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				nodes := []*Node{
					cNode("a", "p", m8, od, longAgo, withPods(cpuPod("x", "1"))),
					cNode("b", "p", m8, od, tt.dest, withPods(cpuPod("y", "6"))),
				}
				d := decide(t, cSnap(its, []*v1.NodePool{cPool("p", after)}, nodes), single())
				require.Len(t, d.Commands, 1)
				assert.Equal(t, []string{"a"}, names(d.Commands[0].Candidates))
				assert.Equal(t, tt.decision, d.Commands[0].Decision())
			})
		}
	})
	t.Run("a simulator that cannot exclude is checked after the fact", func(t *testing.T) {
		nodes := []*Node{
			cNode("a", "p", m8, od, longAgo, withPods(cpuPod("x", "1"))),
			cNode("b", "p", m8, od, recently, withPods(cpuPod("y", "6"))),
		}
		snap := cSnap(its, []*v1.NodePool{cPool("p", after)}, nodes)
		plain := SolverSimulator{View: snap.View()}
		d, err := Disrupt(snap, []Method{single()}, SimulatorFunc(func(cs []*Candidate, _ SimulationOptions) (*Simulation, error) {
			return plain.Simulate(cs, SimulationOptions{})
		}))
		require.NoError(t, err)
		for _, cmd := range d.Commands {
			assert.NotContains(t, names(cmd.Candidates), "a")
		}
		v := verdictOf(d, "a", KindPodsDoNotFit)
		require.NotNil(t, v)
		assert.Equal(t, "b", v.Consolidation.Destination)
		assert.Equal(t, DestinationConsolidateWait, v.Consolidation.DestinationReason)
	})
	t.Run("a plan onto an uninitialized node is rejected", func(t *testing.T) {
		starting := cNode("b", "p", m8, od)
		starting.Initialized = false
		nodes := []*Node{cNode("a", "p", m8, od, withPods(cpuPod("x", "1"))), starting}
		d := decide(t, cSnap(its, []*v1.NodePool{cPool("p")}, nodes), single())
		assert.Empty(t, d.Commands)
		v := verdictOf(d, "a", KindPodsDoNotFit)
		require.NotNil(t, v, explanationOf(d, "a").Message())
		assert.Equal(t, DestinationUninitialized, v.Consolidation.DestinationReason)
		assert.Contains(t, v.Message(), `would only fit on node "b", which is not initialized`)
	})
	t.Run("do-not-disrupt and PDBs keep their nodes with the verdict", func(t *testing.T) {
		nodes := []*Node{
			cNode("dnd", "p", typeNamed(its, "m.16x"), od, withPods(cpuPod("x", "1", annotated("true")))),
			cNode("pdb", "p", typeNamed(its, "m.16x"), od, withPods(cpuPod("guarded", "1"))),
		}
		snap := cSnap(its, []*v1.NodePool{cPool("p")}, nodes)
		snap.PDBs = append(snap.PDBs, pdb("guard", 0, "guarded"))
		d := decide(t, snap, DefaultMethods()...)
		assert.Empty(t, d.Commands)
		assert.NotNil(t, verdictOf(d, "dnd", KindPodDoNotDisrupt))
		assert.NotNil(t, verdictOf(d, "pdb", KindPDBBlocked))
		assert.Len(t, explanationOf(d, "pdb").Verdicts, 1, "a blocked node is reported once, not per method")
	})
}

func TestConsolidationExplainsEveryCandidate(t *testing.T) {
	its := catalog()
	nodes := []*Node{
		cNode("well-packed", "p", typeNamed(its, "m.2x"), od, withPods(cpuPod("x", "1800m"))),
		cNode("well-packed2", "p", typeNamed(its, "m.2x"), od, withPods(cpuPod("y", "1800m"))),
	}
	snap := cSnap(its, []*v1.NodePool{cPool("p")}, nodes)
	ex, err := Explain(snap, SolverSimulator{View: snap.View()})
	require.NoError(t, err)
	require.Len(t, ex, 2)
	for _, e := range ex {
		var kinds []Kind
		for _, v := range e.Verdicts {
			kinds = append(kinds, v.Kind)
		}
		assert.Contains(t, kinds, KindNotCheaper, e.Message())
	}
}

func TestConsolidationValidation(t *testing.T) {
	its := catalog()
	m8 := typeNamed(its, "m.8x")
	build := func(bPods ...*corev1.Pod) *Snapshot {
		nodes := []*Node{
			cNode("a", "p", m8, od, withPods(cpuPod("x", "1"))),
			cNode("b", "p", m8, od, withPods(bPods...)),
		}
		return cSnap(its, []*v1.NodePool{cPool("p")}, nodes)
	}
	snap := build(cpuPod("y", "6"))
	d := decide(t, snap, single())
	require.Len(t, d.Commands, 1)
	cmd := d.Commands[0]
	require.Equal(t, "delete", cmd.Decision())

	tests := []struct {
		name  string
		fresh *Snapshot
		valid bool
	}{
		{"nothing changed", build(cpuPod("y", "6")), true},
		{"the destination filled up", build(cpuPod("y", "6"), cpuPod("late", "1")), false},
		{"the candidate was nominated", func() *Snapshot {
			s := build(cpuPod("y", "6"))
			s.Nodes[0].Nominated = true
			return s
		}(), false},
		{"the budget closed", func() *Snapshot {
			s := build(cpuPod("y", "6"))
			s.NodePools["p"].Spec.Disruption.Budgets = []v1.Budget{budget("0")}
			return s
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh, err := ValidateCandidates(tt.fresh, cmd)
			if err == nil {
				err = ValidateCommand(tt.fresh, cmd, fresh, SolverSimulator{View: tt.fresh.View()})
			}
			if tt.valid {
				require.NoError(t, err)
				assert.Equal(t, []string{"a"}, names(fresh))
				return
			}
			require.Error(t, err)
			assert.True(t, IsValidationError(err), err)
		})
	}
	t.Run("a replacement must still be offered", func(t *testing.T) {
		single16 := func(pods ...*corev1.Pod) *Snapshot {
			return cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{cNode("a", "p", typeNamed(its, "m.16x"), od, withPods(pods...))})
		}
		s := single16(cpuPod("x", "1"))
		d := decide(t, s, single())
		require.Len(t, d.Commands, 1)
		cmd := d.Commands[0]
		require.Equal(t, []string{"m.2x", "m.4x", "m.8x"}, typeNames(cmd.Replacements[0].InstanceTypes))
		ok := single16(cpuPod("x", "1"))
		fresh, err := ValidateCandidates(ok, cmd)
		require.NoError(t, err)
		assert.NoError(t, ValidateCommand(ok, cmd, fresh, SolverSimulator{View: ok.View()}))
		// The pod grew: an m.2x no longer fits it.
		grown := single16(cpuPod("x", "3"))
		fresh, err = ValidateCandidates(grown, cmd)
		require.NoError(t, err)
		err = ValidateCommand(grown, cmd, fresh, SolverSimulator{View: grown.View()})
		assert.True(t, IsValidationError(err), err)
	})
}
