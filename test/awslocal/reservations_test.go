package awslocal_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func targeting(id string) envOption {
	return func(d *ec2types.RequestLaunchTemplateData) {
		d.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(id)}}
	}
}

func describeReservation(t *testing.T, client *ec2.Client, id string) ec2types.CapacityReservation {
	t.Helper()
	out, err := client.DescribeCapacityReservations(context.Background(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	require.NoError(t, err)
	require.Len(t, out.CapacityReservations, 1)
	return out.CapacityReservations[0]
}

func TestCapacityReservationsCountDownWithTargetedLaunches(t *testing.T) {
	ctx := context.Background()
	cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 2,
		Tags: map[string]string{"team": "ml"}})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
	e := newFleetEnv(t, targeting(cr.ID))

	got := describeReservation(t, e.ec2, cr.ID)
	require.Equal(t, int32(2), *got.TotalInstanceCount)
	require.Equal(t, int32(2), *got.AvailableInstanceCount)
	require.Equal(t, ec2types.CapacityReservationStateActive, got.State)
	require.Equal(t, ec2types.CapacityReservationTypeDefault, got.ReservationType)
	require.Equal(t, ec2types.InstanceMatchCriteriaTargeted, got.InstanceMatchCriteria)
	require.Equal(t, ec2types.EndDateTypeUnlimited, got.EndDateType)
	require.Equal(t, "us-east-1a", *got.AvailabilityZone)
	require.NotEmpty(t, *got.AvailabilityZoneId)
	require.Equal(t, "123456789012", *got.OwnerId)
	require.False(t, aws.ToBool(got.Interruptible))

	// Selected by tag and owner the way the provider resolves selector terms.
	byTag, err := e.ec2.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:team"), Values: []string{"ml"}}, {Name: aws.String("owner-id"), Values: []string{"123456789012"}}}})
	require.NoError(t, err)
	require.Contains(t, reservationIDs(byTag.CapacityReservations), cr.ID)

	for want := 1; want >= 0; want-- {
		out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
		require.NoError(t, err)
		require.Empty(t, out.Errors)
		require.Len(t, instanceIDs(out), 1)
		require.Equal(t, int32(want), *describeReservation(t, e.ec2, cr.ID).AvailableInstanceCount)
		desc, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: instanceIDs(out)})
		require.NoError(t, err)
		inst := desc.Reservations[0].Instances[0]
		require.Equal(t, cr.ID, *inst.CapacityReservationId)
		require.Equal(t, cr.ID, *inst.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId)
	}
	// Full: the reservation's pool is reported, nothing launched, even
	// though on-demand capacity is unlimited.
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Equal(t, "ReservationCapacityExceeded", *out.Errors[0].ErrorCode)
	// A type the reservation is not for cannot target it.
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("c5.large"))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Equal(t, "InvalidParameterValue", *out.Errors[0].ErrorCode)

	// Terminating an instance gives its capacity back.
	_, err = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: e.launched[:1]})
	require.NoError(t, err)
	require.Equal(t, int32(1), *describeReservation(t, e.ec2, cr.ID).AvailableInstanceCount)

	// An expired reservation takes no launches and drops out of state=active;
	// the instance still running in it goes on as plain on-demand capacity,
	// no longer reporting the reservation.
	require.NoError(t, local.SetCapacityReservationState(cr.ID, awslocal.ReservationStateExpired))
	desc, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: e.launched[1:2]})
	require.NoError(t, err)
	require.Nil(t, desc.Reservations[0].Instances[0].CapacityReservationId)
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	active, err := e.ec2.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{
		{Name: aws.String("state"), Values: []string{"active"}}}})
	require.NoError(t, err)
	require.NotContains(t, reservationIDs(active.CapacityReservations), cr.ID)

	_, err = e.ec2.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0000000000000000a"}})
	require.Equal(t, "InvalidCapacityReservationId.NotFound", apiCode(t, err))
	_, err = e.ec2.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("bogus"), Values: []string{"x"}}}})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
}

func reservationIDs(rs []ec2types.CapacityReservation) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, *r.CapacityReservationId)
	}
	return ids
}

func TestCapacityBlockReservation(t *testing.T) {
	end := time.Now().Add(6 * time.Hour).UTC().Truncate(time.Second)
	cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1,
		ReservationType: awslocal.ReservationTypeCapacityBlock, EndDate: &end})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
	e := newFleetEnv(t, targeting(cr.ID), func(d *ec2types.RequestLaunchTemplateData) {
		d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	})
	got := describeReservation(t, e.ec2, cr.ID)
	require.Equal(t, ec2types.CapacityReservationTypeCapacityBlock, got.ReservationType)
	require.Equal(t, ec2types.EndDateTypeLimited, got.EndDateType)
	require.True(t, end.Equal(*got.EndDate), "%s != %s", end, got.EndDate)

	interruptible, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1, Interruptible: true})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(interruptible.ID) })
	require.True(t, aws.ToBool(describeReservation(t, e.ec2, interruptible.ID).Interruptible))

	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeCapacityBlock, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Len(t, instanceIDs(out), 1)
	desc, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: instanceIDs(out)})
	require.NoError(t, err)
	require.Equal(t, ec2types.InstanceLifecycleTypeCapacityBlock, desc.Reservations[0].Instances[0].InstanceLifecycle)
	require.Zero(t, *describeReservation(t, e.ec2, cr.ID).AvailableInstanceCount)
}

