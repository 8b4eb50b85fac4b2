// Package subnet resolves an EC2NodeClass's subnetSelectorTerms into EC2
// subnets, as upstream does: one DescribeSubnets query per term (tags, with
// "*" meaning any value, ANDed within a term) plus one for all id terms,
// results unioned, cached for SUBNET_REFRESH_INTERVAL. For launches it
// picks the subnet with the most free addresses per zone, counting the
// addresses launches in flight will take before DescribeSubnets shows them
// (upstream's inflight IPs).
package subnet

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/selector"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/ttl"
)

// API is the part of the EC2 client the provider calls.
type API interface {
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
}

// PageSize is the MaxResults the provider asks for; EC2 allows 5 to 1000.
var PageSize int32 = 1000

// Provider lists subnets for selector terms. It is safe for concurrent use.
type Provider struct {
	ec2   API
	ttl   time.Duration
	cache *ttl.Cache[[]ec2types.Subnet]

	mu sync.Mutex
	// inflight is a subnet's free-address count as launches since the last
	// DescribeSubnets left it; DescribeSubnets' own count replaces it.
	inflight map[string]int32
	// exhausted are the subnets EC2 refused a launch for want of
	// addresses since the last DescribeSubnets: they stay at zero.
	exhausted map[string]bool
}

// NewProvider returns a provider caching answers for refresh
// (SUBNET_REFRESH_INTERVAL, 1m by default).
func NewProvider(api API, refresh time.Duration) *Provider {
	return &Provider{ec2: api, ttl: refresh, cache: ttl.New[[]ec2types.Subnet](nil),
		inflight: map[string]int32{}, exhausted: map[string]bool{}}
}

// List returns the subnets nodeClass selects, deduplicated, in EC2's order
// per query.
func (p *Provider) List(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]ec2types.Subnet, error) {
	filterSets := FilterSets(nodeClass.Spec.SubnetSelectorTerms)
	if len(filterSets) == 0 {
		return nil, nil
	}
	key := selector.Key(filterSets)
	if subnets, ok := p.cache.Get(key); ok {
		return subnets, nil
	}
	out, err := selector.Union(ctx, filterSets,
		func(filters []ec2types.Filter) selector.Pager[*ec2.DescribeSubnetsOutput] {
			return ec2.NewDescribeSubnetsPaginator(p.ec2, &ec2.DescribeSubnetsInput{Filters: filters, MaxResults: aws.Int32(PageSize)})
		},
		func(page *ec2.DescribeSubnetsOutput) []ec2types.Subnet { return page.Subnets },
		func(s ec2types.Subnet) string { return aws.ToString(s.SubnetId) })
	if err != nil {
		return nil, fmt.Errorf("describing subnets %w", err)
	}
	// EC2's counts now include the launches tracked so far.
	p.mu.Lock()
	for _, s := range out {
		delete(p.inflight, aws.ToString(s.SubnetId))
		delete(p.exhausted, aws.ToString(s.SubnetId))
	}
	p.mu.Unlock()
	p.cache.Set(key, out, p.ttl)
	return out, nil
}

// ZonalSubnetsForLaunch maps each zone of the class's subnets to the one
// with the most free addresses (ties by id), as upstream, and counts one
// address of each as taken until UpdateInflightIPs hears where the launch
// went: concurrent launches then spread over a zone's subnets instead of
// all picking the one a stale count favours. Upstream predicts the pods'
// addresses too (VPC CNI); here an instance takes one, as in the local AWS.
func (p *Provider) ZonalSubnetsForLaunch(ctx context.Context, nodeClass *awsv1.EC2NodeClass) (map[string]string, error) {
	subnets, err := p.List(ctx, nodeClass)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	best := map[string]ec2types.Subnet{}
	for _, s := range subnets {
		zone := aws.ToString(s.AvailabilityZone)
		prev, ok := best[zone]
		if !ok {
			best[zone] = s
			continue
		}
		a, b := p.free(s), p.free(prev)
		if a > b || (a == b && aws.ToString(s.SubnetId) < aws.ToString(prev.SubnetId)) {
			best[zone] = s
		}
	}
	out := make(map[string]string, len(best))
	for zone, s := range best {
		id := aws.ToString(s.SubnetId)
		out[zone] = id
		if !p.exhausted[id] {
			p.inflight[id] = p.free(s) - 1
		}
	}
	return out, nil
}

// free is s's free-address count as tracked since DescribeSubnets.
func (p *Provider) free(s ec2types.Subnet) int32 {
	if n, ok := p.inflight[aws.ToString(s.SubnetId)]; ok {
		return n
	}
	return aws.ToInt32(s.AvailableIpAddressCount)
}

// UpdateInflightIPs hands back the addresses ZonalSubnetsForLaunch counted
// in the subnets (zone → id) the launch did not use; launched is the
// subnet it did use, "" when it launched nothing. The used address stays
// counted until the next DescribeSubnets shows it.
func (p *Provider) UpdateInflightIPs(chosen map[string]string, launched string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range chosen {
		if id == launched || p.exhausted[id] {
			continue
		}
		// Gone when DescribeSubnets has refreshed the count meanwhile.
		if n, ok := p.inflight[id]; ok {
			p.inflight[id] = n + 1
		}
	}
}

// MarkExhausted records that EC2 found no free address in the subnet: it
// counts as empty, and so comes last in its zone, until DescribeSubnets
// says otherwise.
func (p *Provider) MarkExhausted(subnetID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[subnetID] = 0
	p.exhausted[subnetID] = true
}

// Invalidate drops cached answers, e.g. after a launch consumed addresses.
func (p *Provider) Invalidate() { p.cache.Flush() }

// FilterSets turns terms into DescribeSubnets filter sets: one per tag term
// and one holding every id term.
func FilterSets(terms []awsv1.SubnetSelectorTerm) [][]ec2types.Filter {
	var sets [][]ec2types.Filter
	var ids []string
	for _, term := range terms {
		if term.ID != "" {
			ids = append(ids, term.ID)
			continue
		}
		if len(term.Tags) > 0 {
			sets = append(sets, TagFilters(term.Tags))
		}
	}
	if len(ids) > 0 {
		sets = append(sets, []ec2types.Filter{{Name: aws.String("subnet-id"), Values: ids}})
	}
	return sets
}

// TagFilters are EC2 filters for a tag selector: "*" matches any value of
// the key (tag-key), anything else the exact value (tag:<key>). Keys are
// sorted so equal selectors give equal filters (and cache keys).
func TagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Filter
	for _, k := range keys {
		if v := tags[k]; v == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return out
}

// Status converts subnets to EC2NodeClass status entries, sorted as
// upstream: most available addresses first, then by id.
func Status(subnets []ec2types.Subnet) []awsv1.Subnet {
	sorted := append([]ec2types.Subnet(nil), subnets...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := aws.ToInt32(sorted[i].AvailableIpAddressCount), aws.ToInt32(sorted[j].AvailableIpAddressCount)
		if a != b {
			return a > b
		}
		return aws.ToString(sorted[i].SubnetId) < aws.ToString(sorted[j].SubnetId)
	})
	out := make([]awsv1.Subnet, 0, len(sorted))
	for _, s := range sorted {
		out = append(out, awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)})
	}
	return out
}
