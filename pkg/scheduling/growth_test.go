package scheduling

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGrowthStopsAtPremiumTypes: with CapGrowth, a planned NodeClaim grows into a larger
// type only while some type that holds its pods prices them within
// growthTolerance of the best type it was opened with; past that the pod
// opens a new NodeClaim, unless the pool's limits allow no more.
func TestGrowthStopsAtPremiumTypes(t *testing.T) {
	// r.4x holds two of the pods and r.8x five; four pods need one r.8x or
	// two r.4x.
	small := func() *InstanceType { return mkType("r.4x", 4, 32, 1.0, zones3[:1], odOnly) }
	large := func(price float64) *InstanceType { return mkType("r.8x", 8, 64, price, zones3[:1], odOnly) }
	// r.6x holds three pods at a premium (0.75 a pod); r.8x is linear.
	dearMiddle := func() *InstanceType { return mkType("r.6x", 6, 48, 2.25, zones3[:1], odOnly) }
	cases := []struct {
		name  string
		types []*InstanceType
		mods  []func(*NodePool)
		// want is each NodeClaim's cheapest type.
		want []string
		cost float64
	}{
		{"the larger type is premium: two small NodeClaims", []*InstanceType{small(), large(3.0)}, nil,
			[]string{"r.4x", "r.4x"}, 2.0},
		{"the larger type is priced linearly: one grown NodeClaim", []*InstanceType{small(), large(2.0)}, nil,
			[]string{"r.8x"}, 2.0},
		{"premium, but the pool allows one node: grown anyway", []*InstanceType{small(), large(3.0)},
			[]func(*NodePool){poolRemaining("nodes", "1")}, []string{"r.8x"}, 3.0},
		{"a dear intermediate size does not stop growth toward a good one", []*InstanceType{small(), dearMiddle(), large(2.0)}, nil,
			[]string{"r.8x"}, 2.0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: podsN(4, "1500m", "12Gi"), NodePools: []*NodePool{mkPool("p", tc.types, tc.mods...)}, Options: Options{CapGrowth: true}}
			res := solveOK(t, in)
			require.Empty(t, res.Unscheduled())
			var got []string
			for _, nc := range res.NewNodeClaims {
				got = append(got, nc.InstanceTypes[0].Name)
			}
			assert.Equal(t, tc.want, got)
			assert.InDelta(t, tc.cost, res.Cost(), 1e-9)
		})
	}
}