// TestReservationMarketMustMatch: EC2 launches into a capacity block only
// with the capacity-block market type in the template and capacity-block
// as the fleet's target capacity type; an ordinary reservation takes
// on-demand launches; either mismatch is an error per override and
// launches nothing.
func TestReservationMarketMustMatch(t *testing.T) {
	block, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 5,
		ReservationType: awslocal.ReservationTypeCapacityBlock})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(block.ID) })
	odcr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 5})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(odcr.ID) })
	blockMarket := func(d *ec2types.RequestLaunchTemplateData) {
		d.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
	cases := []struct {
		name     string
		opts     []envOption
		fleet    ec2types.DefaultTargetCapacityType
		wantCode string // "" launches
	}{
		{"capacity block with its market and fleet type", []envOption{targeting(block.ID), blockMarket}, ec2types.DefaultTargetCapacityTypeCapacityBlock, ""},
		{"capacity block without the market type", []envOption{targeting(block.ID)}, ec2types.DefaultTargetCapacityTypeCapacityBlock, "InvalidParameterCombination"},
		{"capacity block from an on-demand fleet", []envOption{targeting(block.ID), blockMarket}, ec2types.DefaultTargetCapacityTypeOnDemand, "InvalidParameterCombination"},
		{"ordinary reservation from an on-demand fleet", []envOption{targeting(odcr.ID)}, ec2types.DefaultTargetCapacityTypeOnDemand, ""},
		{"ordinary reservation from a spot fleet", []envOption{targeting(odcr.ID)}, ec2types.DefaultTargetCapacityTypeSpot, "InvalidParameterCombination"},
		{"ordinary reservation from a capacity-block fleet", []envOption{targeting(odcr.ID)}, ec2types.DefaultTargetCapacityTypeCapacityBlock, "InvalidParameterCombination"},
		{"capacity-block fleet without a reservation", nil, ec2types.DefaultTargetCapacityTypeCapacityBlock, "InvalidParameterCombination"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newFleetEnv(t, tc.opts...)
			out, err := e.fleet(t, tc.fleet, e.overrides("m5.large"))
			require.NoError(t, err)
			if tc.wantCode == "" {
				require.Empty(t, out.Errors)
				require.Len(t, instanceIDs(out), 1)
				return
			}
			require.Empty(t, out.Instances)
			require.NotEmpty(t, out.Errors)
			require.Equal(t, tc.wantCode, aws.ToString(out.Errors[0].ErrorCode))
		})
	}
}

func TestInstanceStatusImpairmentsAndEvents(t *testing.T) {
	ctx := context.Background()
	client := ec2Client(t)
	img, _ := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	run, err := client.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(img.ID), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	require.NoError(t, err)
	id := *run.Instances[0].InstanceId
	t.Cleanup(func() { local.ClearInstanceStatus("") })

	status := func(in *ec2.DescribeInstanceStatusInput) []ec2types.InstanceStatus {
		t.Helper()
		out, err := client.DescribeInstanceStatus(ctx, in)
		require.NoError(t, err)
		return out.InstanceStatuses
	}
	got := status(&ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}})
	require.Len(t, got, 1)
	require.Equal(t, ec2types.SummaryStatusOk, got[0].InstanceStatus.Status)
	require.Equal(t, ec2types.SummaryStatusOk, got[0].SystemStatus.Status)
	require.Equal(t, ec2types.StatusTypePassed, got[0].SystemStatus.Details[0].Status)
	require.Equal(t, ec2types.InstanceStateNameRunning, got[0].InstanceState.Name)
	require.Empty(t, got[0].Events)

	require.NoError(t, local.SetInstanceStatus(id, "", awslocal.StatusImpaired))
	ev, err := local.AddInstanceEvent(id, awslocal.InstanceEvent{Code: "instance-retirement"})
	require.NoError(t, err)
	got = status(&ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}})
	require.Equal(t, ec2types.SummaryStatusOk, got[0].InstanceStatus.Status)
	require.Equal(t, ec2types.SummaryStatusImpaired, got[0].SystemStatus.Status)
	require.Equal(t, ec2types.StatusTypeFailed, got[0].SystemStatus.Details[0].Status)
	require.NotNil(t, got[0].SystemStatus.Details[0].ImpairedSince)
	require.Len(t, got[0].Events, 1)
	require.Equal(t, ec2types.EventCodeInstanceRetirement, got[0].Events[0].Code)
	require.Equal(t, ev.ID, *got[0].Events[0].InstanceEventId)
	require.True(t, got[0].Events[0].NotBefore.After(time.Now()))

	// The filters a health check uses select it.
	impaired := status(&ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("system-status.status"), Values: []string{"impaired"}}}})
	require.Len(t, impaired, 1)
	require.Equal(t, id, *impaired[0].InstanceId)
	retiring := status(&ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{{Name: aws.String("event.code"), Values: []string{"instance-retirement"}}}})
	require.Len(t, retiring, 1)

	// Paged through the SDK paginator.
	n := 0
	for p := ec2.NewDescribeInstanceStatusPaginator(client, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(5), IncludeAllInstances: aws.Bool(true)}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.InstanceStatuses), 5)
		n += len(page.InstanceStatuses)
	}
	require.GreaterOrEqual(t, n, 1)

	_, err = client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	require.Empty(t, status(&ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}}), "only running instances by default")
	all := status(&ec2.DescribeInstanceStatusInput{InstanceIds: []string{id}, IncludeAllInstances: aws.Bool(true)})
	require.Len(t, all, 1)
	require.Equal(t, ec2types.SummaryStatusNotApplicable, all[0].InstanceStatus.Status)

	require.Error(t, local.SetInstanceStatus(id, "broken", ""))
	_, err = local.AddInstanceEvent(id, awslocal.InstanceEvent{Code: "reboot-now"})
	require.Error(t, err)
}
