package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// fits is a simulator under which every pod fits existing capacity.
func fits() Simulator {
	return SimulatorFunc(func([]*Candidate, SimulationOptions) (*Simulation, error) { return &Simulation{}, nil })
}

// recordingSim records what it was asked and answers from a table.
type recordingSim struct {
	asked   [][]string
	answers map[string]*Simulation
}

func (r *recordingSim) Simulate(cs []*Candidate, _ SimulationOptions) (*Simulation, error) {
	r.asked = append(r.asked, names(cs))
	if a, ok := r.answers[cs[0].Name()]; ok {
		return a, nil
	}
	return &Simulation{}, nil
}

func TestEmptiness(t *testing.T) {
	tests := []struct {
		name    string
		pools   []*v1.NodePool
		nodes   []*Node
		want    []string
		verdict map[string]Kind
	}{
		{
			name:  "all empty consolidatable nodes in one command",
			pools: []*v1.NodePool{pool("p", budgets(budget("100%")))},
			nodes: []*Node{node("a", "p", consolidatable), node("b", "p", consolidatable), node("c", "p", consolidatable, withPods(pod("x")))},
			want:  []string{"a", "b"}, verdict: map[string]Kind{"c": KindNotEmpty},
		},
		{
			name:  "DaemonSet pods do not make a node busy",
			pools: []*v1.NodePool{pool("p", budgets(budget("100%")))},
			nodes: []*Node{node("a", "p", consolidatable, withPods(pod("ds", daemonSetPod)))},
			want:  []string{"a"},
		},
		{
			name:    "not consolidatable yet",
			pools:   []*v1.NodePool{pool("p", budgets(budget("100%")), func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(10 * time.Minute) })},
			nodes:   []*Node{node("a", "p", cond(v1.ConditionTypeInitialized, now.Add(-time.Minute)))},
			verdict: map[string]Kind{"a": KindNotConsolidatable},
		},
		{
			name:    "consolidateAfter Never",
			pools:   []*v1.NodePool{pool("p", never)},
			nodes:   []*Node{node("a", "p", consolidatable)},
			verdict: map[string]Kind{"a": KindConsolidationDisabled},
		},
		{
			name:  "budget of 1 takes one; the other is told which budget",
			pools: []*v1.NodePool{pool("p", budgets(budget("1")))},
			nodes: []*Node{node("a", "p", consolidatable), node("b", "p", consolidatable)},
			want:  []string{"a"}, verdict: map[string]Kind{"b": KindBudgetExhausted},
		},
		{
			name:    "budget 0 blocks",
			pools:   []*v1.NodePool{pool("p", budgets(budget("0")))},
			nodes:   []*Node{node("a", "p", consolidatable)},
			verdict: map[string]Kind{"a": KindBudgetExhausted},
		},
		{
			name:  "a budget scoped to Drifted does not limit Empty",
			pools: []*v1.NodePool{pool("p", budgets(forReasons(budget("0"), v1.DisruptionReasonDrifted)))},
			nodes: []*Node{node("a", "p", consolidatable), node("b", "p", consolidatable)},
			want:  []string{"a", "b"},
		},
		{
			name:    "an open schedule window blocks",
			pools:   []*v1.NodePool{pool("p", budgets(scheduled("0", "0 11 * * *", 2*time.Hour), budget("100%")))},
			nodes:   []*Node{node("a", "p", consolidatable)},
			verdict: map[string]Kind{"a": KindBudgetExhausted},
		},
		{
			name:  "a closed schedule window does not",
			pools: []*v1.NodePool{pool("p", budgets(scheduled("0", "0 13 * * *", 2*time.Hour), budget("100%")))},
			nodes: []*Node{node("a", "p", consolidatable)},
			want:  []string{"a"},
		},
		{
			name:  "budgets are per pool; a NotReady node uses its pool's",
			pools: []*v1.NodePool{pool("p", budgets(budget("1"))), pool("q", budgets(budget("1")))},
			nodes: []*Node{node("a", "p", consolidatable), node("b", "q", consolidatable), node("c", "q", notReady, withPods(pod("x")))},
			want:  []string{"a"}, verdict: map[string]Kind{"b": KindBudgetExhausted},
		},
		{
			name:  "static pools are never emptied",
			pools: []*v1.NodePool{pool("s", replicas(1))},
			nodes: []*Node{node("a", "s", consolidatable)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Disrupt(testSnapshot(tt.pools, tt.nodes), []Method{Emptiness{}}, nil)
			require.NoError(t, err)
			if tt.want == nil {
				assert.Empty(t, d.Commands)
			} else {
				require.Len(t, d.Commands, 1)
				assert.Equal(t, tt.want, names(d.Commands[0].Candidates))
				assert.Equal(t, "delete", d.Commands[0].Decision())
			}
			for name, kind := range tt.verdict {
				e := explanationOf(d, name)
				require.NotNil(t, e, name)
				require.NotEmpty(t, e.Verdicts, name)
				assert.Equal(t, kind, e.Verdicts[0].Kind, e.Message())
			}
			for _, cmd := range d.Commands {
				for _, c := range cmd.Candidates {
					assert.Nil(t, explanationOf(d, c.Name()), "disrupted nodes get no explanation")
				}
			}
		})
	}
}

