package instance_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// reservedLT is a launch template targeting the reservation, as the
// launchtemplate provider makes it.
func (e *launchEnv) reservedLT(t *testing.T, reservation, reservationType string) string {
	t.Helper()
	name := e.lt + "-" + reservation
	data := &ec2types.RequestLaunchTemplateData{ImageId: &e.image,
		CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(reservation)}}}
	if reservationType == instance.ReservationTypeCapacityBlock {
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
	_, err := ec2API.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &name, LaunchTemplateData: data})
	require.NoError(t, err)
	return name
}

func (e *launchEnv) reservedRequest(nodeClaim, lt, reservation, reservationType string) instance.Request {
	req := e.request(nodeClaim, "m5.large")
	req.CapacityType = instance.CapacityTypeReserved
	req.ReservationType = reservationType
	req.Configs[0].LaunchTemplateName = lt
	req.Configs[0].CapacityReservationID = reservation
	return req
}

// TestReservedLaunches: a reserved launch goes into its reservation (EC2
// says so), for a capacity block as capacity-block; launches beyond the
// reservation's count get insufficient capacity naming the reservation,
// and the on-demand offering of the same type stays available; reserved
// and unreserved launches arriving together go in separate fleets.
func TestReservedLaunches(t *testing.T) {
	cases := []struct {
		name            string
		reservationType string
		count           int // the reservation's instances
		reserved        int // reserved launches, all at once
		onDemand        int // unreserved launches of the same type beside them
		wantFleets      int
	}{
		{"one reserved launch", instance.ReservationTypeDefault, 2, 1, 0, 1},
		{"a capacity block", instance.ReservationTypeCapacityBlock, 1, 1, 0, 1},
		{"beyond the reservation: the rest are insufficient capacity", instance.ReservationTypeDefault, 1, 3, 0, 1},
		{"reserved and unreserved launches are not merged", instance.ReservationTypeDefault, 2, 2, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLaunchEnv(t)
			cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
				TotalInstanceCount: tc.count, ReservationType: tc.reservationType})
			require.NoError(t, err)
			t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
			lt := e.reservedLT(t, cr.ID, tc.reservationType)
			unavailable := cloudprovider.NewUnavailableOfferings(nil, 0)
			p := instance.NewProvider(ec2API, e.cluster, unavailable, wideWindow)

			var reqs []instance.Request
			for i := 0; i < tc.reserved; i++ {
				reqs = append(reqs, e.reservedRequest(e.cluster+"-r"+string(rune('a'+i)), lt, cr.ID, tc.reservationType))
			}
			for i := 0; i < tc.onDemand; i++ {
				reqs = append(reqs, e.request(e.cluster+"-o"+string(rune('a'+i)), "m5.large"))
			}
			before := local.Calls("ec2", "CreateFleet")
			out := createAll(p, reqs)
			assert.Equal(t, tc.wantFleets, local.Calls("ec2", "CreateFleet")-before, "CreateFleet calls")

			launchedReserved, full := 0, 0
			for i, o := range out {
				reserved := i < tc.reserved
				if o.err != nil {
					require.True(t, reserved, "an unreserved launch failed: %v", o.err)
					require.True(t, cloudprovider.IsInsufficientCapacityError(o.err), o.err)
					assert.Equal(t, []string{cr.ID}, instance.FullReservations(o.err))
					full++
					continue
				}
				assert.True(t, o.inst.Launched)
				desc, err := ec2API.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{o.inst.ID}})
				require.NoError(t, err)
				got := desc.Reservations[0].Instances[0]
				if !reserved {
					assert.Equal(t, instance.CapacityTypeOnDemand, o.inst.CapacityType)
					assert.Empty(t, o.inst.CapacityReservationID)
					assert.Nil(t, got.CapacityReservationId, "an unreserved launch went into the reservation")
					continue
				}
				launchedReserved++
				assert.Equal(t, instance.CapacityTypeReserved, o.inst.CapacityType)
				assert.Equal(t, cr.ID, o.inst.CapacityReservationID)
				assert.Equal(t, tc.reservationType, o.inst.CapacityReservationType)
				assert.Equal(t, cr.ID, aws.ToString(got.CapacityReservationId), "EC2 put it in the reservation")
				// Get reads the same back from EC2.
				again, err := p.Get(context.Background(), o.inst.ID)
				require.NoError(t, err)
				assert.Equal(t, instance.CapacityTypeReserved, again.CapacityType)
				assert.Equal(t, cr.ID, again.CapacityReservationID)
				assert.Equal(t, tc.reservationType, again.CapacityReservationType)
				assert.False(t, again.Launched)
			}
			assert.Equal(t, min(tc.reserved, tc.count), launchedReserved)
			assert.Equal(t, tc.reserved-launchedReserved, full)
			assert.False(t, unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: instance.CapacityTypeOnDemand}),
				"a full reservation leaves the on-demand offering alone")

			// Terminate hands back the instance once; asked again while it
			// shuts down, it reports nothing terminated.
			for _, o := range out[:tc.reserved] {
				if o.err != nil {
					continue
				}
				gone, err := p.Terminate(context.Background(), o.inst.ID)
				require.NoError(t, err)
				require.NotNil(t, gone)
				assert.Equal(t, cr.ID, gone.CapacityReservationID)
			}
			left, ok := local.CapacityReservationByID(cr.ID)
			require.True(t, ok)
			assert.Equal(t, tc.count, left.AvailableInstanceCount, "every unit is back")
		})
	}
}

