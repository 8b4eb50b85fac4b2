package benchmark

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

func TestInstanceTypes(t *testing.T) {
	types, err := InstanceTypes(workload.Catalogue())
	require.NoError(t, err)
	require.Len(t, types, workload.CatalogueSize)
	small, large := types[0], types[399]
	assert.Equal(t, "fake-it-0", small.Name)
	assert.False(t, small.Requirements.Get(workload.SpecialLabel).Has("optional"))
	assert.True(t, large.Requirements.Get(workload.SpecialLabel).Has("optional"))
	assert.True(t, large.Requirements.Get(scheduling.LabelZone).Has("test-zone-3"))
	assert.False(t, large.Requirements.Get(scheduling.LabelZone).Has("test-zone-4"))
	assert.True(t, large.Requirements.Get(workload.IntegerLabel).Has("400"))
	assert.Len(t, large.Offerings, 5)
	assert.Equal(t, "400", large.Capacity.Cpu().String())
}

func TestInputOptions(t *testing.T) {
	pool := NodePool(nil)
	for _, tc := range []struct {
		name string
		want scheduling.PreferencePolicy
	}{
		{"RespectPreferences", scheduling.PreferencesRespect},
		{"IgnorePreferences", scheduling.PreferencesIgnore},
		{"Scheduling50", scheduling.PreferencesRespect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := workload.CaseByName(tc.name)
			require.NoError(t, err)
			in := Input(c, pool)
			assert.Equal(t, tc.want, in.Options.PreferencePolicy)
			assert.Len(t, in.Pods, c.PodCount)
			assert.Empty(t, in.Nodes)
		})
	}
}

func TestMeasure(t *testing.T) {
	cat := workload.Catalogue()
	types, err := InstanceTypes(cat)
	require.NoError(t, err)
	c, err := workload.CaseByName("IgnorePreferences")
	require.NoError(t, err)
	zone := func(z string) scheduling.Requirements {
		return scheduling.NewRequirements(scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, z))
	}
	spot := scheduling.NewRequirements(scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, "spot"))

	// Upstream's plan for this case: five k=400 NodeClaims and one k=3.
	res := &scheduling.Result{}
	for _, p := range c.Pods {
		res.Placements = append(res.Placements, scheduling.Placement{Pod: p, NodeClaim: 0})
	}
	for range 5 {
		res.NewNodeClaims = append(res.NewNodeClaims, &scheduling.NewNodeClaim{
			Requirements: zone("test-zone-1"), InstanceTypes: types[399:]})
	}
	res.NewNodeClaims = append(res.NewNodeClaims, &scheduling.NewNodeClaim{
		Requirements: scheduling.Requirements{}, InstanceTypes: types[2:]})
	m, err := Measure(res, c.Pods, cat)
	require.NoError(t, err)
	assert.Equal(t, 6, m.NodeClaims)
	assert.Zero(t, m.Unscheduled)
	assert.InDelta(t, 630.44, m.Cost, 0.01)
	assert.InDelta(t, 1.0013, m.Ratio, 0.001)

	// test-zone-3 has no spot offering, so such a NodeClaim cannot launch.
	bad := &scheduling.Result{NewNodeClaims: []*scheduling.NewNodeClaim{{
		Requirements: zone("test-zone-3").Intersect(spot), InstanceTypes: types}}}
	_, err = Measure(bad, nil, cat)
	assert.Error(t, err)

	// Unplaced pods are counted and left out of the bound.
	res.Placements[0].NodeClaim = -1
	m, err = Measure(res, c.Pods, cat)
	require.NoError(t, err)
	assert.Equal(t, 1, m.Unscheduled)
	assert.Less(t, m.Bound, 629.7)
}
