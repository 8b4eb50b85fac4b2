package placementgroup_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
)

type fakeEC2 struct {
	calls []*ec2.DescribePlacementGroupsInput
	group *ec2types.PlacementGroup
}

func (f *fakeEC2) DescribePlacementGroups(_ context.Context, in *ec2.DescribePlacementGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error) {
	f.calls = append(f.calls, in)
	if f.group == nil {
		return nil, &smithy.GenericAPIError{Code: "InvalidPlacementGroup.Unknown", Message: "unknown"}
	}
	return &ec2.DescribePlacementGroupsOutput{PlacementGroups: []ec2types.PlacementGroup{*f.group}}, nil
}

// TestGet resolves a selector by name (available groups only) and by id,
// caches the answer, found or not, and reads EC2's not-found as no group.
func TestGet(t *testing.T) {
	ctx := context.Background()
	api := &fakeEC2{group: &ec2types.PlacementGroup{GroupId: aws.String("pg-0123456789abcdef0"), GroupName: aws.String("kafka"),
		Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(3)}}
	p := placementgroup.NewProvider(api, 0)

	g, err := p.Get(ctx, &awsv1.PlacementGroupSelectorTerm{Name: "kafka"})
	require.NoError(t, err)
	require.NotNil(t, g)
	assert.Equal(t, "pg-0123456789abcdef0", g.ID)
	assert.Equal(t, []string{"1", "2", "3"}, g.Partitions())
	require.Len(t, api.calls, 1)
	assert.Equal(t, []string{"kafka"}, api.calls[0].GroupNames)
	assert.Equal(t, "state", aws.ToString(api.calls[0].Filters[0].Name))
	assert.Equal(t, []string{"available"}, api.calls[0].Filters[0].Values)

	_, err = p.Get(ctx, &awsv1.PlacementGroupSelectorTerm{Name: "kafka"})
	require.NoError(t, err)
	assert.Len(t, api.calls, 1, "cached")

	_, err = p.Get(ctx, &awsv1.PlacementGroupSelectorTerm{ID: "pg-0123456789abcdef0"})
	require.NoError(t, err)
	require.Len(t, api.calls, 2)
	assert.Equal(t, []string{"pg-0123456789abcdef0"}, api.calls[1].GroupIds)

	api.group = nil
	g, err = p.Get(ctx, &awsv1.PlacementGroupSelectorTerm{Name: "gone"})
	require.NoError(t, err)
	assert.Nil(t, g)
	g, err = p.Get(ctx, nil)
	require.NoError(t, err)
	assert.Nil(t, g)
	assert.Nil(t, (&placementgroup.PlacementGroup{Strategy: placementgroup.StrategyCluster}).Partitions())
}

// TestZoneUnavailable: a zone marked for a group is unavailable to that
// group only, in that zone only, for ZoneTTL.
func TestZoneUnavailable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := placementgroup.NewProviderWithClock(&fakeEC2{}, 0, func() time.Time { return now })
	p.MarkZoneUnavailable("pg-1", "us-east-1a")
	for _, tc := range []struct {
		group, zone string
		after       time.Duration
		want        bool
	}{
		{"pg-1", "us-east-1a", 0, true},
		{"pg-1", "us-east-1b", 0, false},
		{"pg-2", "us-east-1a", 0, false},
		{"pg-1", "us-east-1a", placementgroup.ZoneTTL - time.Second, true},
		{"pg-1", "us-east-1a", placementgroup.ZoneTTL, false},
	} {
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(tc.after)
		assert.Equal(t, tc.want, p.ZoneUnavailable(tc.group, tc.zone), "%s %s after %s", tc.group, tc.zone, tc.after)
	}
}
