package disruption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// planMethod stands for the repacking planner (which this package cannot
// import): upstream's preconditions, its own consolidation type.
type planMethod struct{ MultiNodeConsolidation }

func (planMethod) ConsolidationType() string { return "repack" }

// premiumCatalog is catalog() with m.16x at $1.00 instead of $0.80, so
// that splitting an m.16x into two m.8x ($0.80) saves money while one
// cheaper replacement does not exist.
func premiumCatalog() []*scheduling.InstanceType {
	its := catalog()
	for i, it := range its {
		if it.Name == "m.16x" {
			its[i] = cType("m.16x", 16, 1.00)
		}
	}
	return its
}

// replacement is a planned on-demand NodeClaim of pool p limited to types.
func replacement(types ...*scheduling.InstanceType) *scheduling.NewNodeClaim {
	names := typeNames(types)
	return &scheduling.NewNodeClaim{
		NodePool: "p",
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeOnDemand),
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, names...),
		),
		InstanceTypes: types,
	}
}

func candidatesOf(t *testing.T, snap *Snapshot, nodes ...string) []*Candidate {
	t.Helper()
	found := byName(discover(snap))
	var out []*Candidate
	for _, n := range nodes {
		c := found[n]
		require.NotNil(t, c, n)
		out = append(out, c)
	}
	return out
}

func validate(snap *Snapshot, cmd *Command) error {
	fresh, err := ValidateCandidates(snap, cmd)
	if err != nil {
		return err
	}
	return ValidateCommand(snap, cmd, fresh, SolverSimulator{Snapshot: snap})
}

func TestValidatePlannedSplit(t *testing.T) {
	its := premiumCatalog()
	m8, m16 := typeNamed(its, "m.8x"), typeNamed(its, "m.16x")
	build := func(pods ...*corev1.Pod) *Snapshot {
		return cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{cNode("big", "p", m16, od, withPods(pods...))})
	}
	planned := build(cpuPod("x", "7"), cpuPod("y", "7"))
	split := &Command{Method: planMethod{}, Candidates: candidatesOf(t, planned, "big"),
		Replacements: []*scheduling.NewNodeClaim{replacement(m8), replacement(m8)}}

	// The plain solver packs both pods onto one m.16x, dearer than the
	// split: only a simulation limited to the command's types supports it.
	plain, err := SolverSimulator{Snapshot: planned}.Simulate(split.Candidates)
	require.NoError(t, err)
	require.Len(t, plain.Replacements, 1)
	require.Greater(t, ReplacementsPrice(plain.Replacements), ReplacementsPrice(split.Replacements))

	tests := []struct {
		name  string
		fresh *Snapshot
		valid bool
	}{
		{"nothing changed", build(cpuPod("x", "7"), cpuPod("y", "7")), true},
		{"the pods shrank", build(cpuPod("x", "3"), cpuPod("y", "3")), true},
		{"a pod outgrew the split's machines", build(cpuPod("x", "7"), cpuPod("y", "7.95")), false},
		{"a third pod needs a third machine", build(cpuPod("x", "7"), cpuPod("y", "7"), cpuPod("z", "3")), false},
		{"the budget closed", func() *Snapshot {
			s := build(cpuPod("x", "7"), cpuPod("y", "7"))
			s.NodePools["p"].Spec.Disruption.Budgets = []v1.Budget{budget("0")}
			return s
		}(), false},
		{"the candidate was nominated", func() *Snapshot {
			s := build(cpuPod("x", "7"), cpuPod("y", "7"))
			s.Nodes[0].Nominated = true
			return s
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate(tt.fresh, split)
			if tt.valid {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, IsValidationError(err), err)
		})
	}
	t.Run("upstream's rule still refuses two replacements", func(t *testing.T) {
		up := *split
		up.Method = multi()
		err := validate(build(cpuPod("x", "7"), cpuPod("y", "7")), &up)
		require.Error(t, err)
		assert.True(t, IsValidationError(err), err)
	})
}

func TestValidatePlannedNToM(t *testing.T) {
	its := catalog()
	m8 := typeNamed(its, "m.8x")
	build := func(bCPU string) *Snapshot {
		return cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{
			cNode("a", "p", m8, od, withPods(cpuPod("x", "3"))),
			cNode("b", "p", m8, od, withPods(cpuPod("y", bCPU))),
		})
	}
	planned := build("3")
	// Two m.8x become one: the same type is relaunched, but a machine ends.
	cmd := &Command{Method: planMethod{}, Candidates: candidatesOf(t, planned, "a", "b"),
		Replacements: []*scheduling.NewNodeClaim{replacement(m8)}}
	assert.NoError(t, validate(build("3"), cmd))
	// y grew: both no longer fit one m.8x; two of them cost what the
	// command was to save.
	err := validate(build("5"), cmd)
	require.Error(t, err)
	assert.True(t, IsValidationError(err), err)
}

