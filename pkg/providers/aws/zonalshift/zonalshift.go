// Package zonalshift knows which availability zones Amazon Application
// Recovery Controller (ARC) has shifted the cluster's traffic away from, as
// upstream's ENABLE_ZONAL_SHIFT does: it reads the cluster's managed resource
// (GetManagedResource on the EKS cluster's ARN) and keeps the zone IDs of its
// applied zonal shifts that have not expired, and of its applied autoshifts.
// The instance-type provider marks every offering in those zones unavailable,
// so neither provisioning nor consolidation puts capacity there while the
// shift lasts.
//
// Without the setting the provider is the zero value of Shifts: nothing is
// ever shifted.
package zonalshift

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"k8s.io/utils/clock"
)

// API is the ARC call the provider makes.
type API interface {
	GetManagedResource(context.Context, *arczonalshift.GetManagedResourceInput, ...func(*arczonalshift.Options)) (*arczonalshift.GetManagedResourceOutput, error)
}

// EKSAPI finds the cluster's ARN.
type EKSAPI interface {
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// shift is one active shift away from a zone: a zonal shift until it
// expires, an autoshift (no expiry) until ARC ends it.
type shift struct {
	expires time.Time
	applied bool
}

// Provider tracks the shifted zones of one cluster. It is safe for
// concurrent use. A nil *Provider reports nothing shifted.
type Provider struct {
	api        API
	clusterARN string
	clock      clock.Clock

	mu     sync.RWMutex
	shifts map[string]shift // by zone ID
}

// Discover checks that the cluster is registered with ARC zonal shift, as
// upstream does before it enables the feature: the cluster's ARN from EKS
// DescribeCluster, then GetManagedResource on it. An error means the
// setting cannot act; the caller refuses to start.
func Discover(ctx context.Context, eksAPI EKSAPI, api API, clusterName string, clk clock.Clock) (*Provider, error) {
	out, err := eksAPI.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)})
	if err != nil {
		return nil, fmt.Errorf("zonal shift: describing cluster %s for its ARN: %w", clusterName, err)
	}
	if out.Cluster == nil || aws.ToString(out.Cluster.Arn) == "" {
		return nil, fmt.Errorf("zonal shift: EKS reports no ARN for cluster %s", clusterName)
	}
	p := New(api, aws.ToString(out.Cluster.Arn), clk)
	if err := p.Update(ctx); err != nil {
		return nil, fmt.Errorf("cluster not registered to Zonal Shift: %w", err)
	}
	return p, nil
}

// New returns a provider for the cluster ARN; nothing is shifted until the
// first Update.
func New(api API, clusterARN string, clk clock.Clock) *Provider {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Provider{api: api, clusterARN: clusterARN, clock: clk, shifts: map[string]shift{}}
}

// ClusterARN is the managed resource the provider reads.
func (p *Provider) ClusterARN() string { return p.clusterARN }

// Update reads the cluster's active shifts. On failure the previous
// answer stands.
func (p *Provider) Update(ctx context.Context) error {
	out, err := p.api.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(p.clusterARN)})
	if err != nil {
		return fmt.Errorf("getting zonal shifts of %s: %w", p.clusterARN, err)
	}
	shifts := map[string]shift{}
	for _, s := range out.ZonalShifts {
		zone := aws.ToString(s.AwayFrom)
		if zone == "" || s.ExpiryTime == nil {
			continue
		}
		merge(shifts, zone, shift{expires: *s.ExpiryTime, applied: s.AppliedStatus == arctypes.AppliedStatusApplied})
	}
	for _, s := range out.Autoshifts {
		zone := aws.ToString(s.AwayFrom)
		if zone == "" {
			continue
		}
		// An autoshift lasts until ARC ends it; it drops out of the
		// managed resource then.
		merge(shifts, zone, shift{applied: s.AppliedStatus == arctypes.AutoshiftAppliedStatusApplied})
	}
	p.mu.Lock()
	p.shifts = shifts
	p.mu.Unlock()
	return nil
}

// merge keeps, per zone, the shift that holds longest: an applied one over
// one that is not, no expiry over any expiry.
func merge(shifts map[string]shift, zone string, s shift) {
	old, ok := shifts[zone]
	switch {
	case !ok, s.applied && !old.applied:
		shifts[zone] = s
	case s.applied == old.applied && (s.expires.IsZero() || (!old.expires.IsZero() && s.expires.After(old.expires))):
		shifts[zone] = s
	}
}

// IsShifted says whether traffic is shifted away from the zone ID now.
func (p *Provider) IsShifted(zoneID string) bool {
	if p == nil || zoneID == "" {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.active(p.shifts[zoneID])
}

func (p *Provider) active(s shift) bool {
	return s.applied && (s.expires.IsZero() || s.expires.After(p.clock.Now()))
}

// ShiftedZoneIDs are the zone IDs shifted away from now, sorted.
func (p *Provider) ShiftedZoneIDs() []string {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	for zone, s := range p.shifts {
		if p.active(s) {
			out = append(out, zone)
		}
	}
	sort.Strings(out)
	return out
}
