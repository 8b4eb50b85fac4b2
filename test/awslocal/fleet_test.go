package awslocal_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// fleetEnv is a launch template with an instance profile, a security
// group, metadata options and block devices, as the provider builds them.
type fleetEnv struct {
	ec2       *ec2.Client
	tag       string // unique value of the "test" tag on every instance
	image     awslocal.Image
	subnetA   ec2types.Subnet
	sg        string
	profile   string
	ltID      string
	ltName    string
	launched  []string
	mu        sync.Mutex // launched, appended by concurrent fleets
	userData  string
	reservedT string
}

type envOption func(*ec2types.RequestLaunchTemplateData)

func newFleetEnv(t testing.TB, opts ...envOption) *fleetEnv {
	t.Helper()
	ctx := context.Background()
	e := &fleetEnv{ec2: ec2Client(t), tag: uuid.NewString()[:8]}
	var ok bool
	e.image, ok = local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	subnets, err := e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	require.NotEmpty(t, subnets.Subnets)
	e.subnetA = subnets.Subnets[0]
	sg, err := e.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes-" + e.tag), Description: aws.String("nodes")})
	require.NoError(t, err)
	e.sg = *sg.GroupId
	e.profile = "KarpenterNodeInstanceProfile-" + e.tag
	_, err = iam.NewFromConfig(local.Config(ctx)).CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: &e.profile})
	require.NoError(t, err)
	e.userData = base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\necho hello\n"))
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(e.image.ID),
		UserData:           aws.String(e.userData),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: &e.profile},
		SecurityGroupIds:   []string{e.sg},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired,
			HttpPutResponseHopLimit: aws.Int32(1), HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled},
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(80), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}},
	}
	for _, o := range opts {
		o(data)
	}
	e.ltName = "karpenter.k8s.aws/" + e.tag
	lt, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &e.ltName, LaunchTemplateData: data})
	require.NoError(t, err)
	e.ltID = *lt.LaunchTemplate.LaunchTemplateId
	t.Cleanup(func() {
		local.ClearCapacity()
		local.ClearFaults("", "")
		if len(e.launched) > 0 {
			_, _ = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: e.launched})
		}
	})
	return e
}

func (e *fleetEnv) overrides(types ...string) []ec2types.FleetLaunchTemplateOverridesRequest {
	var out []ec2types.FleetLaunchTemplateOverridesRequest
	for _, t := range types {
		out = append(out, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(t), SubnetId: e.subnetA.SubnetId})
	}
	return out
}

// fleet sends an instant CreateFleet the way the provider does and
// remembers the instances for cleanup.
func (e *fleetEnv) fleet(t testing.TB, capacityType ec2types.DefaultTargetCapacityType, overrides []ec2types.FleetLaunchTemplateOverridesRequest, mod ...func(*ec2.CreateFleetInput)) (*ec2.CreateFleetOutput, error) {
	t.Helper()
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: &e.ltName, Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{DefaultTargetCapacityType: capacityType, TotalTargetCapacity: aws.Int32(1)},
		OnDemandOptions:             &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		SpotOptions:                 &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("test"), Value: &e.tag}, {Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}}},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: []ec2types.Tag{{Key: aws.String("test"), Value: &e.tag}}},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: []ec2types.Tag{{Key: aws.String("test"), Value: &e.tag}}},
		},
	}
	for _, m := range mod {
		m(in)
	}
	out, err := e.ec2.CreateFleet(context.Background(), in)
	if err == nil {
		e.mu.Lock()
		for _, inst := range out.Instances {
			e.launched = append(e.launched, inst.InstanceIds...)
		}
		e.mu.Unlock()
	}
	return out, err
}

// tagged are the instances of this test that are not terminated.
func (e *fleetEnv) tagged(t testing.TB) []ec2types.Instance {
	t.Helper()
	out, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:test"), Values: []string{e.tag}}, {Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}})
	require.NoError(t, err)
	var insts []ec2types.Instance
	for _, r := range out.Reservations {
		insts = append(insts, r.Instances...)
	}
	return insts
}

func instanceIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, i.InstanceIds...)
	}
	return ids
}