// TestReservedLaunchHashesWithItsReservation: launches that differ only in
// the reservation their template targets, or in being reserved at all,
// never share a batch, even under one template name.
func TestReservedLaunchHashesWithItsReservation(t *testing.T) {
	p := instance.NewProvider(nil, "hash", nil)
	base := instance.Request{NodeClaimName: "a", NodePoolName: "default", NodeClassName: "default", CapacityType: instance.CapacityTypeOnDemand,
		Configs: []instance.LaunchConfig{{LaunchTemplateName: "lt", ImageID: "ami-1", Overrides: []instance.Override{{InstanceType: "m5.large", Zone: "us-east-1a", SubnetID: "subnet-1"}}}}}
	reserved := func(id, typ string) instance.Request {
		r := base
		r.CapacityType, r.ReservationType = instance.CapacityTypeReserved, typ
		r.Configs = []instance.LaunchConfig{base.Configs[0]}
		r.Configs[0].CapacityReservationID = id
		return r
	}
	hash := func(r instance.Request) string {
		h, err := instance.LaunchHash(p, r)
		require.NoError(t, err)
		return h
	}
	other := base
	other.NodeClaimName = "b"
	assert.Equal(t, hash(base), hash(other), "the NodeClaim is not part of the key")
	assert.Equal(t, hash(reserved("cr-1", "default")), hash(reserved("cr-1", "")), "default is the default type")
	keys := map[string]string{
		"on-demand":     hash(base),
		"cr-1":          hash(reserved("cr-1", "default")),
		"cr-2":          hash(reserved("cr-2", "default")),
		"cr-1 as block": hash(reserved("cr-1", "capacity-block")),
	}
	seen := map[string]string{}
	for name, k := range keys {
		require.NotContains(t, seen, k, "%s hashes like %s", name, seen[k])
		seen[k] = name
	}
	// A template targeting a reservation in an unreserved launch (or the
	// reverse) is a caller's bug, refused rather than mislabelled.
	bad := reserved("", "default")
	_, err := instance.LaunchHash(p, bad)
	assert.Error(t, err)
	bad = base
	bad.Configs = []instance.LaunchConfig{base.Configs[0]}
	bad.Configs[0].CapacityReservationID = "cr-1"
	_, err = instance.LaunchHash(p, bad)
	assert.Error(t, err)
}
