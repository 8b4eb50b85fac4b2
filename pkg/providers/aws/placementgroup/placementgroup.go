// Package placementgroup resolves an EC2NodeClass's placementGroupSelector
// into the EC2 placement group it names, as upstream does: one
// DescribePlacementGroups call by id or by name for available groups, the
// answer (a group, or none) cached for a minute. It also remembers the
// zones a group refused a launch in (a spread group's seven instances per
// zone, a cluster group living in another zone) for ZoneTTL, so offerings
// of that group in that zone are unavailable meanwhile.
package placementgroup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/ttl"
)

// API is the part of the EC2 client the provider calls.
type API interface {
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
}

// Placement strategies.
const (
	StrategyCluster   = "cluster"
	StrategyPartition = "partition"
	StrategySpread    = "spread"
)

// DefaultTTL is upstream's cache TTL for placement groups.
const DefaultTTL = time.Minute

// ZoneTTL is how long a zone that refused a group's launch stays
// unavailable for the group: the insufficient-capacity cache's TTL, as
// upstream keeps the spread limit in that cache.
const ZoneTTL = 3 * time.Minute

// PlacementGroup is the resolved group.
type PlacementGroup struct {
	ID, Name string
	Strategy string
	// PartitionCount is the number of partitions of a partition group.
	PartitionCount int
	SpreadLevel    string
}

// Partitions are the partition numbers of a partition group ("1".."N"),
// none for other strategies.
func (g *PlacementGroup) Partitions() []string {
	if g == nil || g.Strategy != StrategyPartition {
		return nil
	}
	out := make([]string, 0, g.PartitionCount)
	for p := 1; p <= g.PartitionCount; p++ {
		out = append(out, strconv.Itoa(p))
	}
	return out
}

// Provider resolves placement group selectors. It is safe for concurrent
// use.
type Provider struct {
	ec2   API
	ttl   time.Duration
	cache *ttl.Cache[*PlacementGroup]
	// fullZones holds "<group id>/<zone>" for the zones a group refused a
	// launch in.
	fullZones *ttl.Cache[struct{}]
}

// NewProvider returns a provider caching answers for d (DefaultTTL if 0).
func NewProvider(api API, d time.Duration) *Provider {
	return NewProviderWithClock(api, d, nil)
}

// NewProviderWithClock is NewProvider with a clock (time.Now when nil).
func NewProviderWithClock(api API, d time.Duration, now func() time.Time) *Provider {
	if d == 0 {
		d = DefaultTTL
	}
	return &Provider{ec2: api, ttl: d, cache: ttl.New[*PlacementGroup](now), fullZones: ttl.New[struct{}](now)}
}

// MarkZoneUnavailable makes zone unavailable to the group's launches for
// ZoneTTL (extending an earlier mark).
func (p *Provider) MarkZoneUnavailable(groupID, zone string) {
	p.fullZones.Set(groupID+"/"+zone, struct{}{}, ZoneTTL)
}

// ZoneUnavailable is whether the group refused a launch in zone within
// ZoneTTL.
func (p *Provider) ZoneUnavailable(groupID, zone string) bool {
	_, ok := p.fullZones.Get(groupID + "/" + zone)
	return ok
}

// Get is the available group sel names; nil (and no error) when EC2 has
// none, or when sel is nil.
func (p *Provider) Get(ctx context.Context, sel *awsv1.PlacementGroupSelectorTerm) (*PlacementGroup, error) {
	if sel == nil || (sel.ID == "" && sel.Name == "") {
		return nil, nil
	}
	key := "name/" + sel.Name
	in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}}}
	if sel.ID != "" {
		key = "id/" + sel.ID
		in.GroupIds = []string{sel.ID}
	} else {
		in.GroupNames = []string{sel.Name}
	}
	if g, ok := p.cache.Get(key); ok {
		return g, nil
	}
	out, err := p.ec2.DescribePlacementGroups(ctx, in)
	if err != nil && !IsNotFound(err) {
		return nil, fmt.Errorf("describing placement groups: %w", err)
	}
	var g *PlacementGroup
	if err == nil && len(out.PlacementGroups) > 0 {
		g = fromEC2(out.PlacementGroups[0])
	}
	p.cache.Set(key, g, p.ttl)
	return g, nil
}

// Invalidate forgets every cached answer.
func (p *Provider) Invalidate() { p.cache.Flush() }

func fromEC2(pg ec2types.PlacementGroup) *PlacementGroup {
	return &PlacementGroup{
		ID:             aws.ToString(pg.GroupId),
		Name:           aws.ToString(pg.GroupName),
		Strategy:       string(pg.Strategy),
		PartitionCount: int(aws.ToInt32(pg.PartitionCount)),
		SpreadLevel:    string(pg.SpreadLevel),
	}
}

// IsNotFound is whether err is EC2's answer for a group it does not know.
func IsNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode() == "InvalidPlacementGroup.Unknown" || apiErr.ErrorCode() == "InvalidPlacementGroupId.NotFound")
}
