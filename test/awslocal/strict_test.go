package awslocal_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// allowAllPrincipal is a principal that IAM never refuses but that sees
// throttling and eventual consistency.
func allowAllPrincipal(t *testing.T) *ec2.Client {
	t.Helper()
	creds, err := local.AddPrincipal(awslocal.Principal{Name: "strict-" + uuid.NewString()[:8], Policies: []awslocal.Policy{awslocal.AllowAll()}})
	require.NoError(t, err)
	return ec2.NewFromConfig(local.ConfigWith(context.Background(), "", creds), noRetry)
}

// TestEventualConsistencyInstances: a principal does not see an instance
// it launched (DescribeInstances by id, CreateTags, TerminateInstances say
// InvalidInstanceID.NotFound; a filtered listing leaves it out) until the
// delay is over, while the root key sees it at once.
func TestEventualConsistencyInstances(t *testing.T) {
	ctx := context.Background()
	c := newIAMCluster(t)
	p := allowAllPrincipal(t)
	var id string
	require.Eventually(t, func() bool { // the template and profile settle first
		out, err := p.CreateFleet(ctx, c.fleetInput(clusterTags(c.name)))
		require.NoError(t, err)
		if len(out.Instances) == 0 {
			return false
		}
		id = out.Instances[0].InstanceIds[0]
		return true
	}, 30*time.Second, 200*time.Millisecond)
	launched := time.Now()
	t.Cleanup(func() {
		_, _ = ec2Client(t).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	})

	_, err := p.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.Equal(t, "InvalidInstanceID.NotFound", errCode(err), "%v", err)
	require.ErrorContains(t, err, "The instance ID '"+id+"' does not exist")
	_, err = p.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(map[string]string{"Name": "x"})})
	require.Equal(t, "InvalidInstanceID.NotFound", errCode(err), "%v", err)
	byTag := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{c.name}}}}
	listed, err := p.DescribeInstances(ctx, byTag)
	require.NoError(t, err)
	require.Empty(t, listed.Reservations, "the launch is not listed yet")
	root, err := ec2Client(t).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	require.Len(t, root.Reservations, 1, "the root key sees the instance at once")
	require.Less(t, time.Since(launched), awslocal.DefaultInstanceDelay, "the checks above ran inside the delay")

	require.Eventually(t, func() bool {
		out, err := p.DescribeInstances(ctx, byTag)
		return err == nil && len(out.Reservations) == 1
	}, 10*time.Second, 100*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(launched), awslocal.DefaultInstanceDelay)
	_, err = p.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(map[string]string{"Name": "x"})})
	require.NoError(t, err)
}

// TestEventualConsistencyProfileAndTemplate: a launch right after the
// launch template is made fails as EC2 reports an unknown template; right
// after the instance profile gets its role, as EC2 reports an invalid
// profile; both settle.
func TestEventualConsistencyProfileAndTemplate(t *testing.T) {
	ctx := context.Background()
	// The profile is created inside newIAMCluster, after start: the
	// launch that finally works must come at least its delay after start.
	start := time.Now()
	c := newIAMCluster(t)
	made := time.Now()
	p := allowAllPrincipal(t)
	out, err := p.CreateFleet(ctx, c.fleetInput(clusterTags(c.name)))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Len(t, out.Errors, 1)
	require.Equal(t, "InvalidLaunchTemplateId.NotFound", aws.ToString(out.Errors[0].ErrorCode))
	_, err = p.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{c.ltID}})
	require.Equal(t, "InvalidLaunchTemplateId.NotFound", errCode(err), "%v", err)
	require.Less(t, time.Since(made), awslocal.DefaultLaunchTemplateDelay)

	time.Sleep(awslocal.DefaultLaunchTemplateDelay)
	out, err = p.CreateFleet(ctx, c.fleetInput(clusterTags(c.name)))
	require.NoError(t, err)
	require.Empty(t, out.Instances)
	require.Len(t, out.Errors, 1)
	require.Equal(t, "InvalidParameterValue", aws.ToString(out.Errors[0].ErrorCode))
	require.Equal(t, fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", c.profile), aws.ToString(out.Errors[0].ErrorMessage))

	var id string
	require.Eventually(t, func() bool {
		out, err := p.CreateFleet(ctx, c.fleetInput(clusterTags(c.name)))
		require.NoError(t, err)
		if len(out.Instances) == 0 {
			return false
		}
		id = out.Instances[0].InstanceIds[0]
		return true
	}, 30*time.Second, 200*time.Millisecond)
	t.Cleanup(func() {
		_, _ = ec2Client(t).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	})
	require.GreaterOrEqual(t, time.Since(start), awslocal.DefaultInstanceProfileDelay)
}

