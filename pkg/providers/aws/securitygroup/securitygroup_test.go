package securitygroup_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/securitygroup"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var (
	local   *awslocal.Local
	clients *sdk.Clients
	// groups maps each seeded group's name to its id.
	groups = map[string]string{}
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	clients = sdk.New(local.Config(ctx), 0)
	err = seed(ctx)
	cancel()
	if err != nil {
		local.Stop()
		fmt.Fprintln(os.Stderr, "seeding:", err)
		os.Exit(1)
	}
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

func seed(ctx context.Context) error {
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.2.0.0/16")})
	if err != nil {
		return err
	}
	for _, g := range []struct{ name, role string }{{"sg-test-nodes", "nodes"}, {"sg-test-pods", "pods"}, {"sg-test-other", ""}} {
		in := &ec2.CreateSecurityGroupInput{GroupName: aws.String(g.name), Description: aws.String(g.name), VpcId: vpc.Vpc.VpcId}
		if g.role != "" {
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: []ec2types.Tag{
				{Key: aws.String("karpenter.sh/discovery"), Value: aws.String("sg-test")}, {Key: aws.String("role"), Value: aws.String(g.role)},
			}}}
		}
		out, err := clients.EC2.CreateSecurityGroup(ctx, in)
		if err != nil {
			return err
		}
		groups[g.name] = aws.ToString(out.GroupId)
	}
	return nil
}

func ids(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, groups[n])
	}
	sort.Strings(out)
	return out
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		name  string
		terms []awsv1.SecurityGroupSelectorTerm
		want  []string
	}{
		{"tags", []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "sg-test"}}}, ids("sg-test-nodes", "sg-test-pods")},
		{"any value", []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"role": "*"}}}, ids("sg-test-nodes", "sg-test-pods")},
		{"tags ANDed", []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "sg-test", "role": "pods"}}}, ids("sg-test-pods")},
		{"group name, not the Name tag", []awsv1.SecurityGroupSelectorTerm{{Name: "sg-test-other"}}, ids("sg-test-other")},
		{"ids", []awsv1.SecurityGroupSelectorTerm{{ID: groups["sg-test-other"]}, {ID: groups["sg-test-nodes"]}}, ids("sg-test-other", "sg-test-nodes")},
		{"ORed and deduplicated", []awsv1.SecurityGroupSelectorTerm{{Name: "sg-test-nodes"}, {ID: groups["sg-test-nodes"]}, {Tags: map[string]string{"role": "pods"}}},
			ids("sg-test-nodes", "sg-test-pods")},
		{"nothing", []awsv1.SecurityGroupSelectorTerm{{Name: "absent"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := securitygroup.NewProvider(clients.EC2, 0).List(context.Background(),
				&awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{SecurityGroupSelectorTerms: tt.terms}})
			require.NoError(t, err)
			var gotIDs []string
			for _, s := range securitygroup.Status(got) {
				gotIDs = append(gotIDs, s.ID)
			}
			assert.Equal(t, tt.want, gotIDs, "status is sorted by id")
		})
	}
}

func TestCaches(t *testing.T) {
	p := securitygroup.NewProvider(clients.EC2, 0)
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Name: "sg-test-pods"}}}}
	before := local.Calls("ec2", "DescribeSecurityGroups")
	for range 3 {
		_, err := p.List(context.Background(), nc)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, local.Calls("ec2", "DescribeSecurityGroups")-before)
}
