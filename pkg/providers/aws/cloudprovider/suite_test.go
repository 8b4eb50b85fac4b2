package cloudprovider_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const (
	clusterName = "test-cluster"
	zone        = "us-east-1a"
)

var (
	local  *awslocal.Local
	cp     *controlplane.ControlPlane
	kube   client.Client
	ec2API *ec2.Client
	iamAPI *iam.Client
	prices *pricing.Provider
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	if cp, err = controlplane.Start(ctx, controlplane.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer cp.Stop()
	kube = cp.Client
	cfg := local.Config(ctx)
	ec2API = ec2.NewFromConfig(cfg)
	iamAPI = iam.NewFromConfig(cfg)
	prices = pricing.NewProvider(pricing.NewAPI(cfg), ec2API, pricing.Options{Region: cfg.Region})
	if err := prices.Refresh(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "fetching prices:", err)
		return 1
	}
	return m.Run()
}

// env is one provider assembled from the built parts, with its own
// unavailable-offerings cache, and a Ready EC2NodeClass whose status was
// resolved against the local AWS (one subnet in us-east-1a unless
// newEnvIn names others).
type env struct {
	cp          *awscloudprovider.CloudProvider
	unavailable *cloudprovider.UnavailableOfferings
	types       *instancetypes.Provider
	subnets     *subnet.Provider
	nodeClass   *awsv1.EC2NodeClass
}

func newEnv(t *testing.T) *env { return newEnvWith(t, ec2API) }

// newEnvWith builds the env with instanceAPI as the instance provider's EC2
// client (to record the requests it sends).
func newEnvWith(t *testing.T, instanceAPI instance.EC2API) *env {
	t.Helper()
	subnets, err := ec2API.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{zone}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	require.NotEmpty(t, subnets.Subnets)
	return newEnvIn(t, instanceAPI, subnets.Subnets[:1])
}

// newEnvIn builds the env on a class selecting subnets (by id), its status
// listing them.
func newEnvIn(t *testing.T, instanceAPI instance.EC2API, subnets []ec2types.Subnet) *env {
	t.Helper()
	ctx := context.Background()
	tag := uuid.NewString()[:8]
	var terms []awsv1.SubnetSelectorTerm
	var statusSubnets []awsv1.Subnet
	for _, s := range subnets {
		terms = append(terms, awsv1.SubnetSelectorTerm{ID: aws.ToString(s.SubnetId)})
		statusSubnets = append(statusSubnets, awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)})
	}
	sg, err := ec2API.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("nodes-" + tag), Description: aws.String("nodes")})
	require.NoError(t, err)
	profile := "KarpenterNodeInstanceProfile-" + tag
	_, err = iamAPI.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: &profile})
	require.NoError(t, err)
	image, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)

	nodeClass := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "class-" + tag},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        terms,
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: aws.ToString(sg.GroupId)}},
			Tags:                       map[string]string{"team": "platform"},
		},
	}
	require.NoError(t, kube.Create(ctx, nodeClass))
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nodeClass) })
	nodeClass.Status = awsv1.EC2NodeClassStatus{
		Subnets:         statusSubnets,
		SecurityGroups:  []awsv1.SecurityGroup{{ID: aws.ToString(sg.GroupId), Name: "nodes-" + tag}},
		AMIs:            []awsv1.AMI{{ID: image.ID, Name: image.Name, Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
		InstanceProfile: profile,
		Conditions:      []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}},
	}
	require.NoError(t, kube.Status().Update(ctx, nodeClass))

	unavailable := cloudprovider.NewUnavailableOfferings(nil, 0)
	types := instancetypes.NewProvider(ec2API, prices, instancetypes.Options{Region: "us-east-1", Settings: instancetype.DefaultSettings(), Unavailable: unavailable})
	launchSubnets := subnet.NewProvider(ec2API, time.Minute)
	// Every test sees groups it makes at once.
	groups := placementgroup.NewProvider(ec2API, time.Nanosecond)
	e := &env{
		unavailable: unavailable,
		types:       types,
		subnets:     launchSubnets,
		nodeClass:   nodeClass,
		cp: awscloudprovider.New(awscloudprovider.Options{
			Kube:            kube,
			InstanceTypes:   types,
			LaunchTemplates: launchtemplate.NewProvider(ec2API, clusterName, launchtemplate.ProviderOptions{}),
			Instances: instance.NewProvider(instanceAPI, clusterName, unavailable, instance.WithSubnets(launchSubnets),
				instance.WithPlacementGroupZones(groups)),
			Subnets: launchSubnets,
			Cluster: launchtemplate.Cluster{Name: clusterName, Endpoint: "https://cluster.example.com", CABundle: "Y2E=",
				CIDR: "10.100.0.0/16", DNS: "10.100.0.10"},
			PlacementGroups: groups,
		}),
	}
	t.Cleanup(func() {
		local.ClearCapacity()
		local.ClearFaults("", "")
	})
	return e
}

// candidates are the NodeClaims' allowed types in the tests.
var candidates = []string{"m5.large", "c5.large", "m6i.large", "c6i.large", "t3.large"}

func (e *env) nodeClaim(t *testing.T, capacityTypes ...string) *v1.NodeClaim {
	if len(capacityTypes) == 0 {
		capacityTypes = []string{instance.CapacityTypeOnDemand}
	}
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nc-" + uuid.NewString()[:8], Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: e.nodeClass.Name},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: candidates},
				{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: capacityTypes},
			},
		},
	}
}

// byPrice is the candidates' on-demand offerings in the zone, cheapest
// first, as the provider's own instance-type list prices them.
func (e *env) byPrice(t *testing.T) []string {
	its, err := e.types.List(context.Background(), e.nodeClass)
	require.NoError(t, err)
	price := map[string]float64{}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == instance.CapacityTypeOnDemand {
				price[it.Name] = o.Price
			}
		}
	}
	out := []string{}
	for _, c := range candidates {
		if _, ok := price[c]; ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return price[out[i]] < price[out[j]] })
	require.Len(t, out, len(candidates), "every candidate must be offered in %s", zone)
	require.Less(t, price[out[0]], price[out[1]]-math.SmallestNonzeroFloat64, "the test needs a unique cheapest type")
	return out
}

// instancesOf are the live instances tagged with the NodeClaim's name,
// asked of EC2 directly.
func instancesOf(t *testing.T, nodeClaim string) []ec2types.Instance {
	out, err := ec2API.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + awsv1.NodeClaimTagKey), Values: []string{nodeClaim}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	require.NoError(t, err)
	var insts []ec2types.Instance
	for _, r := range out.Reservations {
		insts = append(insts, r.Instances...)
	}
	return insts
}

func tagsOf(i ec2types.Instance) map[string]string {
	out := map[string]string{}
	for _, t := range i.Tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}