// byPrice sorts types by the price the front serves for the capacity type
// in us-east-1a.
func byPrice(t *testing.T, capacityType string, types ...string) []string {
	t.Helper()
	price := func(it string) float64 {
		if capacityType == "spot" {
			p, ok := local.SpotPrice("us-east-1", "us-east-1a", it)
			require.True(t, ok)
			return p
		}
		p, ok := local.OnDemandPrice(it, "us-east-1")
		require.True(t, ok)
		return p
	}
	out := append([]string(nil), types...)
	sort.Slice(out, func(i, j int) bool { return price(out[i]) < price(out[j]) })
	require.Less(t, price(out[0]), price(out[1]), "the test needs distinct prices")
	return out
}

func TestCreateFleetLowestPriceLaunchesTheCheapestWithTheTemplatesAttributes(t *testing.T) {
	e := newFleetEnv(t)
	types := []string{"m5.xlarge", "c5.large", "m5.large", "t3.medium"}
	want := byPrice(t, "on-demand", types...)[0]
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides(types...))
	require.NoError(t, err)
	require.Empty(t, out.Errors)
	require.Len(t, out.Instances, 1)
	got := out.Instances[0]
	require.Equal(t, want, string(got.InstanceType))
	require.Equal(t, ec2types.InstanceLifecycleOnDemand, got.Lifecycle)
	require.Len(t, got.InstanceIds, 1)
	require.Equal(t, want, string(got.LaunchTemplateAndOverrides.Overrides.InstanceType))
	require.Equal(t, e.ltName, *got.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName)
	require.True(t, strings.HasPrefix(*out.FleetId, "fleet-"))

	// DescribeInstances reports what the launch template set.
	desc, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: got.InstanceIds})
	require.NoError(t, err)
	inst := desc.Reservations[0].Instances[0]
	require.Equal(t, want, string(inst.InstanceType))
	require.Equal(t, e.image.ID, *inst.ImageId)
	require.Equal(t, *e.subnetA.SubnetId, *inst.SubnetId)
	require.Equal(t, "us-east-1a", *inst.Placement.AvailabilityZone)
	require.NotNil(t, inst.IamInstanceProfile)
	require.True(t, strings.HasSuffix(*inst.IamInstanceProfile.Arn, "instance-profile/"+e.profile), *inst.IamInstanceProfile.Arn)
	require.Len(t, inst.SecurityGroups, 1)
	require.Equal(t, e.sg, *inst.SecurityGroups[0].GroupId)
	require.Equal(t, ec2types.HttpTokensStateRequired, inst.MetadataOptions.HttpTokens)
	require.Equal(t, int32(1), *inst.MetadataOptions.HttpPutResponseHopLimit)
	var devices []string
	for _, bd := range inst.BlockDeviceMappings {
		devices = append(devices, *bd.DeviceName)
	}
	require.Equal(t, []string{"/dev/xvda"}, devices)
	require.Equal(t, ec2types.CapacityReservationPreferenceOpen, inst.CapacityReservationSpecification.CapacityReservationPreference)
	require.Empty(t, inst.InstanceLifecycle, "on-demand instances have no lifecycle")
	tags := map[string]string{}
	for _, tg := range inst.Tags {
		tags[*tg.Key] = *tg.Value
	}
	require.Equal(t, e.tag, tags["test"])
	require.Equal(t, "default", tags["karpenter.sh/nodepool"])
	require.Equal(t, *out.FleetId, tags["aws:ec2:fleet-id"])
	vol, err := e.ec2.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{VolumeIds: []string{*inst.BlockDeviceMappings[0].Ebs.VolumeId}})
	require.NoError(t, err)
	require.Equal(t, int32(80), *vol.Volumes[0].Size)
	require.Equal(t, ec2types.VolumeTypeGp3, vol.Volumes[0].VolumeType)
	ud, err := e.ec2.DescribeInstanceAttribute(context.Background(), &ec2.DescribeInstanceAttributeInput{InstanceId: inst.InstanceId, Attribute: ec2types.InstanceAttributeNameUserData})
	require.NoError(t, err)
	require.Equal(t, e.userData, *ud.UserData.Value)
}