func TestEmptinessVerdictDetails(t *testing.T) {
	np := pool("p", budgets(scheduled("0", "0 11 * * *", 2*time.Hour)), func(np *v1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(10 * time.Minute)
	})
	waiting := node("waiting", "p", cond(v1.ConditionTypeInitialized, now.Add(-time.Hour)))
	waiting.NodeClaim.Status.LastPodEventTime.Time = now.Add(-2 * time.Minute)
	d, err := Disrupt(testSnapshot([]*v1.NodePool{np}, []*Node{waiting, node("blocked", "p", consolidatable)}), []Method{Emptiness{}}, nil)
	require.NoError(t, err)

	v := explanationOf(d, "waiting").Verdicts[0]
	require.NotNil(t, v.Until)
	assert.Equal(t, now.Add(8*time.Minute), *v.Until, "consolidateAfter counts from the last pod event")

	v = explanationOf(d, "blocked").Verdicts[0]
	require.NotNil(t, v.Budget)
	assert.Equal(t, 0, v.Budget.Index)
	assert.Equal(t, "0 11 * * *", v.Budget.Schedule)
	assert.Contains(t, v.Message(), `schedule "0 11 * * *" for 2h0m0s`)
}

func TestDrift(t *testing.T) {
	old, older, oldest := now.Add(-time.Minute), now.Add(-time.Hour), now.Add(-2*time.Hour)
	t.Run("empty drifted nodes first, one per command as upstream", func(t *testing.T) {
		sim := &recordingSim{}
		nodes := []*Node{
			node("busy", "p", drifted(oldest), withPods(pod("x"))),
			node("e1", "p", drifted(old)),
			node("e2", "p", drifted(older)),
			node("e3", "p", drifted(older)),
		}
		d, err := Disrupt(testSnapshot([]*v1.NodePool{pool("p", budgets(budget("2")))}, nodes), []Method{Drift{}}, sim)
		require.NoError(t, err)
		require.Len(t, d.Commands, 1)
		assert.Equal(t, []string{"e2"}, names(d.Commands[0].Candidates), "empty first, longest drifted first, then by name")
		assert.Empty(t, sim.asked, "empty nodes need no simulation")
		for _, name := range []string{"e1", "e3", "busy"} {
			assert.Equal(t, KindDeferred, explanationOf(d, name).Verdicts[0].Kind, name)
		}
	})
	t.Run("an empty node the budget holds leaves the next empty one its turn", func(t *testing.T) {
		nodes := []*Node{
			node("busy", "p", drifted(oldest), withPods(pod("x"))),
			node("e1", "p", drifted(old)),
			node("q1", "q", drifted(oldest)),
		}
		pools := []*v1.NodePool{pool("p", budgets(budget("100%"))), pool("q", budgets(budget("0")))}
		d, err := Disrupt(testSnapshot(pools, nodes), []Method{Drift{}}, fits())
		require.NoError(t, err)
		require.Len(t, d.Commands, 1)
		assert.Equal(t, []string{"e1"}, names(d.Commands[0].Candidates))
		assert.Equal(t, KindBudgetExhausted, explanationOf(d, "q1").Verdicts[0].Kind)
	})
	t.Run("one busy node per command, oldest first, with replacements", func(t *testing.T) {
		repl := &scheduling.NewNodeClaim{NodePool: "p"}
		sim := &recordingSim{answers: map[string]*Simulation{"a": {Replacements: []*scheduling.NewNodeClaim{repl}}}}
		nodes := []*Node{
			node("b", "p", drifted(old), withPods(pod("y"))),
			node("a", "p", drifted(older), withPods(pod("x"))),
			node("c", "p", withPods(pod("z"))),
		}
		d, err := Disrupt(testSnapshot([]*v1.NodePool{pool("p", budgets(budget("100%")))}, nodes), []Method{Drift{}}, sim)
		require.NoError(t, err)
		require.Len(t, d.Commands, 1)
		cmd := d.Commands[0]
		assert.Equal(t, []string{"a"}, names(cmd.Candidates))
		assert.Equal(t, []*scheduling.NewNodeClaim{repl}, cmd.Replacements)
		assert.Equal(t, "replace", cmd.Decision())
		assert.Equal(t, [][]string{{"a"}}, sim.asked)
		assert.Equal(t, KindDeferred, explanationOf(d, "b").Verdicts[0].Kind)
		assert.Equal(t, KindNotDrifted, explanationOf(d, "c").Verdicts[0].Kind)
	})
	t.Run("replaced by every NodeClaim the simulation creates, as upstream", func(t *testing.T) {
		// The simulation also plans the pending pods and the pods of nodes
		// already leaving; a drift command launches what it plans for them
		// too, not only the NodeClaims that take the candidate's pods.
		own, pending := &scheduling.NewNodeClaim{NodePool: "p"}, &scheduling.NewNodeClaim{NodePool: "p"}
		sim := &recordingSim{answers: map[string]*Simulation{"a": {
			Replacements: []*scheduling.NewNodeClaim{own},
			Result:       &scheduling.Result{NewNodeClaims: []*scheduling.NewNodeClaim{own, pending}},
		}}}
		nodes := []*Node{node("a", "p", drifted(older), withPods(pod("x")))}
		d, err := Disrupt(testSnapshot([]*v1.NodePool{pool("p", budgets(budget("100%")))}, nodes), []Method{Drift{}}, sim)
		require.NoError(t, err)
		require.Len(t, d.Commands, 1)
		assert.Equal(t, []*scheduling.NewNodeClaim{own, pending}, d.Commands[0].Replacements)
	})
	t.Run("skipped when the pods would not fit, naming them; the next is tried", func(t *testing.T) {
		sim := &recordingSim{answers: map[string]*Simulation{"a": {Unschedulable: []string{"default/x"}}}}
		nodes := []*Node{
			node("a", "p", drifted(older), withPods(pod("x"))),
			node("b", "p", drifted(old), withPods(pod("y"))),
		}
		d, err := Disrupt(testSnapshot([]*v1.NodePool{pool("p", budgets(budget("100%")))}, nodes), []Method{Drift{}}, sim)
		require.NoError(t, err)
		require.Len(t, d.Commands, 1)
		assert.Equal(t, []string{"b"}, names(d.Commands[0].Candidates))
		v := explanationOf(d, "a").Verdicts[0]
		assert.Equal(t, KindReplacementWontFit, v.Kind)
		assert.True(t, v.Event)
		assert.Equal(t, []string{"default/x"}, v.Pods)
		assert.Contains(t, v.Message(), "default/x")
	})
	t.Run("budget 0 blocks drift but not emptiness, when scoped", func(t *testing.T) {
		np := pool("p", budgets(forReasons(budget("0"), v1.DisruptionReasonDrifted), budget("100%")))
		nodes := []*Node{node("a", "p", drifted(old), withPods(pod("x")))}
		d, err := Disrupt(testSnapshot([]*v1.NodePool{np}, nodes), []Method{Drift{}}, fits())
		require.NoError(t, err)
		assert.Empty(t, d.Commands)
		assert.Equal(t, KindBudgetExhausted, explanationOf(d, "a").Verdicts[0].Kind)
	})
	t.Run("static pools are left to StaticDrift", func(t *testing.T) {
		d, err := Disrupt(testSnapshot([]*v1.NodePool{pool("s", replicas(1))}, []*Node{node("a", "s", drifted(old))}), []Method{Drift{}}, fits())
		require.NoError(t, err)
		assert.Empty(t, d.Commands)
	})
}

