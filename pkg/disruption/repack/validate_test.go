package repack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// splitCatalog is m.2x, m.4x, m.8x at $0.05 per core and hour and an m.16x
// at $1.00, so that splitting an m.16x into two m.8x ($0.80) saves money
// while one cheaper replacement does not exist.
func splitCatalog() []*scheduling.InstanceType {
	return []*scheduling.InstanceType{itype("m.2x", 2, 0.10), itype("m.4x", 4, 0.20), itype("m.8x", 8, 0.40), itype("m.16x", 16, 1.00)}
}

// replacement is a planned on-demand NodeClaim of pool p limited to types.
func replacement(types ...*scheduling.InstanceType) *scheduling.NewNodeClaim {
	var names []string
	for _, it := range types {
		names = append(names, it.Name)
	}
	return &scheduling.NewNodeClaim{
		NodePool: "p",
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeOnDemand),
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, names...),
		),
		InstanceTypes: types,
	}
}

func candidatesOf(t *testing.T, snap *disruption.Snapshot, nodes ...string) []*disruption.Candidate {
	t.Helper()
	found := disruption.Eligible(snap)
	var out []*disruption.Candidate
	for _, n := range nodes {
		c := found[n]
		require.NotNil(t, c, n)
		out = append(out, c)
	}
	return out
}

// validateOne validates one planner command alone.
func validateOne(snap *disruption.Snapshot, cmd *disruption.Command) error {
	res, err := repack.ValidatePlan(snap, []*disruption.Command{cmd}, disruption.SolverSimulator{View: snap.View()})
	if err != nil {
		return err
	}
	return res[0].Err
}

func candidateNames(cs []*disruption.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}

func TestValidatePlannedSplit(t *testing.T) {
	its := splitCatalog()
	m8, m16 := its[2], its[3]
	build := func(pods ...*corev1.Pod) *disruption.Snapshot {
		return snapshot(its, "100%", node("big", m16, pods...))
	}
	planned := build(pod("x", 7000), pod("y", 7000))
	split := &disruption.Command{Method: repack.Planner{}, Candidates: candidatesOf(t, planned, "big"),
		Replacements: []*scheduling.NewNodeClaim{replacement(m8), replacement(m8)}}

	// The plain solver packs both pods onto one m.16x, dearer than the
	// split: only a simulation limited to the command's types supports it.
	plain, err := disruption.SolverSimulator{View: planned.View()}.Simulate(split.Candidates, disruption.SimulationOptions{})
	require.NoError(t, err)
	require.Len(t, plain.Replacements, 1)
	require.Greater(t, disruption.ReplacementsPrice(plain.Replacements), disruption.ReplacementsPrice(split.Replacements))

	tests := []struct {
		name  string
		fresh *disruption.Snapshot
		valid bool
	}{
		{"nothing changed", build(pod("x", 7000), pod("y", 7000)), true},
		{"the pods shrank", build(pod("x", 3000), pod("y", 3000)), true},
		{"a pod outgrew the split's machines", build(pod("x", 7000), pod("y", 8500)), false},
		{"a third pod needs a third machine", build(pod("x", 7000), pod("y", 7000), pod("z", 3000)), false},
		{"the budget closed", snapshot(its, "0", node("big", m16, pod("x", 7000), pod("y", 7000))), false},
		{"the candidate was nominated", func() *disruption.Snapshot {
			s := build(pod("x", 7000), pod("y", 7000))
			s.Nodes[0].Nominated = true
			return s
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateOne(tt.fresh, split)
			if tt.valid {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, disruption.IsValidationError(err), err)
		})
	}
	t.Run("upstream's rule still refuses two replacements", func(t *testing.T) {
		up := *split
		up.Method = disruption.MultiNodeConsolidation{}
		fresh := build(pod("x", 7000), pod("y", 7000))
		cands, err := disruption.ValidateCandidates(fresh, &up)
		require.NoError(t, err)
		err = disruption.ValidateCommand(fresh, &up, cands, disruption.SolverSimulator{View: fresh.View()})
		require.Error(t, err)
		assert.True(t, disruption.IsValidationError(err), err)
	})
}