func TestCreateFleetPriceCapacityOptimizedSkipsAPoolWithoutCapacity(t *testing.T) {
	e := newFleetEnv(t)
	order := byPrice(t, "spot", "m5.large", "c5.large", "m5.xlarge")
	require.NoError(t, local.SetCapacity(order[0], "us-east-1a", awslocal.CapacityTypeSpot, 0))
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeSpot, e.overrides(order[2], order[0], order[1]))
	require.NoError(t, err)
	require.Len(t, out.Instances, 1)
	require.Equal(t, order[1], string(out.Instances[0].InstanceType))
	require.Equal(t, ec2types.InstanceLifecycleSpot, out.Instances[0].Lifecycle)
	require.Len(t, out.Errors, 1)
	fe := out.Errors[0]
	require.Equal(t, "InsufficientInstanceCapacity", *fe.ErrorCode)
	require.Equal(t, order[0], string(fe.LaunchTemplateAndOverrides.Overrides.InstanceType))
	require.Equal(t, *e.subnetA.SubnetId, *fe.LaunchTemplateAndOverrides.Overrides.SubnetId)
	require.Equal(t, ec2types.InstanceLifecycleSpot, fe.Lifecycle)

	desc, err := e.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: instanceIDs(out)})
	require.NoError(t, err)
	require.Equal(t, ec2types.InstanceLifecycleTypeSpot, desc.Reservations[0].Instances[0].InstanceLifecycle)
}

func TestCreateFleetWithoutAnyCapacityAnswersOnlyErrors(t *testing.T) {
	e := newFleetEnv(t)
	types := []string{"m5.large", "c5.large", "m5.xlarge"}
	for _, it := range types {
		require.NoError(t, local.SetCapacity(it, "us-east-1a", awslocal.CapacityTypeOnDemand, 0))
	}
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides(types...))
	require.NoError(t, err, "an instant fleet reports capacity errors in Errors, not as a failed call")
	require.Empty(t, out.Instances)
	require.Len(t, out.Errors, len(types))
	var seen []string
	for _, fe := range out.Errors {
		require.Equal(t, "InsufficientInstanceCapacity", *fe.ErrorCode)
		require.Contains(t, *fe.ErrorMessage, "us-east-1a")
		seen = append(seen, string(fe.LaunchTemplateAndOverrides.Overrides.InstanceType))
	}
	require.ElementsMatch(t, types, seen)
	require.Empty(t, e.tagged(t), "nothing was launched")
}

func TestCreateFleetCapacityCountsDown(t *testing.T) {
	e := newFleetEnv(t)
	require.NoError(t, local.SetCapacity("m5.large", "us-east-1a", awslocal.CapacityTypeOnDemand, 1))
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Len(t, instanceIDs(out), 1)
	n, limited := local.Capacity("m5.large", "us-east-1a", awslocal.CapacityTypeOnDemand)
	require.True(t, limited)
	require.Zero(t, n)
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Equal(t, "InsufficientInstanceCapacity", *out.Errors[0].ErrorCode)
	// Spot is another pool: still unlimited.
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeSpot, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Len(t, instanceIDs(out), 1)
	require.Len(t, e.tagged(t), 2)
}

func TestCreateFleetPrioritizedHonoursPriority(t *testing.T) {
	e := newFleetEnv(t)
	ov := e.overrides("m5.large", "m5.xlarge", "c5.large")
	ov[0].Priority, ov[1].Priority, ov[2].Priority = aws.Float64(2), aws.Float64(0), aws.Float64(1)
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, ov, func(in *ec2.CreateFleetInput) {
		in.OnDemandOptions.AllocationStrategy = ec2types.FleetOnDemandAllocationStrategyPrioritized
	})
	require.NoError(t, err)
	require.Equal(t, "m5.xlarge", string(out.Instances[0].InstanceType), "priority 0 wins over a lower price")
	require.Equal(t, float64(0), *out.Instances[0].LaunchTemplateAndOverrides.Overrides.Priority)

	// Without capacity at priority 0, priority 1 launches and the skipped
	// pool is reported.
	require.NoError(t, local.SetCapacity("m5.xlarge", "us-east-1a", awslocal.CapacityTypeOnDemand, 0))
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, ov, func(in *ec2.CreateFleetInput) {
		in.OnDemandOptions.AllocationStrategy = ec2types.FleetOnDemandAllocationStrategyPrioritized
	})
	require.NoError(t, err)
	require.Equal(t, "c5.large", string(out.Instances[0].InstanceType))
	require.Len(t, out.Errors, 1)
	require.Equal(t, "m5.xlarge", string(out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType))
}