func TestStaticDrift(t *testing.T) {
	old := now.Add(-time.Hour)
	tests := []struct {
		name string
		pool *v1.NodePool
		n    int
		want int
		kind Kind
	}{
		{"up to budget", pool("s", replicas(4), budgets(budget("2"))), 4, 2, KindBudgetExhausted},
		{"up to limits.nodes headroom", pool("s", replicas(4), budgets(budget("100%")), nodeLimit(5)), 4, 1, KindNodeLimit},
		{"no headroom at all", pool("s", replicas(4), budgets(budget("100%")), nodeLimit(4)), 4, 0, KindNodeLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := nodesOf("s", tt.n, drifted(old), withPods(pod("x")))
			d, err := Disrupt(testSnapshot([]*v1.NodePool{tt.pool}, nodes), DefaultMethods(), nil)
			require.NoError(t, err)
			require.Len(t, d.Commands, tt.want)
			for _, cmd := range d.Commands {
				assert.IsType(t, StaticDrift{}, cmd.Method)
				require.Len(t, cmd.Candidates, 1)
				require.Len(t, cmd.Replacements, 1)
				assert.Equal(t, "s", cmd.Replacements[0].NodePool)
				assert.True(t, cmd.Replacements[0].Requirements.Has(v1.CapacityTypeLabelKey))
			}
			if tt.want < tt.n {
				assert.Equal(t, tt.kind, explanationOf(d, nodes[tt.n-1].Name()).Verdicts[0].Kind)
			}
		})
	}
}