// TestThrottling drains EC2's buckets as a principal: 100 DescribeImages
// (non-mutating: 100 tokens, 20 a second) go through at once and the next
// ones are refused with RequestLimitExceeded until a token comes back; an
// unfiltered DescribeVolumes draws from its own 50-token bucket; a launch
// of more instances than RunInstances' resource bucket holds is refused
// while the root key is never throttled.
func TestThrottling(t *testing.T) {
	ctx := context.Background()
	p := allowAllPrincipal(t)
	before := local.Throttled()["DescribeImages"]
	ok := 0
	var err error
	start := time.Now()
	for range 1000 {
		if _, err = p.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-none"}}); errCode(err) == "RequestLimitExceeded" {
			break
		}
		ok++
	}
	refilled := 20 * time.Since(start).Seconds()
	require.Equal(t, "RequestLimitExceeded", errCode(err), "%v", err)
	require.GreaterOrEqual(t, ok, 100, "the bucket holds 100 tokens")
	require.LessOrEqual(t, float64(ok), 100+refilled+1, "and refills 20 a second")
	require.Equal(t, before+1, local.Throttled()["DescribeImages"])
	require.Eventually(t, func() bool {
		_, err := p.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-none"}})
		return errCode(err) != "RequestLimitExceeded"
	}, 2*time.Second, 20*time.Millisecond, "a token comes back within a second")
	for range 10 {
		_, err := ec2Client(t).DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-none"}})
		require.NotEqual(t, "RequestLimitExceeded", errCode(err), "the root key is not throttled")
	}

	ok = 0
	start = time.Now()
	for range 1000 {
		if _, err = p.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); errCode(err) == "RequestLimitExceeded" {
			break
		}
		require.NoError(t, err)
		ok++
	}
	refilled = 10 * time.Since(start).Seconds()
	require.Equal(t, "RequestLimitExceeded", errCode(err))
	require.GreaterOrEqual(t, ok, 50)
	require.LessOrEqual(t, float64(ok), 50+refilled+1, "unfiltered and unpaginated: the 50-token bucket, 10 a second")
	_, err = p.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: []ec2types.Filter{{Name: aws.String("status"), Values: []string{"available"}}}})
	require.NoError(t, err, "a filtered call draws from the larger bucket")

	c := newIAMCluster(t)
	in := c.fleetInput(clusterTags(c.name))
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(1001)
	_, err = p.CreateFleet(ctx, in)
	require.Equal(t, "RequestLimitExceeded", errCode(err), "1,001 launches outrun RunInstances' 1,000 resource tokens: %v", err)
}