func TestCreateFleetRefusesUnknownTypesAndArchitectureMismatches(t *testing.T) {
	e := newFleetEnv(t)
	_, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large", "m5.bogus"))
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	require.Contains(t, err.Error(), "m5.bogus")

	// An arm64 type against the x86_64 AMI of the template cannot launch.
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m6g.large"))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Len(t, out.Errors, 1)
	require.Equal(t, "InvalidParameterValue", *out.Errors[0].ErrorCode)
	require.Contains(t, *out.Errors[0].ErrorMessage, "architecture 'arm64' of the specified instance type does not match the architecture 'x86_64'")

	// Mixed with an x86_64 type, the cheaper arm64 pool is reported and
	// the x86_64 one launches.
	require.Less(t, mustPrice(t, "m6g.large"), mustPrice(t, "m5.large"))
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m6g.large", "m5.large"))
	require.NoError(t, err)
	require.Equal(t, "m5.large", string(out.Instances[0].InstanceType))
	require.Len(t, out.Errors, 1)
	require.Equal(t, "m6g.large", string(out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType))
	require.Len(t, e.tagged(t), 1)

	// A template that does not exist is an error of the fleet, per override.
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"), func(in *ec2.CreateFleetInput) {
		in.LaunchTemplateConfigs[0].LaunchTemplateSpecification = &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("missing-" + e.tag), Version: aws.String("$Latest")}
	})
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Len(t, out.Errors, 1)
	require.Contains(t, *out.Errors[0].ErrorCode, "InvalidLaunchTemplate")
}

func mustPrice(t *testing.T, it string) float64 {
	p, ok := local.OnDemandPrice(it, "us-east-1")
	require.True(t, ok)
	return p
}

func TestCreateFleetFaultsAndOtherFleetTypes(t *testing.T) {
	e := newFleetEnv(t)
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "CreateFleet", Kind: awslocal.FaultThrottle, Count: 1})
	require.NoError(t, err)
	before := local.Calls("ec2", "CreateFleet")
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Equal(t, 2, local.Calls("ec2", "CreateFleet")-before, "the throttle was retried")
	require.Len(t, instanceIDs(out), 1)
	require.Len(t, e.tagged(t), 1, "a throttled attempt launches nothing")

	// A throttle on every attempt fails the call and launches nothing.
	_, err = local.AddFault(awslocal.Fault{Service: "ec2", Action: "CreateFleet", Kind: awslocal.FaultThrottle})
	require.NoError(t, err)
	_, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.Equal(t, "RequestLimitExceeded", apiCode(t, err))
	local.ClearFaults("", "")
	require.Len(t, e.tagged(t), 1)

	// Several units spread over pools as capacity runs out.
	require.NoError(t, local.SetCapacity("c5.large", "us-east-1a", awslocal.CapacityTypeOnDemand, 2))
	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("c5.large", "m5.large"), func(in *ec2.CreateFleetInput) {
		in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(3)
	})
	require.NoError(t, err)
	got := map[string]int{}
	for _, i := range out.Instances {
		got[string(i.InstanceType)] += len(i.InstanceIds)
	}
	require.Equal(t, map[string]int{"c5.large": 2, "m5.large": 1}, got, fmt.Sprint(out.Errors))
}

