package awslocal_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// iamCluster is the AWS side of a cluster as upstream's policy expects it:
// the node role, a tagged instance profile holding it, and a launch
// template tagged for the cluster and a NodePool.
type iamCluster struct {
	name, profile, ltID string
	subnet, sg          string
	image               awslocal.Image
}

func clusterTags(name string) map[string]string {
	return map[string]string{"kubernetes.io/cluster/" + name: "owned", "eks:eks-cluster-name": name, "karpenter.sh/nodepool": "default"}
}

func ec2TagList(m map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for k, v := range m {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

func newIAMCluster(t *testing.T) iamCluster {
	t.Helper()
	ctx := context.Background()
	c := iamCluster{name: "iam-" + uuid.NewString()[:8]}
	admin := ec2Client(t)
	iamAdmin := iam.NewFromConfig(local.Config(ctx))
	role := "KarpenterNodeRole-" + c.name
	_, err := iamAdmin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: &role, AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
	require.NoError(t, err)
	c.profile = c.name + "_profile"
	_, err = iamAdmin.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: &c.profile})
	require.NoError(t, err)
	_, err = iamAdmin.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: &c.profile, RoleName: &role})
	require.NoError(t, err)
	var ok bool
	c.image, ok = local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	subnets, err := admin.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	c.subnet = aws.ToString(subnets.Subnets[0].SubnetId)
	sg, err := admin.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes-" + c.name), Description: aws.String("nodes")})
	require.NoError(t, err)
	c.sg = aws.ToString(sg.GroupId)
	tags := ec2TagList(clusterTags(c.name))
	lt, err := admin.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(c.name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: &c.image.ID, SecurityGroupIds: []string{c.sg},
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: &c.profile},
			TagSpecifications:  []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: tags}}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}}})
	require.NoError(t, err)
	c.ltID = aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	return c
}

// fleetInput launches one instance from the cluster's template with tags
// on the instance, its volumes and the fleet.
func (c iamCluster) fleetInput(tags map[string]string) *ec2.CreateFleetInput {
	t := ec2TagList(tags)
	return &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand, TotalTargetCapacity: aws.Int32(1)},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: &c.ltID, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: &c.subnet, ImageId: &c.image.ID}}}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: t},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: t}, {ResourceType: ec2types.ResourceTypeFleet, Tags: t}}}
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// noRetry makes a client give up at the first answer, so a test sees
// throttles and denials as they come.
func noRetry(o *ec2.Options) { o.RetryMaxAttempts = 1 }

