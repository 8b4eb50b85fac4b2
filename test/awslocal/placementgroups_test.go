package awslocal_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func createGroup(t *testing.T, c *ec2.Client, in *ec2.CreatePlacementGroupInput) ec2types.PlacementGroup {
	t.Helper()
	ctx := context.Background()
	out, err := c.CreatePlacementGroup(ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: in.GroupName}) })
	return *out.PlacementGroup
}

// TestPlacementGroups creates the three kinds of group through the SDK and
// reads them back by name, id and filter, with EC2's errors for unknown,
// malformed and duplicate groups and for invalid strategies.
func TestPlacementGroups(t *testing.T) {
	ctx := context.Background()
	c := ec2Client(t)
	suffix := uuid.NewString()[:8]
	cluster := createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String("hpc-" + suffix), Strategy: ec2types.PlacementStrategyCluster,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypePlacementGroup,
			Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("ml-" + suffix)}}}}})
	require.Regexp(t, regexp.MustCompile(`^pg-[0-9a-f]{17}$`), aws.ToString(cluster.GroupId))
	require.Equal(t, "hpc-"+suffix, aws.ToString(cluster.GroupName))
	require.Equal(t, ec2types.PlacementStrategyCluster, cluster.Strategy)
	require.Equal(t, ec2types.PlacementGroupStateAvailable, cluster.State)
	require.Equal(t, "arn:aws:ec2:us-east-1:123456789012:placement-group/hpc-"+suffix, aws.ToString(cluster.GroupArn))
	require.Nil(t, cluster.PartitionCount)
	require.Empty(t, cluster.SpreadLevel)
	require.Len(t, cluster.Tags, 1)

	partition := createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String("kafka-" + suffix), Strategy: ec2types.PlacementStrategyPartition,
		PartitionCount: aws.Int32(7)})
	require.Equal(t, int32(7), aws.ToInt32(partition.PartitionCount))
	spread := createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String("critical-" + suffix), Strategy: ec2types.PlacementStrategySpread})
	require.Equal(t, ec2types.SpreadLevelRack, spread.SpreadLevel)

	// By name, by id, by filter.
	byName, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"kafka-" + suffix}})
	require.NoError(t, err)
	require.Len(t, byName.PlacementGroups, 1)
	require.Equal(t, partition.GroupId, byName.PlacementGroups[0].GroupId)
	require.Equal(t, int32(7), aws.ToInt32(byName.PlacementGroups[0].PartitionCount))
	byID, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupIds: []string{*cluster.GroupId, *spread.GroupId}})
	require.NoError(t, err)
	require.Len(t, byID.PlacementGroups, 2)
	byTag, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:team"), Values: []string{"ml-" + suffix}}, {Name: aws.String("strategy"), Values: []string{"cluster"}}}})
	require.NoError(t, err)
	require.Len(t, byTag.PlacementGroups, 1)
	require.Equal(t, cluster.GroupId, byTag.PlacementGroups[0].GroupId)
	require.Equal(t, "ml-"+suffix, aws.ToString(byTag.PlacementGroups[0].Tags[0].Value))
	bySpread, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
		{Name: aws.String("spread-level"), Values: []string{"rack"}}, {Name: aws.String("group-name"), Values: []string{"critical-" + suffix, "hpc-" + suffix}}}})
	require.NoError(t, err)
	require.Len(t, bySpread.PlacementGroups, 1)
	require.Equal(t, spread.GroupId, bySpread.PlacementGroups[0].GroupId)
	// Groups are regional.
	other, err := ec2.NewFromConfig(local.ConfigFor(ctx, "eu-west-1")).DescribePlacementGroups(ctx,
		&ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"hpc-" + suffix}}}})
	require.NoError(t, err)
	require.Empty(t, other.PlacementGroups)

	// EC2's errors.
	for _, tc := range []struct {
		name string
		call func() error
		code string
	}{
		{"unknown name", func() error {
			_, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"missing-" + suffix}})
			return err
		}, "InvalidPlacementGroup.Unknown"},
		{"unknown id", func() error {
			_, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupIds: []string{"pg-0123456789abcdef0"}})
			return err
		}, "InvalidPlacementGroupId.NotFound"},
		{"malformed id", func() error {
			_, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupIds: []string{"pg-nope"}})
			return err
		}, "InvalidPlacementGroupId.Malformed"},
		{"unknown filter", func() error {
			_, err := c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("colour"), Values: []string{"x"}}}})
			return err
		}, "InvalidParameterValue"},
		{"duplicate name", func() error {
			_, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("hpc-" + suffix), Strategy: ec2types.PlacementStrategySpread})
			return err
		}, "InvalidPlacementGroup.Duplicate"},
		{"eight partitions", func() error {
			_, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("p8-" + suffix), Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(8)})
			return err
		}, "InvalidParameterValue"},
		{"partitions on a cluster group", func() error {
			_, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("cp-" + suffix), Strategy: ec2types.PlacementStrategyCluster, PartitionCount: aws.Int32(2)})
			return err
		}, "InvalidParameterCombination"},
		{"host spread outside an Outpost", func() error {
			_, err := c.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("sh-" + suffix), Strategy: ec2types.PlacementStrategySpread, SpreadLevel: ec2types.SpreadLevelHost})
			return err
		}, "InvalidParameterValue"},
		{"delete unknown", func() error {
			_, err := c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("missing-" + suffix)})
			return err
		}, "InvalidPlacementGroup.Unknown"},
	} {
		require.Equal(t, tc.code, errCode(tc.call()), tc.name)
	}

	// Deleted, the name is unknown and free again.
	_, err = c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("critical-" + suffix)})
	require.NoError(t, err)
	_, err = c.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupIds: []string{*spread.GroupId}})
	require.Equal(t, "InvalidPlacementGroupId.NotFound", errCode(err))
	again := createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String("critical-" + suffix), Strategy: ec2types.PlacementStrategyCluster})
	require.NotEqual(t, spread.GroupId, again.GroupId)
	got, ok := local.PlacementGroupByName("us-east-1", "critical-"+suffix)
	require.True(t, ok)
	require.Equal(t, aws.ToString(again.GroupId), got.ID)
}