func TestValidatePlanJointly(t *testing.T) {
	its := catalog()
	m8 := typeNamed(its, "m.8x")
	build := func() *Snapshot {
		return cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{
			cNode("a", "p", m8, od, withPods(cpuPod("x", "3"))),
			cNode("b", "p", m8, od, withPods(cpuPod("y", "3"))),
			cNode("c", "p", m8, od, withPods(cpuPod("z", "4"))),
		})
	}
	snap := build()
	del := func(name string) *Command {
		return &Command{Method: planMethod{}, Candidates: candidatesOf(t, snap, name)}
	}
	cmds := []*Command{del("a"), del("b")}
	// Alone, each delete holds (its pod fits on the other candidate or on
	// c)...
	for _, cmd := range cmds {
		require.NoError(t, validate(build(), cmd))
	}
	// ...together only one does: c has room for one pod, not two.
	fresh := build()
	res, err := ValidatePlan(fresh, cmds, SolverSimulator{Snapshot: fresh})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.NoError(t, res[0].Err)
	assert.Equal(t, []string{"a"}, names(res[0].Fresh))
	require.Error(t, res[1].Err)
	assert.True(t, IsValidationError(res[1].Err))

	t.Run("a shared budget", func(t *testing.T) {
		s := build()
		s.NodePools["p"].Spec.Disruption.Budgets = []v1.Budget{budget("1")}
		cs := []*Command{del("c"), del("a")}
		res, err := ValidatePlan(s, cs, SolverSimulator{Snapshot: s})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.Error(t, res[1].Err)
		assert.Contains(t, res[1].Err.Error(), "budgets")
	})
	t.Run("revalidation keeps the valid prefix", func(t *testing.T) {
		s := build()
		cs := []*Command{del("a"), del("b"), del("c")}
		s.Nodes[1].Nominated = true
		kept, err := RevalidatePlan(s, cs)
		require.Error(t, err)
		require.Len(t, kept, 1)
		assert.Equal(t, []string{"a"}, names(kept[0].Candidates))
		kept, err = RevalidatePlan(build(), cs)
		require.NoError(t, err)
		assert.Len(t, kept, 3)
	})
}

// countingSimulator counts the joint simulations ValidatePlan asks for.
type countingSimulator struct {
	SolverSimulator
	calls int
}

func (c *countingSimulator) SimulatePlan(cs []*Candidate, excluded map[string]bool, types map[string]map[string]bool) (*Simulation, error) {
	c.calls++
	return c.SolverSimulator.SimulatePlan(cs, excluded, types)
}

// A plan that still holds as a whole is validated with one simulation; one
// that does not is checked command by command, as before.
func TestValidatePlanAtOnce(t *testing.T) {
	its := catalog()
	m8 := typeNamed(its, "m.8x")
	build := func(zCPU string) *Snapshot {
		return cSnap(its, []*v1.NodePool{cPool("p")}, []*Node{
			cNode("a", "p", m8, od, withPods(cpuPod("x", "1"))),
			cNode("b", "p", m8, od, withPods(cpuPod("y", "1"))),
			cNode("c", "p", m8, od, withPods(cpuPod("z", zCPU))),
		})
	}
	for _, tc := range []struct {
		name     string
		zCPU     string
		calls    int
		accepted int
	}{
		{"c has room for both pods", "3", 1, 2},
		{"c has room for one", "6.5", 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := build(tc.zCPU)
			cmds := []*Command{
				{Method: planMethod{}, Candidates: candidatesOf(t, snap, "a")},
				{Method: planMethod{}, Candidates: candidatesOf(t, snap, "b")},
			}
			sim := &countingSimulator{SolverSimulator: SolverSimulator{Snapshot: snap}}
			res, err := ValidatePlan(snap, cmds, sim)
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

func TestRestrictPools(t *testing.T) {
	its := catalog()
	pools := []*scheduling.NodePool{{Name: "p", InstanceTypes: its}, {Name: "q", Weight: 5, InstanceTypes: its}}
	out := RestrictPools(pools, map[string]map[string]bool{"p": {"m.4x": true, "m.8x": true}, "q": {"none": true}})
	require.Len(t, out, 1)
	assert.Equal(t, []string{"m.4x", "m.8x"}, typeNames(out[0].InstanceTypes))
	assert.Len(t, pools[0].InstanceTypes, 4, "the input is left alone")
	assert.Empty(t, RestrictPools(pools, nil))
}