// TestIAMUpstreamPolicy runs the controller's calls as a principal holding
// upstream's controller policy: the launch, the tags the policy allows
// after launch and the deletion pass; a tag it does not allow, iam:GetRole,
// another region, another cluster's instance and an untagged launch are
// refused as EC2 and IAM refuse them, the EC2 refusal's encoded message
// decodes through STS, and the denials are counted and logged.
func TestIAMUpstreamPolicy(t *testing.T) {
	ctx := context.Background()
	c := newIAMCluster(t)
	pols, err := awslocal.UpstreamControllerPolicies(awslocal.PolicyVars{ClusterName: c.name})
	require.NoError(t, err)
	name := "karpenter-" + c.name
	creds, err := local.AddPrincipal(awslocal.Principal{Name: name, Policies: pols})
	require.NoError(t, err)
	cfg := local.ConfigWith(ctx, "us-east-1", creds)
	ec2c := ec2.NewFromConfig(cfg, noRetry)
	before := local.DenialCount()

	// The template and the instance profile were just made: the launch
	// waits for EC2 to see them.
	var out *ec2.CreateFleetOutput
	require.Eventually(t, func() bool {
		out, err = ec2c.CreateFleet(ctx, c.fleetInput(clusterTags(c.name)))
		require.NoError(t, err)
		return len(out.Instances) == 1
	}, 30*time.Second, 500*time.Millisecond)
	id := out.Instances[0].InstanceIds[0]
	t.Cleanup(func() {
		_, _ = ec2Client(t).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	})

	// The tags upstream allows once the instance runs; the instance is
	// known to EC2 a moment after the launch.
	require.Eventually(t, func() bool {
		_, err := ec2c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(map[string]string{"karpenter.sh/nodeclaim": "nc-1", "Name": "node-1"})})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)

	_, err = ec2c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2TagList(map[string]string{"karpenter.sh/nodeclaim": "nc-1", "karpenter-go.io/launch-state": "claimed"})})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "%v", err)
	require.ErrorContains(t, err, "ec2:CreateTags on resource: arn:aws:ec2:us-east-1:123456789012:instance/"+id)
	msg := err.Error()
	encoded := strings.TrimSpace(msg[strings.Index(msg, "Encoded authorization failure message: ")+len("Encoded authorization failure message: "):])
	decoded, err := sts.NewFromConfig(local.Config(ctx)).DecodeAuthorizationMessage(ctx, &sts.DecodeAuthorizationMessageInput{EncodedMessage: &encoded})
	require.NoError(t, err)
	require.Contains(t, aws.ToString(decoded.DecodedMessage), `"action":"ec2:CreateTags"`)
	require.Contains(t, aws.ToString(decoded.DecodedMessage), `karpenter-go.io/launch-state`)

	_, err = iam.NewFromConfig(cfg).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("KarpenterNodeRole-" + c.name)})
	require.Equal(t, "AccessDenied", errCode(err), "%v", err)
	_, err = iam.NewFromConfig(cfg).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &c.profile})
	require.NoError(t, err)
	// A managed profile: created with the cluster's, region's and class's
	// tags (IAM authorizes those tags as iam:TagInstanceProfile too), then
	// given the node role (iam:PassRole to EC2).
	profileTags := []iamtypes.Tag{}
	for k, v := range map[string]string{"kubernetes.io/cluster/" + c.name: "owned", "eks:eks-cluster-name": c.name,
		"topology.kubernetes.io/region": "us-east-1", "karpenter.k8s.aws/ec2nodeclass": "default"} {
		profileTags = append(profileTags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	managed := c.name + "_managed"
	_, err = iam.NewFromConfig(cfg).CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: &managed,
		Path: aws.String("/karpenter/us-east-1/" + c.name + "/uid/"), Tags: profileTags})
	require.NoError(t, err)
	_, err = iam.NewFromConfig(cfg).AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: &managed, RoleName: aws.String("KarpenterNodeRole-" + c.name)})
	require.NoError(t, err)
	_, err = iam.NewFromConfig(cfg).CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(c.name + "_untagged")})
	require.Equal(t, "AccessDenied", errCode(err), "%v", err)

	_, err = ec2.NewFromConfig(local.ConfigWith(ctx, "eu-west-1", creds), noRetry).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "reads only in the cluster's region: %v", err)

	// Public SSM parameters only.
	_, err = ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	require.NoError(t, err)
	_, err = ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/team/secret")})
	require.Equal(t, "AccessDeniedException", errCode(err), "%v", err)

	// A launch whose instances would not carry the cluster's tags.
	untagged := clusterTags(c.name)
	delete(untagged, "karpenter.sh/nodepool")
	_, err = ec2c.CreateFleet(ctx, c.fleetInput(untagged))
	require.Equal(t, "UnauthorizedOperation", errCode(err), "%v", err)

	// Another cluster's instance cannot be terminated; our own can.
	other, err := ec2Client(t).RunInstances(ctx, &ec2.RunInstancesInput{ImageId: &c.image.ID, MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeM5Large})
	require.NoError(t, err)
	otherID := aws.ToString(other.Instances[0].InstanceId)
	t.Cleanup(func() {
		_, _ = ec2Client(t).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{otherID}})
	})
	_, err = ec2c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{otherID}})
	require.Equal(t, "UnauthorizedOperation", errCode(err), "%v", err)
	_, err = ec2c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)

	denials := local.Denials(name)
	require.Equal(t, 7, local.DenialCount()-before, "%v", denials)
	var calls []string
	for _, d := range denials {
		calls = append(calls, d.Call)
	}
	require.Equal(t, []string{"ec2:CreateTags", "iam:GetRole", "iam:CreateInstanceProfile", "ec2:DescribeInstances", "ssm:GetParameter", "ec2:CreateFleet", "ec2:TerminateInstances"}, calls)

	// The call log holds what the launch needed, allowed or not.
	needed := map[string]bool{}
	for _, e := range local.AuthorizationLog(name) {
		needed[e.Request.Action+" "+e.Request.Resource] = true
	}
	for _, want := range []string{
		"ec2:CreateFleet arn:aws:ec2:us-east-1:123456789012:fleet/*",
		"ec2:RunInstances arn:aws:ec2:us-east-1:123456789012:instance/*",
		"ec2:RunInstances arn:aws:ec2:us-east-1:123456789012:network-interface/*",
		"ec2:CreateFleet arn:aws:ec2:us-east-1:123456789012:launch-template/" + c.ltID,
		"ec2:RunInstances arn:aws:ec2:us-east-1::image/" + c.image.ID,
		"ec2:RunInstances arn:aws:ec2:us-east-1:123456789012:subnet/" + c.subnet,
		"ec2:RunInstances arn:aws:ec2:us-east-1:123456789012:security-group/" + c.sg,
		"ec2:CreateTags arn:aws:ec2:us-east-1:123456789012:volume/*",
		"iam:PassRole arn:aws:iam::123456789012:role/KarpenterNodeRole-" + c.name,
		"iam:TagInstanceProfile arn:aws:iam::123456789012:instance-profile/karpenter/us-east-1/" + c.name + "/uid/" + c.name + "_managed",
	} {
		require.True(t, needed[want], "the log records %s", want)
	}
}