// TestCreateFleetReportsASubnetWithoutAddresses: a subnet whose addresses
// are all taken cannot launch; EC2's instant fleet reports
// InsufficientFreeAddressesInSubnet for each of its overrides and launches
// from the other subnets.
func TestCreateFleetReportsASubnetWithoutAddresses(t *testing.T) {
	ctx := context.Background()
	e := newFleetEnv(t)
	tiny, err := local.NewSubnet(ctx, "us-east-1b", 28, map[string]string{"test": e.tag})
	require.NoError(t, err)
	require.Equal(t, int32(11), aws.ToInt32(tiny.AvailableIpAddressCount), "a /28 keeps 11 addresses, as in EC2")
	filled, err := local.ExhaustSubnet(ctx, aws.ToString(tiny.SubnetId), e.image.ID, "t3.micro", map[string]string{"test": e.tag})
	e.launched = append(e.launched, filled...)
	require.NoError(t, err)
	require.Len(t, filled, 11)
	subnets, err := e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{aws.ToString(tiny.SubnetId)}})
	require.NoError(t, err)
	require.Zero(t, aws.ToInt32(subnets.Subnets[0].AvailableIpAddressCount))

	in := func(subnet ec2types.Subnet, types ...string) []ec2types.FleetLaunchTemplateOverridesRequest {
		var out []ec2types.FleetLaunchTemplateOverridesRequest
		for _, it := range types {
			out = append(out, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(it), SubnetId: subnet.SubnetId})
		}
		return out
	}
	cases := []struct {
		name      string
		overrides []ec2types.FleetLaunchTemplateOverridesRequest
		// wantSubnet is where the instance launches, "" for none.
		wantSubnet string
		wantErrors []string // instance types reported out of addresses
	}{
		{
			name:       "only the full subnet",
			overrides:  in(tiny, "m5.large", "c5.large"),
			wantErrors: []string{"m5.large", "c5.large"},
		},
		{
			// Same type and price in both: the full subnet comes first,
			// is tried and reported, and the other one launches.
			name:       "the full subnet first, then one with addresses",
			overrides:  append(in(tiny, "m5.large"), in(e.subnetA, "m5.large")...),
			wantSubnet: aws.ToString(e.subnetA.SubnetId),
			wantErrors: []string{"m5.large"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, tc.overrides)
			require.NoError(t, err, "an instant fleet reports the subnet in Errors, not as a failed call")
			var got []string
			for _, fe := range out.Errors {
				require.Equal(t, "InsufficientFreeAddressesInSubnet", aws.ToString(fe.ErrorCode))
				require.Contains(t, aws.ToString(fe.ErrorMessage), aws.ToString(tiny.SubnetId))
				require.Equal(t, aws.ToString(tiny.SubnetId), aws.ToString(fe.LaunchTemplateAndOverrides.Overrides.SubnetId))
				got = append(got, string(fe.LaunchTemplateAndOverrides.Overrides.InstanceType))
			}
			require.ElementsMatch(t, tc.wantErrors, got)
			ids := instanceIDs(out)
			if tc.wantSubnet == "" {
				require.Empty(t, ids)
				return
			}
			require.Len(t, ids, 1)
			require.Equal(t, tc.wantSubnet, aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.SubnetId))
		})
	}
	require.Len(t, e.tagged(t), 12, "the 11 that filled the subnet and the one launched elsewhere")
}

// TestCreateFleetTakesTheNetworkInterfacesSecurityGroups: a template that
// names its security groups on a network interface (as upstream
// Karpenter's do) launches instances in them, as EC2 does.
func TestCreateFleetTakesTheNetworkInterfacesSecurityGroups(t *testing.T) {
	e := newFleetEnv(t, func(d *ec2types.RequestLaunchTemplateData) {
		d.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), Groups: d.SecurityGroupIds}}
		d.SecurityGroupIds = nil
	})
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	require.Empty(t, out.Errors)
	insts := e.tagged(t)
	require.Len(t, insts, 1)
	var groups []string
	for _, g := range insts[0].SecurityGroups {
		groups = append(groups, aws.ToString(g.GroupId))
	}
	require.Equal(t, []string{e.sg}, groups)
}