func TestMethodOrder(t *testing.T) {
	old := now.Add(-time.Hour)
	np := pool("p", budgets(budget("100%")))
	nodes := []*Node{node("empty", "p", consolidatable), node("drifted", "p", drifted(old), withPods(pod("x")))}
	d, err := Disrupt(testSnapshot([]*v1.NodePool{np}, nodes), DefaultMethods(), fits())
	require.NoError(t, err)
	require.IsType(t, Emptiness{}, d.Method, "emptiness acts before drift")
	assert.Equal(t, []string{"empty"}, names(d.Commands[0].Candidates))
	require.Len(t, d.Runs, 1, "the pass stops at the first method that acts")
	assert.Equal(t, 1, d.Runs[0].Eligible)

	nodes[0].NodeClaim.Status.Conditions = nil
	d, err = Disrupt(testSnapshot([]*v1.NodePool{np}, nodes), DefaultMethods(), fits())
	require.NoError(t, err)
	require.IsType(t, Drift{}, d.Method)
	assert.Len(t, d.Runs, 3)
}

func TestExplainCoversEveryNode(t *testing.T) {
	nodes := []*Node{
		node("busy", "p", withPods(pod("x"))),
		node("protected", "p", withPods(pod("y", annotated("true")))),
		&Node{Node: node("unmanaged", "").Node},
	}
	ex, err := Explain(testSnapshot([]*v1.NodePool{pool("p")}, nodes), nil)
	require.NoError(t, err)
	require.Len(t, ex, 3)
	byName := map[string]Explanation{}
	for _, e := range ex {
		require.NotEmpty(t, e.Verdicts, e.Node)
		byName[e.Node] = e
	}
	assert.Equal(t, KindNotEmpty, byName["busy"].Verdicts[0].Kind)
	assert.Equal(t, KindNotDrifted, byName["busy"].Verdicts[1].Kind)
	assert.Equal(t, KindPodDoNotDisrupt, byName["protected"].Verdicts[0].Kind)
	assert.Len(t, byName["protected"].Verdicts, 1, "the pod blocker is reported once")
	assert.Equal(t, KindNotManaged, byName["unmanaged"].Verdicts[0].Kind)
	assert.Equal(t, `Node is not empty; Node is not drifted`, byName["busy"].Message())
}