// TestTagLimits: EC2 refuses a 51st user tag on a resource, counting the
// tags it already has and not counting aws: tags, and refuses setting an
// aws: tag; a launch whose instance would carry 51 tags (template and
// request together) is refused before anything launches; IAM refuses a
// 51st tag on an instance profile.
func TestTagLimits(t *testing.T) {
	ctx := context.Background()
	admin := ec2Client(t)
	c := newIAMCluster(t)
	tags := func(prefix string, n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("%s%02d", prefix, i)] = "v"
		}
		return m
	}
	run, err := admin.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: &c.image.ID, MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeM5Large,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2TagList(tags("a", 40))}}})
	require.NoError(t, err)
	id := aws.ToString(run.Instances[0].InstanceId)
	t.Cleanup(func() { _, _ = admin.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}) })

	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(tags("b", 11))})
	require.Equal(t, "TagLimitExceeded", errCode(err), "40 + 11 = 51: %v", err)
	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(tags("a", 40))})
	require.NoError(t, err, "re-setting the same 40 keys adds none")
	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(tags("b", 10))})
	require.NoError(t, err, "exactly 50")
	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(map[string]string{"aws:ec2:fleet-id": "x"})})
	require.Equal(t, "InvalidParameterValue", errCode(err), "aws: keys are reserved: %v", err)
	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(map[string]string{strings.Repeat("k", 129): "x"})})
	require.Equal(t, "InvalidParameterValue", errCode(err), "keys are at most 128 characters: %v", err)

	// 40 tags in the template's network-interface specification, 11 more
	// in the request's: the launch is refused whole.
	lt, err := admin.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("tags-" + c.name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: &c.image.ID,
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2TagList(tags("a", 40))}}}})
	require.NoError(t, err)
	fleet := c.fleetInput(tags("b", 11))
	fleet.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateId = lt.LaunchTemplate.LaunchTemplateId
	before := local.Calls("ec2", "RunInstances")
	_, err = admin.CreateFleet(ctx, fleet)
	require.Equal(t, "TagLimitExceeded", errCode(err), "%v", err)
	require.Equal(t, before, local.Calls("ec2", "RunInstances"))
	// 40 + 10 = 50 launches, though the instance also carries the
	// template's two aws: tags, and a claim that only overwrites one of
	// the 50 keys is taken.
	fleet = c.fleetInput(tags("b", 10))
	fleet.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateId = lt.LaunchTemplate.LaunchTemplateId
	out, err := admin.CreateFleet(ctx, fleet)
	require.NoError(t, err)
	require.Empty(t, out.Errors, "exactly 50 user tags from template and request")
	require.Len(t, out.Instances, 1)
	full := out.Instances[0].InstanceIds[0]
	t.Cleanup(func() {
		_, _ = admin.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{full}})
	})
	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{full}, Tags: ec2TagList(map[string]string{"b00": "claimed"})})
	require.NoError(t, err, "overwriting a key of an instance at 50")
	_, err = admin.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{full}, Tags: ec2TagList(map[string]string{"Name": "x"})})
	require.Equal(t, "TagLimitExceeded", errCode(err), "a 51st: %v", err)

	_, err = admin.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("big-" + c.name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: &c.image.ID, UserData: aws.String(base64.StdEncoding.EncodeToString(make([]byte, 16*1024+1)))}})
	require.Equal(t, "InvalidParameterValue", errCode(err), "user data is at most 16 KB: %v", err)

	var iamTags []iamtypes.Tag
	for k, v := range tags("t", 51) {
		iamTags = append(iamTags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	_, err = iam.NewFromConfig(local.Config(ctx)).CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("many-" + c.name), Tags: iamTags})
	require.Equal(t, "LimitExceeded", errCode(err), "%v", err)
}

// TestLaunchTemplateQuota starts a local AWS with a quota of 3 launch
// templates: the fourth is refused with LaunchTemplateLimitExceeded.
func TestLaunchTemplateQuota(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l, err := awslocal.Start(ctx, awslocal.Options{Limits: awslocal.LimitOptions{LaunchTemplates: 3}})
	require.NoError(t, err)
	defer l.Stop()
	client := ec2.NewFromConfig(l.Config(ctx), noRetry)
	for i := range 4 {
		_, err := client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(fmt.Sprintf("lt-%d", i)),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b")}})
		if i < 3 {
			require.NoError(t, err)
			continue
		}
		require.Equal(t, "LaunchTemplateLimitExceeded", errCode(err), "%v", err)
	}
}
