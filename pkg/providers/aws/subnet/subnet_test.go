package subnet_test

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
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var (
	local   *awslocal.Local
	clients *sdk.Clients
	// ids are the seeded subnets, all discovery-tagged; team holds each
	// one's "team" tag.
	ids  []string
	team = map[string]string{}
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

// seed makes seven discovery-tagged subnets (more than one page of five)
// across three zones, alternately tagged team=a and team=b.
func seed(ctx context.Context) error {
	vpc, err := clients.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.1.0.0/16")})
	if err != nil {
		return err
	}
	for i := range 7 {
		value := []string{"a", "b"}[i%2]
		out, err := clients.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{
			VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.1.%d.0/24", i)),
			AvailabilityZone: aws.String("us-east-1" + string(rune('a'+i%3))),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: []ec2types.Tag{
				{Key: aws.String("karpenter.sh/discovery"), Value: aws.String("subnet-test")},
				{Key: aws.String("team"), Value: aws.String(value)},
			}}},
		})
		if err != nil {
			return err
		}
		id := aws.ToString(out.Subnet.SubnetId)
		ids = append(ids, id)
		team[id] = value
	}
	return nil
}

func listIDs(t *testing.T, p *subnet.Provider, terms ...awsv1.SubnetSelectorTerm) []string {
	t.Helper()
	got, err := p.List(context.Background(), &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{SubnetSelectorTerms: terms}})
	require.NoError(t, err)
	var out []string
	for _, s := range got {
		out = append(out, aws.ToString(s.SubnetId))
	}
	sort.Strings(out)
	return out
}

func sorted(in ...string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func teamSubnets(v string) []string {
	var out []string
	for _, id := range ids {
		if team[id] == v {
			out = append(out, id)
		}
	}
	return sorted(out...)
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		name  string
		terms []awsv1.SubnetSelectorTerm
		want  []string
	}{
		{"tag value", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "a"}}}, teamSubnets("a")},
		{"any value of a key", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "*"}}}, sorted(ids...)},
		{"tags in one term are ANDed", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "b", "karpenter.sh/discovery": "subnet-test"}}}, teamSubnets("b")},
		{"ids", []awsv1.SubnetSelectorTerm{{ID: ids[0]}, {ID: ids[1]}}, sorted(ids[0], ids[1])},
		{"terms are ORed and deduplicated", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "a"}}, {ID: ids[0]}, {ID: ids[1]}},
			sorted(append(teamSubnets("a"), ids[1])...)},
		{"nothing", []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"team": "c"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, listIDs(t, subnet.NewProvider(clients.EC2, time.Minute), tt.terms...))
		})
	}
}

func TestPagesAndCaches(t *testing.T) {
	old := subnet.PageSize
	subnet.PageSize = 5
	t.Cleanup(func() { subnet.PageSize = old })
	p := subnet.NewProvider(clients.EC2, time.Minute)
	before := local.Calls("ec2", "DescribeSubnets")
	assert.Equal(t, sorted(ids...), listIDs(t, p, awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "subnet-test"}}))
	calls := local.Calls("ec2", "DescribeSubnets") - before
	assert.GreaterOrEqual(t, calls, 1)
	// moto answers DescribeSubnets in one page whatever MaxResults says,
	// and the front does not page it (yet); the paginator still drives it.
	t.Logf("DescribeSubnets calls for 7 subnets at page size 5: %d", calls)

	listIDs(t, p, awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "subnet-test"}})
	assert.Equal(t, calls, local.Calls("ec2", "DescribeSubnets")-before, "second list served from the cache")
	p.Invalidate()
	listIDs(t, p, awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "subnet-test"}})
	assert.Equal(t, 2*calls, local.Calls("ec2", "DescribeSubnets")-before, "invalidated: asked again")
}