// TestPlacementGroupsIAM authorizes the placement-group calls: the shipped
// controller policy allows DescribePlacementGroups in the cluster's region
// only; CreatePlacementGroup is authorized on the group's ARN (by name)
// with its tags as request tags, DeletePlacementGroup with the group's own
// tags.
func TestPlacementGroupsIAM(t *testing.T) {
	ctx := context.Background()
	suffix := uuid.NewString()[:8]
	b, err := os.ReadFile("../../docs/iam/cloudformation.yaml")
	require.NoError(t, err)
	shipped, err := awslocal.CloudFormationPolicies(b, awslocal.PolicyVars{ClusterName: "pg-" + suffix})
	require.NoError(t, err)
	name := "pg-controller-" + suffix
	creds, err := local.AddPrincipal(awslocal.Principal{Name: name, Policies: shipped})
	require.NoError(t, err)
	admin := ec2Client(t)
	g := createGroup(t, admin, &ec2.CreatePlacementGroupInput{GroupName: aws.String("iam-" + suffix), Strategy: ec2types.PlacementStrategyCluster})

	ctl := ec2.NewFromConfig(local.ConfigWith(ctx, "us-east-1", creds), noRetry)
	out, err := ctl.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{GroupNames: []string{"iam-" + suffix}})
	require.NoError(t, err)
	require.Equal(t, g.GroupId, out.PlacementGroups[0].GroupId)
	_, err = ec2.NewFromConfig(local.ConfigWith(ctx, "eu-west-1", creds), noRetry).DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "reads only in the cluster's region: %v", err)
	// The controller never manages groups.
	_, err = ctl.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("ctl-" + suffix), Strategy: ec2types.PlacementStrategyCluster})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "%v", err)
	require.ErrorContains(t, err, "ec2:CreatePlacementGroup on resource: arn:aws:ec2:us-east-1:123456789012:placement-group/ctl-"+suffix)
	_, err = ctl.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("iam-" + suffix)})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "%v", err)

	// A principal allowed to create groups only with a team tag, and to
	// delete only its team's.
	team, err := awslocal.ParsePolicy("team", []byte(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["ec2:CreatePlacementGroup","ec2:CreateTags"],"Resource":"arn:aws:ec2:*:*:placement-group/*",
		 "Condition":{"StringEquals":{"aws:RequestTag/team":"ml"}}},
		{"Effect":"Allow","Action":"ec2:DeletePlacementGroup","Resource":"arn:aws:ec2:*:*:placement-group/*",
		 "Condition":{"StringEquals":{"ec2:ResourceTag/team":"ml"}}}]}`))
	require.NoError(t, err)
	teamCreds, err := local.AddPrincipal(awslocal.Principal{Name: "pg-team-" + suffix, Policies: []awslocal.Policy{team}})
	require.NoError(t, err)
	tc := ec2.NewFromConfig(local.ConfigWith(ctx, "us-east-1", teamCreds), noRetry)
	_, err = tc.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String("untagged-" + suffix), Strategy: ec2types.PlacementStrategyCluster})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "%v", err)
	tagged := createGroup(t, tc, &ec2.CreatePlacementGroupInput{GroupName: aws.String("ml-" + suffix), Strategy: ec2types.PlacementStrategyCluster,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypePlacementGroup,
			Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("ml")}}}}})
	require.NotEmpty(t, aws.ToString(tagged.GroupId))
	_, err = tc.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("iam-" + suffix)})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "not the team's group: %v", err)
	_, err = tc.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("ml-" + suffix)})
	require.NoError(t, err)

	needed := map[string]bool{}
	for _, e := range local.AuthorizationLog(name) {
		needed[e.Request.Action+" "+e.Request.Resource] = true
	}
	require.True(t, needed["ec2:DescribePlacementGroups *"], "%v", needed)
}

func inGroup(p ec2types.LaunchTemplatePlacementRequest) envOption {
	return func(d *ec2types.RequestLaunchTemplateData) { d.Placement = &p }
}

// TestCreateFleetIntoPlacementGroup launches through CreateFleet from
// templates naming a placement group: EC2 spreads a partition group's
// instances over its partitions unless the template names one, and
// DescribeInstances reports the group and partition; a group EC2 does not
// know fails the pool, and a group with instances cannot be deleted.
func TestCreateFleetIntoPlacementGroup(t *testing.T) {
	ctx := context.Background()
	c := ec2Client(t)
	suffix := uuid.NewString()[:8]
	g := createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String("kafka-" + suffix), Strategy: ec2types.PlacementStrategyPartition,
		PartitionCount: aws.Int32(2)})
	placement := func(id string) *ec2types.Placement {
		t.Helper()
		out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		require.NoError(t, err)
		return out.Reservations[0].Instances[0].Placement
	}

	byName := newFleetEnv(t, inGroup(ec2types.LaunchTemplatePlacementRequest{GroupName: aws.String("kafka-" + suffix)}))
	var partitions []int32
	for range 3 {
		out, err := byName.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, byName.overrides("m5.large"))
		require.NoError(t, err)
		require.Empty(t, out.Errors)
		ids := instanceIDs(out)
		require.Len(t, ids, 1)
		p := placement(ids[0])
		require.Equal(t, "kafka-"+suffix, aws.ToString(p.GroupName))
		require.Equal(t, aws.ToString(g.GroupId), aws.ToString(p.GroupId))
		partitions = append(partitions, aws.ToInt32(p.PartitionNumber))
	}
	require.Equal(t, []int32{1, 2, 1}, partitions, "spread evenly over the partitions")

	byID := newFleetEnv(t, inGroup(ec2types.LaunchTemplatePlacementRequest{GroupId: g.GroupId, PartitionNumber: aws.Int32(2)}))
	out, err := byID.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, byID.overrides("m5.large"))
	require.NoError(t, err)
	require.Len(t, instanceIDs(out), 1)
	p := placement(instanceIDs(out)[0])
	require.Equal(t, int32(2), aws.ToInt32(p.PartitionNumber))
	require.Equal(t, "kafka-"+suffix, aws.ToString(p.GroupName))

	_, err = c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String("kafka-" + suffix)})
	require.Equal(t, "InvalidPlacementGroup.InUse", errCode(err), "%v", err)

	unknown := newFleetEnv(t, inGroup(ec2types.LaunchTemplatePlacementRequest{GroupName: aws.String("missing-" + suffix)}))
	out, err = unknown.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, unknown.overrides("m5.large"))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Equal(t, "InvalidPlacementGroup.Unknown", aws.ToString(out.Errors[0].ErrorCode))
}

// TestPlacementGroupZoneRules: EC2 keeps a cluster group in the zone of
// its first instance (a launch into another zone is
// InvalidPlacementGroup.InUse) and a rack spread group at seven running
// instances per zone (the eighth is refused in that zone, and goes to
// another one when the fleet offers it); a terminated instance frees its
// place.
func TestPlacementGroupZoneRules(t *testing.T) {
	c := ec2Client(t)
	suffix := uuid.NewString()[:8]
	inZone := func(typ string, zones ...string) []ec2types.FleetLaunchTemplateOverridesRequest {
		var out []ec2types.FleetLaunchTemplateOverridesRequest
		for _, z := range zones {
			out = append(out, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(typ), AvailabilityZone: aws.String(z)})
		}
		return out
	}
	zoneOf := func(id string) string {
		t.Helper()
		out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		require.NoError(t, err)
		return aws.ToString(out.Reservations[0].Instances[0].Placement.AvailabilityZone)
	}
	type launch struct {
		zones     []string
		total     int32
		wantZones []string // zones of the launched instances, in order
		wantError string   // the fleet error's code ("" for none)
	}
	for _, tc := range []struct {
		name     string
		strategy ec2types.PlacementStrategy
		launches []launch
	}{
		{name: "cluster", strategy: ec2types.PlacementStrategyCluster, launches: []launch{
			{zones: []string{"us-east-1b"}, total: 1, wantZones: []string{"us-east-1b"}},
			{zones: []string{"us-east-1a"}, total: 1, wantError: "InvalidPlacementGroup.InUse"},
			{zones: []string{"us-east-1a", "us-east-1b"}, total: 2, wantZones: []string{"us-east-1b", "us-east-1b"}, wantError: "InvalidPlacementGroup.InUse"},
		}},
		{name: "spread", strategy: ec2types.PlacementStrategySpread, launches: []launch{
			{zones: []string{"us-east-1a"}, total: 6, wantZones: []string{"us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a"}},
			{zones: []string{"us-east-1a"}, total: 2, wantZones: []string{"us-east-1a"}, wantError: "InsufficientInstanceCapacity"},
			{zones: []string{"us-east-1a"}, total: 1, wantError: "InsufficientInstanceCapacity"},
			{zones: []string{"us-east-1a", "us-east-1c"}, total: 1, wantZones: []string{"us-east-1c"}, wantError: "InsufficientInstanceCapacity"},
		}},
		{name: "partition groups take any zone", strategy: ec2types.PlacementStrategyPartition, launches: []launch{
			{zones: []string{"us-east-1a"}, total: 8, wantZones: []string{"us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a", "us-east-1a"}},
			{zones: []string{"us-east-1b"}, total: 1, wantZones: []string{"us-east-1b"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := string(tc.strategy) + "-" + suffix
			createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String(name), Strategy: tc.strategy})
			env := newFleetEnv(t, inGroup(ec2types.LaunchTemplatePlacementRequest{GroupName: aws.String(name)}))
			for i, l := range tc.launches {
				out, err := env.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, inZone("m5.large", l.zones...), func(in *ec2.CreateFleetInput) {
					in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(l.total)
				})
				require.NoError(t, err)
				var zones []string
				for _, id := range instanceIDs(out) {
					zones = append(zones, zoneOf(id))
				}
				require.Equal(t, l.wantZones, zones, "launch %d", i)
				if l.wantError == "" {
					require.Empty(t, out.Errors, "launch %d", i)
					continue
				}
				require.NotEmpty(t, out.Errors, "launch %d", i)
				require.Equal(t, l.wantError, aws.ToString(out.Errors[0].ErrorCode), "launch %d: %s", i, aws.ToString(out.Errors[0].ErrorMessage))
				require.Contains(t, aws.ToString(out.Errors[0].ErrorMessage), name)
			}
		})
	}

	// A terminated instance frees its place: the spread group's zone takes
	// one more.
	name := "spread-free-" + suffix
	createGroup(t, c, &ec2.CreatePlacementGroupInput{GroupName: aws.String(name), Strategy: ec2types.PlacementStrategySpread})
	env := newFleetEnv(t, inGroup(ec2types.LaunchTemplatePlacementRequest{GroupName: aws.String(name)}))
	out, err := env.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, inZone("m5.large", "us-east-1a"), func(in *ec2.CreateFleetInput) {
		in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(7)
	})
	require.NoError(t, err)
	ids := instanceIDs(out)
	require.Len(t, ids, 7)
	_, err = c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	require.NoError(t, err)
	out, err = env.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, inZone("m5.large", "us-east-1a"))
	require.NoError(t, err)
	require.Len(t, instanceIDs(out), 1, "%v", out.Errors)
}
