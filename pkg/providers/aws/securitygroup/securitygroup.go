// Package securitygroup resolves an EC2NodeClass's securityGroupSelectorTerms
// into EC2 security groups, as upstream does: one DescribeSecurityGroups
// query per tag or name term plus one for all id terms, results unioned and
// cached for a minute.
package securitygroup

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/selector"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/ttl"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
)

// API is the part of the EC2 client the provider calls.
type API interface {
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
}

// DefaultTTL is upstream's default cache TTL for security groups.
const DefaultTTL = time.Minute

// PageSize is the MaxResults the provider asks for; EC2 allows 5 to 1000.
var PageSize int32 = 1000

// Provider lists security groups for selector terms. It is safe for
// concurrent use.
type Provider struct {
	ec2   API
	ttl   time.Duration
	cache *ttl.Cache[[]ec2types.SecurityGroup]
}

// NewProvider returns a provider caching answers for d (DefaultTTL if 0).
func NewProvider(api API, d time.Duration) *Provider {
	if d == 0 {
		d = DefaultTTL
	}
	return &Provider{ec2: api, ttl: d, cache: ttl.New[[]ec2types.SecurityGroup](nil)}
}

// List returns the security groups nodeClass selects, deduplicated.
func (p *Provider) List(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]ec2types.SecurityGroup, error) {
	filterSets := FilterSets(nodeClass.Spec.SecurityGroupSelectorTerms)
	if len(filterSets) == 0 {
		return nil, nil
	}
	key := selector.Key(filterSets)
	if groups, ok := p.cache.Get(key); ok {
		return groups, nil
	}
	out, err := selector.Union(ctx, filterSets,
		func(filters []ec2types.Filter) selector.Pager[*ec2.DescribeSecurityGroupsOutput] {
			return ec2.NewDescribeSecurityGroupsPaginator(p.ec2, &ec2.DescribeSecurityGroupsInput{Filters: filters, MaxResults: aws.Int32(PageSize)})
		},
		func(page *ec2.DescribeSecurityGroupsOutput) []ec2types.SecurityGroup { return page.SecurityGroups },
		func(g ec2types.SecurityGroup) string { return aws.ToString(g.GroupId) })
	if err != nil {
		return nil, fmt.Errorf("describing security groups %w", err)
	}
	p.cache.Set(key, out, p.ttl)
	return out, nil
}

// FilterSets turns terms into DescribeSecurityGroups filter sets: one per
// tag term, one per name term (group-name, not the Name tag), and one
// holding every id term.
func FilterSets(terms []awsv1.SecurityGroupSelectorTerm) [][]ec2types.Filter {
	var sets [][]ec2types.Filter
	var ids []string
	for _, term := range terms {
		switch {
		case term.ID != "":
			ids = append(ids, term.ID)
		case term.Name != "":
			sets = append(sets, []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{term.Name}}})
		case len(term.Tags) > 0:
			sets = append(sets, subnet.TagFilters(term.Tags))
		}
	}
	if len(ids) > 0 {
		sets = append(sets, []ec2types.Filter{{Name: aws.String("group-id"), Values: ids}})
	}
	return sets
}

// Status converts groups to EC2NodeClass status entries sorted by id, as
// upstream does.
func Status(groups []ec2types.SecurityGroup) []awsv1.SecurityGroup {
	out := make([]awsv1.SecurityGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