// TestIAMAuthentication checks that a principal's calls must be signed with
// its own secret, and an unknown key is refused.
func TestIAMAuthentication(t *testing.T) {
	ctx := context.Background()
	name := "auth-" + uuid.NewString()[:8]
	creds, err := local.AddPrincipal(awslocal.Principal{Name: name, Policies: []awslocal.Policy{awslocal.AllowAll()}})
	require.NoError(t, err)
	_, err = ec2.NewFromConfig(local.ConfigWith(ctx, "", creds), noRetry).DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"ec2:DescribeRegions": 1}, local.CallsBy(name))
	bad := creds
	bad.SecretAccessKey = "wrong"
	_, err = ec2.NewFromConfig(local.ConfigWith(ctx, "", bad), noRetry).DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	require.Equal(t, "AuthFailure", errCode(err), "%v", err)
	_, err = iam.NewFromConfig(local.ConfigWith(ctx, "", bad)).ListRoles(ctx, &iam.ListRolesInput{})
	require.Equal(t, "SignatureDoesNotMatch", errCode(err), "%v", err)
	unknown := awslocal.Credentials{AccessKeyID: "AKIAUNKNOWNUNKNOWN00", SecretAccessKey: "x"}
	_, err = iam.NewFromConfig(local.ConfigWith(ctx, "", unknown)).ListRoles(ctx, &iam.ListRolesInput{})
	require.Equal(t, "InvalidClientTokenId", errCode(err), "%v", err)
}

// TestIAMShadowAndAudit: shadow sets record without deciding, and an
// audit-only principal is never refused but its denials are counted.
func TestIAMShadowAndAudit(t *testing.T) {
	ctx := context.Background()
	deny := awslocal.Policy{Name: "ReadOnly", Statement: []awslocal.Statement{{Effect: "Allow", Action: awslocal.Values{"ec2:Describe*"}, Resource: awslocal.Values{"*"}}}}
	name := "shadow-" + uuid.NewString()[:8]
	creds, err := local.AddPrincipal(awslocal.Principal{Name: name, Policies: []awslocal.Policy{awslocal.AllowAll()},
		Shadow: map[string][]awslocal.Policy{"read-only": {deny}}})
	require.NoError(t, err)
	_, err = iam.NewFromConfig(local.ConfigWith(ctx, "", creds)).ListRoles(ctx, &iam.ListRolesInput{})
	require.NoError(t, err)
	require.Empty(t, local.Denials(name))
	shadow := local.ShadowDenials(name, "read-only")
	require.Len(t, shadow, 1)
	require.Equal(t, "iam:ListRoles", shadow[0].Request.Action)

	audited := "audit-" + uuid.NewString()[:8]
	creds, err = local.AddPrincipal(awslocal.Principal{Name: audited, Policies: []awslocal.Policy{deny}, AuditOnly: true})
	require.NoError(t, err)
	before := local.DenialCount()
	_, err = iam.NewFromConfig(local.ConfigWith(ctx, "", creds)).ListRoles(ctx, &iam.ListRolesInput{})
	require.NoError(t, err)
	require.Equal(t, before+1, local.DenialCount())
	var nse *iamtypes.NoSuchEntityException
	_, err = iam.NewFromConfig(local.ConfigWith(ctx, "", creds)).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("none-" + audited)})
	require.ErrorAs(t, err, &nse, "audited calls are served")
}

// TestIAMControlAPI adds a principal over HTTP and reads its denials back.
func TestIAMControlAPI(t *testing.T) {
	ctx := context.Background()
	name := "http-" + uuid.NewString()[:8]
	body := `{"name":"` + name + `","policies":[{"name":"ro","document":{"Statement":[{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}]}}]}`
	resp, err := http.Post(local.Endpoint()+"/_awslocal/iam/principals", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var creds awslocal.Credentials
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&creds))
	_, err = iam.NewFromConfig(local.ConfigWith(ctx, "", creds)).ListRoles(ctx, &iam.ListRolesInput{})
	require.Equal(t, "AccessDenied", errCode(err), "%v", err)
	got, err := http.Get(local.Endpoint() + "/_awslocal/iam/denials?principal=" + name)
	require.NoError(t, err)
	defer got.Body.Close()
	var out struct {
		Count   int               `json:"count"`
		Denials []awslocal.Denial `json:"denials"`
	}
	require.NoError(t, json.NewDecoder(got.Body).Decode(&out))
	require.Len(t, out.Denials, 1)
	require.Equal(t, "iam:ListRoles", out.Denials[0].Call)
	require.Positive(t, out.Count)
}