func TestValidatePlannedNToM(t *testing.T) {
	m8 := itype("m.8x", 8, 0.40)
	build := func(yMilli int64) *disruption.Snapshot {
		return snapshot([]*scheduling.InstanceType{m8}, "100%", node("a", m8, pod("x", 3000)), node("b", m8, pod("y", yMilli)))
	}
	planned := build(3000)
	// Two m.8x become one: the same type is relaunched, but a machine ends.
	cmd := &disruption.Command{Method: repack.Planner{}, Candidates: candidatesOf(t, planned, "a", "b"),
		Replacements: []*scheduling.NewNodeClaim{replacement(m8)}}
	assert.NoError(t, validateOne(build(3000), cmd))
	// y grew: both no longer fit one m.8x; two of them cost what the
	// command was to save.
	err := validateOne(build(5500), cmd)
	require.Error(t, err)
	assert.True(t, disruption.IsValidationError(err), err)
}

func TestValidatePlanJointly(t *testing.T) {
	m8 := itype("m.8x", 8, 0.40)
	build := func(budget string) *disruption.Snapshot {
		return snapshot([]*scheduling.InstanceType{m8}, budget,
			node("a", m8, pod("x", 3000)), node("b", m8, pod("y", 3000)), node("c", m8, pod("z", 4000)))
	}
	snap := build("100%")
	del := func(name string) *disruption.Command {
		return &disruption.Command{Method: repack.Planner{}, Candidates: candidatesOf(t, snap, name)}
	}
	cmds := []*disruption.Command{del("a"), del("b")}
	// Alone, each delete holds (its pod fits on the other candidate or on
	// c)...
	for _, cmd := range cmds {
		require.NoError(t, validateOne(build("100%"), cmd))
	}
	// ...together only one does: c has room for one pod, not two.
	fresh := build("100%")
	res, err := repack.ValidatePlan(fresh, cmds, disruption.SolverSimulator{View: fresh.View()})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.NoError(t, res[0].Err)
	assert.Equal(t, []string{"a"}, candidateNames(res[0].Fresh))
	require.Error(t, res[1].Err)
	assert.True(t, disruption.IsValidationError(res[1].Err))

	t.Run("a shared budget", func(t *testing.T) {
		s := build("1")
		cs := []*disruption.Command{del("c"), del("a")}
		res, err := repack.ValidatePlan(s, cs, disruption.SolverSimulator{View: s.View()})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.Error(t, res[1].Err)
		assert.Contains(t, res[1].Err.Error(), "budgets")
	})
	t.Run("revalidation keeps the valid prefix", func(t *testing.T) {
		s := build("100%")
		cs := []*disruption.Command{del("a"), del("b"), del("c")}
		s.Nodes[1].Nominated = true
		kept, err := repack.RevalidatePlan(s, cs)
		require.Error(t, err)
		require.Len(t, kept, 1)
		assert.Equal(t, []string{"a"}, candidateNames(kept[0].Candidates))
		kept, err = repack.RevalidatePlan(build("100%"), cs)
		require.NoError(t, err)
		assert.Len(t, kept, 3)
	})
}

// countingSimulator counts the simulations ValidatePlan asks for.
type countingSimulator struct {
	disruption.SolverSimulator
	calls int
}

func (c *countingSimulator) Simulate(cs []*disruption.Candidate, opts disruption.SimulationOptions) (*disruption.Simulation, error) {
	c.calls++
	return c.SolverSimulator.Simulate(cs, opts)
}

// A plan that still holds as a whole is validated with one simulation; one
// that does not is checked command by command.
func TestValidatePlanAtOnce(t *testing.T) {
	m8 := itype("m.8x", 8, 0.40)
	for _, tc := range []struct {
		name     string
		zMilli   int64
		calls    int
		accepted int
	}{
		{"c has room for both pods", 3000, 1, 2},
		{"c has room for one", 6500, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot([]*scheduling.InstanceType{m8}, "100%",
				node("a", m8, pod("x", 1000)), node("b", m8, pod("y", 1000)), node("c", m8, pod("z", tc.zMilli)))
			cmds := []*disruption.Command{
				{Method: repack.Planner{}, Candidates: candidatesOf(t, snap, "a")},
				{Method: repack.Planner{}, Candidates: candidatesOf(t, snap, "b")},
			}
			sim := &countingSimulator{SolverSimulator: disruption.SolverSimulator{View: snap.View()}}
			res, err := repack.ValidatePlan(snap, cmds, sim)
			require.NoError(t, err)
			require.Len(t, res, 2)
			ok := 0
			for _, r := range res {
				if r.Err == nil {
					ok++
					assert.NotEmpty(t, r.Fresh)
				}
			}
			assert.Equal(t, tc.accepted, ok)
			assert.Equal(t, tc.calls, sim.calls)
		})
	}
}
