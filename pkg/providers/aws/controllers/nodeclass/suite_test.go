package nodeclass_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/amifamily"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instanceprofile"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/securitygroup"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const (
	clusterName = "nodeclass-test"
	k8sVersion  = "1.34"
	discovery   = "karpenter.sh/discovery"
	nodeRole    = "KarpenterNodeRole-nodeclass-test"
)

var (
	cp      *controlplane.ControlPlane
	local   *awslocal.Local
	clients *sdk.Clients
	// subnetIDs are the discovery-tagged subnets, largest first.
	subnetIDs []string
	sgIDs     []string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{KubernetesVersions: []string{k8sVersion}}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	clients = sdk.New(local.Config(ctx), 0)
	if err := seed(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "seeding the local AWS:", err)
		return 1
	}
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

// seed creates what a cluster's IaC would: a VPC with three discovery
// tagged subnets of different sizes (so the status order is by free
// addresses), an untagged subnet, two tagged security groups and the node
// role.
func seed(ctx context.Context) error {
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		return err
	}
	vpcID := vpc.Vpc.VpcId
	for i, s := range []struct{ cidr, zone string }{
		{"10.0.0.0/20", "us-east-1a"}, {"10.0.16.0/22", "us-east-1b"}, {"10.0.20.0/24", "us-east-1c"}, {"10.0.21.0/24", "us-east-1d"},
	} {
		in := &ec2.CreateSubnetInput{VpcId: vpcID, CidrBlock: aws.String(s.cidr), AvailabilityZone: aws.String(s.zone)}
		if i < 3 {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet,
				Tags: []ec2types.Tag{{Key: aws.String(discovery), Value: aws.String(clusterName)}, {Key: aws.String("tier"), Value: aws.String(fmt.Sprint("t", i))}}}}
		}
		out, err := clients.EC2.CreateSubnet(ctx, in)
		if err != nil {
			return err
		}
		if i < 3 {
			subnetIDs = append(subnetIDs, aws.ToString(out.Subnet.SubnetId))
		}
	}
	for _, name := range []string{"nodes", "extra"} {
		out, err := clients.EC2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: aws.String(clusterName + "-" + name), Description: aws.String(name), VpcId: vpcID,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
				Tags: []ec2types.Tag{{Key: aws.String(discovery), Value: aws.String(clusterName)}}}},
		})
		if err != nil {
			return err
		}
		sgIDs = append(sgIDs, aws.ToString(out.GroupId))
	}
	_, err = clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(nodeRole),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	return err
}

// newController builds the controller over fresh providers (no warm
// caches between tests); ssmTTL shortens the alias parameter cache and
// mutate adjusts the options.
func newController(ssmTTL time.Duration, mutate ...func(*nodeclass.Options)) (*nodeclass.Controller, *recorder) {
	rec := &recorder{}
	amis := amifamily.NewProvider(clients.EC2, clients.SSM, amifamily.Options{
		KubernetesVersion: func(context.Context) (string, error) { return k8sVersion, nil },
		SSMTTL:            ssmTTL, ImageTTL: time.Millisecond,
	})
	opts := nodeclass.Options{
		Subnets:        subnet.NewProvider(clients.EC2, time.Minute),
		SecurityGroups: securitygroup.NewProvider(clients.EC2, 0),
		AMIs:           amis,
		// Propagation off: these tests read a class Ready after one
		// reconcile; TestInstanceProfilePropagation turns it on.
		InstanceProfiles: instanceprofile.NewProvider(clients.IAM, clients.Region, clusterName).WithPropagation(0, nil),
		Recorder:         rec,
		ClusterName:      clusterName,
	}
	for _, m := range mutate {
		m(&opts)
	}
	return nodeclass.NewController(cp.Client, opts), rec
}

func newNodeClass(t *testing.T, name string, mutate func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{discovery: clusterName}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{discovery: clusterName}}},
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       nodeRole,
		},
	}
	if mutate != nil {
		mutate(nc)
	}
	require.NoError(t, cp.Client.Create(context.Background(), nc))
	t.Cleanup(func() {
		ctx := context.Background()
		got := &awsv1.EC2NodeClass{}
		if err := cp.Client.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return
		}
		got.Finalizers = nil
		_ = cp.Client.Update(ctx, got)
		_ = cp.Client.Delete(ctx, got)
	})
	return nc
}

func reconcileOnce(t *testing.T, c *nodeclass.Controller, name string) reconcile.Result {
	t.Helper()
	res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(t, err)
	return res
}

func get(t *testing.T, name string) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, nc))
	return nc
}

func condition(nc *awsv1.EC2NodeClass, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(nc.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

type recorder struct{ events []string }

func (r *recorder) Eventf(_ runtime.Object, _, reason, messageFmt string, args ...any) {
	r.events = append(r.events, reason+": "+fmt.Sprintf(messageFmt, args...))
}
