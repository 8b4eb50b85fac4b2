package instance_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

// fleetRecorder is the local AWS's EC2 client keeping every CreateFleet
// request it sends.
type fleetRecorder struct {
	*ec2.Client
	mu     sync.Mutex
	inputs []*ec2.CreateFleetInput
}

func (r *fleetRecorder) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, in)
	r.mu.Unlock()
	return r.Client.CreateFleet(ctx, in, opts...)
}

// TestOverlaidPricesArePrioritized: a launch whose overrides carry a price
// a NodeOverlay set asks EC2 for the order of those prices (the
// prioritized strategy of its capacity type, each override's priority the
// rank of its price), so EC2 launches the type the overlay made cheapest
// although its own list price is the highest; a launch with list prices
// only keeps EC2's price strategies and sends no priorities.
func TestOverlaidPricesArePrioritized(t *testing.T) {
	cases := []struct {
		name         string
		capacityType string
		// prices of m5.large, c5.large and m5.xlarge (list: m5.xlarge the
		// dearest); overlaid marks the one an overlay set.
		prices       [3]float64
		overlaid     int // index of the overlaid override, -1 for none
		wantOnDemand ec2types.FleetOnDemandAllocationStrategy
		wantSpot     ec2types.SpotAllocationStrategy
		wantRanks    []float64 // priorities per override, nil for none
		wantType     string
	}{
		{"on-demand, overlay makes the dearest type cheapest", instance.CapacityTypeOnDemand, [3]float64{0.096, 0.085, 0.01}, 2,
			ec2types.FleetOnDemandAllocationStrategyPrioritized, "", []float64{2, 1, 0}, "m5.xlarge"},
		{"on-demand, list prices only", instance.CapacityTypeOnDemand, [3]float64{0.096, 0.085, 0.192}, -1,
			ec2types.FleetOnDemandAllocationStrategyLowestPrice, "", nil, "c5.large"},
		{"spot, overlay present", instance.CapacityTypeSpot, [3]float64{0.04, 0.04, 0.01}, 2,
			"", ec2types.SpotAllocationStrategyCapacityOptimizedPrioritized, []float64{1, 1, 0}, "m5.xlarge"},
		{"spot, list prices only", instance.CapacityTypeSpot, [3]float64{0.04, 0.035, 0.08}, -1,
			"", ec2types.SpotAllocationStrategyPriceCapacityOptimized, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLaunchEnv(t)
			rec := &fleetRecorder{Client: ec2API}
			p := instance.NewProvider(rec, e.cluster, nil)
			req := e.request("nc-prio", "m5.large")
			req.CapacityType = tc.capacityType
			req.Configs[0].Overrides = nil
			for i, it := range []string{"m5.large", "c5.large", "m5.xlarge"} {
				req.Configs[0].Overrides = append(req.Configs[0].Overrides, instance.Override{
					InstanceType: it, Zone: "us-east-1a", SubnetID: e.subnet, Price: tc.prices[i], PriceOverlaid: i == tc.overlaid})
			}
			inst, err := p.Create(context.Background(), req)
			require.NoError(t, err)
			if tc.wantType != "" {
				assert.Equal(t, tc.wantType, inst.Type)
			}

			require.Len(t, rec.inputs, 1)
			in := rec.inputs[0]
			if tc.wantSpot != "" {
				require.NotNil(t, in.SpotOptions)
				assert.Equal(t, tc.wantSpot, in.SpotOptions.AllocationStrategy)
			} else {
				require.NotNil(t, in.OnDemandOptions)
				assert.Equal(t, tc.wantOnDemand, in.OnDemandOptions.AllocationStrategy)
			}
			priorities := map[string]*float64{}
			for _, o := range in.LaunchTemplateConfigs[0].Overrides {
				priorities[string(o.InstanceType)] = o.Priority
			}
			for i, it := range []string{"m5.large", "c5.large", "m5.xlarge"} {
				if tc.wantRanks == nil {
					assert.Nil(t, priorities[it], it)
					continue
				}
				require.NotNil(t, priorities[it], it)
				assert.Equal(t, tc.wantRanks[i], aws.ToFloat64(priorities[it]), it)
			}
		})
	}
}