// TestCreateFleetDryRunLaunchesNothing: EC2 answers a dry run it would
// accept with DryRunOperation and launches nothing.
func TestCreateFleetDryRunLaunchesNothing(t *testing.T) {
	e := newFleetEnv(t)
	_, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"), func(in *ec2.CreateFleetInput) { in.DryRun = aws.Bool(true) })
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "DryRunOperation", apiErr.ErrorCode())
	require.Empty(t, e.tagged(t), "a dry run launches nothing")
}

// TestCreateFleetLaunchesALargeTargetAtOnce: a target of 40 on-demand
// instances from the cheapest of two unlimited pools launches all 40 from
// it, each tagged, each its own instance in DescribeInstances, reported as
// one group of 40 ids.
func TestCreateFleetLaunchesALargeTargetAtOnce(t *testing.T) {
	e := newFleetEnv(t)
	types := []string{"m5.large", "c5.large"}
	want := byPrice(t, "on-demand", types...)[0]
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides(types...), func(in *ec2.CreateFleetInput) {
		in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(40)
	})
	require.NoError(t, err)
	require.Empty(t, out.Errors)
	require.Len(t, out.Instances, 1)
	require.Equal(t, want, string(out.Instances[0].InstanceType))
	ids := instanceIDs(out)
	require.Len(t, ids, 40)
	insts := e.tagged(t)
	require.Len(t, insts, 40)
	seen := map[string]bool{}
	for _, inst := range insts {
		require.Equal(t, want, string(inst.InstanceType))
		seen[*inst.InstanceId] = true
	}
	require.Len(t, seen, 40)
	for _, id := range ids {
		require.True(t, seen[id], id)
	}
}

// BenchmarkCreateFleet40 is one instant CreateFleet for 40 on-demand
// instances from an unlimited pool on the local AWS.
func BenchmarkCreateFleet40(b *testing.B) {
	e := newFleetEnv(b)
	for b.Loop() {
		out, err := e.fleet(b, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"), func(in *ec2.CreateFleetInput) {
			in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(40)
		})
		if err != nil || len(instanceIDs(out)) != 40 {
			b.Fatalf("CreateFleet: %v, %d instances", err, len(instanceIDs(out)))
		}
	}
}

// TestCreateFleetServesConcurrentFleetsConcurrently: as on EC2, two fleets
// that launch only from unlimited pools are served at once (both hold a
// launch slot together); two that draw on a capacity count are served one
// after the other, and the count stays exact.
func TestCreateFleetServesConcurrentFleetsConcurrently(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      int // capacity of m5.large on-demand in us-east-1a; < 0 unlimited
		wantAtOnce int
		wantLaunch int
	}{
		{name: "unlimited pools", limit: -1, wantAtOnce: 2, wantLaunch: 2},
		{name: "a capacity count", limit: 1, wantAtOnce: 1, wantLaunch: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFleetEnv(t)
			require.NoError(t, local.SetCapacity("m5.large", "us-east-1a", awslocal.CapacityTypeOnDemand, tc.limit))
			var mu sync.Mutex
			inside, most := 0, 0
			both := make(chan struct{})
			local.SetFleetAdmitted(func() {
				mu.Lock()
				inside++
				most = max(most, inside)
				if inside == 2 {
					close(both)
				}
				mu.Unlock()
				// Hold the slot until the other fleet holds one too, or
				// long enough to show it cannot.
				select {
				case <-both:
				case <-time.After(2 * time.Second):
				}
				mu.Lock()
				inside--
				mu.Unlock()
			})
			t.Cleanup(func() { local.SetFleetAdmitted(nil) })

			outs := make([]*ec2.CreateFleetOutput, 2)
			var wg sync.WaitGroup
			for i := range outs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
					assert.NoError(t, err)
					outs[i] = out
				}()
			}
			wg.Wait()
			require.Equal(t, tc.wantAtOnce, most, "fleets holding a launch slot at once")
			launched := 0
			for _, out := range outs {
				if out != nil {
					launched += len(instanceIDs(out))
				}
			}
			require.Equal(t, tc.wantLaunch, launched)
			require.Len(t, e.tagged(t), tc.wantLaunch)
		})
	}
}
