// Package capacityreservation resolves an EC2NodeClass's
// capacityReservationSelectorTerms into EC2 capacity reservations, as
// upstream does, and tracks how many instances each reservation can still
// take. One DescribeCapacityReservations query (state=active) is made for
// all id terms together and one per other term (owner-id,
// instance-match-criteria and tags, "*" meaning any value, ANDed within a
// term); answers are paged, cached for a minute, and unioned with
// duplicates and already-ended reservations dropped.
//
// The availability tracker is seeded from each describe's
// AvailableInstanceCount and then follows Karpenter's own launches and
// terminations between describes (MarkLaunched, MarkTerminated) and EC2's
// refusals and interruptions (MarkUnavailable). The instance-type provider
// reads it to size reserved offerings.
package capacityreservation

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/ttl"
)

// Upstream's intervals.
const (
	// QueryTTL is how long a query's answer is reused (upstream's
	// DefaultTTL).
	QueryTTL = time.Minute
	// AvailabilityTTL is how long a tracked count lives without a describe
	// refreshing it; after that the reservation counts as unknown.
	AvailabilityTTL = 24 * time.Hour
	// ExpirationWindow is how long before its end a capacity block is
	// "expiring": it takes no new instances and its nodes are drained, 10
	// minutes ahead of EC2 reclaiming the instances (30 minutes before the
	// end).
	ExpirationWindow = 40 * time.Minute
)

// PageSize is the MaxResults the provider asks for; EC2 allows 1 to 1000.
var PageSize int32 = 1000

// API is the EC2 call the provider makes.
type API interface {
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

var _ API = (*ec2.Client)(nil)

// Provider lists capacity reservations and tracks their remaining
// instances. It is safe for concurrent use.
type Provider struct {
	ec2     API
	clk     clock.Clock
	queries *ttl.Cache[[]ec2types.CapacityReservation]

	mu    sync.Mutex
	avail map[string]*availability
}

// availability is one reservation's tracked count.
type availability struct {
	available, total int
	expires          time.Time
}

// NewProvider returns a provider over api; clk (the real clock when nil)
// drives the caches and the expiring state.
func NewProvider(api API, clk clock.Clock) *Provider {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Provider{ec2: api, clk: clk, queries: ttl.New[[]ec2types.CapacityReservation](clk.Now), avail: map[string]*availability{}}
}

// Query is one DescribeCapacityReservations request a set of selector
// terms turns into.
type Query struct {
	IDs                   []string
	OwnerID               string
	InstanceMatchCriteria string
	Tags                  map[string]string
}

// Queries turns selector terms into queries: all id terms into one, each
// other term into its own.
func Queries(terms []awsv1.CapacityReservationSelectorTerm) []Query {
	var ids []string
	var out []Query
	for _, t := range terms {
		if t.ID != "" {
			ids = append(ids, t.ID)
			continue
		}
		out = append(out, Query{OwnerID: t.OwnerID, InstanceMatchCriteria: t.InstanceMatchCriteria, Tags: t.Tags})
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		out = append([]Query{{IDs: ids}}, out...)
	}
	return out
}

// Input is the query's request: active reservations only, by id or by the
// term's filters.
func (q Query) Input() *ec2.DescribeCapacityReservationsInput {
	filters := []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}}
	if len(q.IDs) > 0 {
		return &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: q.IDs, Filters: filters, MaxResults: aws.Int32(PageSize)}
	}
	if q.OwnerID != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{q.OwnerID}})
	}
	if q.InstanceMatchCriteria != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{q.InstanceMatchCriteria}})
	}
	keys := make([]string, 0, len(q.Tags))
	for k := range q.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := q.Tags[k]; v == "*" {
			filters = append(filters, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		}
	}
	return &ec2.DescribeCapacityReservationsInput{Filters: filters, MaxResults: aws.Int32(PageSize)}
}

// key is the query's cache key.
func (q Query) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ids=%s;owner=%s;imc=%s;tags=", strings.Join(q.IDs, ","), q.OwnerID, q.InstanceMatchCriteria)
	keys := make([]string, 0, len(q.Tags))
	for k := range q.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q,", k, q.Tags[k])
	}
	return b.String()
}

// List returns the active reservations the terms select, each once, in
// query order, leaving out those whose end has passed. An id term naming a
// reservation EC2 does not know is skipped rather than failing the whole
// list (EC2 refuses the whole request when one id is unknown).
func (p *Provider) List(ctx context.Context, terms ...awsv1.CapacityReservationSelectorTerm) ([]ec2types.CapacityReservation, error) {
	var all []ec2types.CapacityReservation
	for _, q := range Queries(terms) {
		found, err := p.query(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, found...)
	}
	now := p.clk.Now()
	seen := map[string]bool{}
	out := all[:0:0]
	for _, r := range all {
		id := aws.ToString(r.CapacityReservationId)
		if seen[id] || (r.EndDate != nil && !r.EndDate.After(now)) {
			continue
		}
		seen[id] = true
		out = append(out, r)
	}
	return out, nil
}

// query answers one query from the cache or EC2; a fresh answer reseeds
// the availability of what it found.
func (p *Provider) query(ctx context.Context, q Query) ([]ec2types.CapacityReservation, error) {
	key := q.key()
	if found, ok := p.queries.Get(key); ok {
		return found, nil
	}
	found, err := p.describe(ctx, q.Input())
	if isNotFound(err) && len(q.IDs) > 0 {
		// Find which ids EC2 still knows, one request each.
		found, err = nil, nil
		for _, id := range q.IDs {
			one, e := p.describe(ctx, Query{IDs: []string{id}}.Input())
			if isNotFound(e) {
				continue
			}
			if e != nil {
				err = e
				break
			}
			found = append(found, one...)
		}
	}
	if err != nil {
		return nil, err
	}
	p.sync(found)
	p.queries.Set(key, found, QueryTTL)
	return found, nil
}

func (p *Provider) describe(ctx context.Context, in *ec2.DescribeCapacityReservationsInput) ([]ec2types.CapacityReservation, error) {
	var out []ec2types.CapacityReservation
	for pages := ec2.NewDescribeCapacityReservationsPaginator(p.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing capacity reservations (%s): %w", describeInput(in), err)
		}
		out = append(out, page.CapacityReservations...)
	}
	return out, nil
}

func describeInput(in *ec2.DescribeCapacityReservationsInput) string {
	if len(in.CapacityReservationIds) > 0 {
		return "ids " + strings.Join(in.CapacityReservationIds, ",")
	}
	parts := make([]string, 0, len(in.Filters))
	for _, f := range in.Filters {
		parts = append(parts, aws.ToString(f.Name)+"="+strings.Join(f.Values, "|"))
	}
	return strings.Join(parts, " ")
}

func isNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidCapacityReservationId.NotFound"
}

// sync takes EC2's counts as the truth for the reservations described.
func (p *Provider) sync(found []ec2types.CapacityReservation) {
	expires := p.clk.Now().Add(AvailabilityTTL)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range found {
		total := int(aws.ToInt32(r.TotalInstanceCount))
		p.avail[aws.ToString(r.CapacityReservationId)] = &availability{
			available: min(max(int(aws.ToInt32(r.AvailableInstanceCount)), 0), total), total: total, expires: expires,
		}
	}
}

// entry is the live tracked count of id, or nil; the caller holds mu.
func (p *Provider) entry(id string) *availability {
	a, ok := p.avail[id]
	if !ok {
		return nil
	}
	if !p.clk.Now().Before(a.expires) {
		delete(p.avail, id)
		return nil
	}
	return a
}

// Available is how many more instances reservation id can take, and
// whether the provider knows (it has described id in the last
// AvailabilityTTL).
func (p *Provider) Available(id string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.entry(id); a != nil {
		return a.available, true
	}
	return 0, false
}

// MarkLaunched counts an instance launched into reservation id, until the
// next describe reports EC2's own count.
func (p *Provider) MarkLaunched(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.entry(id); a != nil && a.available > 0 {
		a.available--
	}
}

// MarkTerminated hands a terminated instance's place back to reservation
// id, never above its total (a describe may already have counted it).
func (p *Provider) MarkTerminated(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.entry(id); a != nil && a.available < a.total {
		a.available++
	}
}

// MarkUnavailable takes reservation id out of launches (EC2 refused a
// launch into it, or reclaims it) until a describe says otherwise.
func (p *Provider) MarkUnavailable(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.entry(id); a != nil {
		a.available = 0
	}
}

// Status maps reservations to EC2NodeClass status entries, in id order
// (so the status does not churn with EC2's order). A reservation Karpenter
// cannot represent (an instance match criteria other than open or
// targeted) is left out and reported in the error.
func Status(now time.Time, reservations []ec2types.CapacityReservation) ([]awsv1.CapacityReservation, error) {
	var out []awsv1.CapacityReservation
	var errs []error
	for _, r := range reservations {
		cr, err := FromEC2(now, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, cr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, errors.Join(errs...)
}

// FromEC2 is one reservation as a status entry: a capacity block within
// ExpirationWindow of its end is expiring.
func FromEC2(now time.Time, r ec2types.CapacityReservation) (awsv1.CapacityReservation, error) {
	id := aws.ToString(r.CapacityReservationId)
	switch r.InstanceMatchCriteria {
	case ec2types.InstanceMatchCriteriaOpen, ec2types.InstanceMatchCriteriaTargeted:
	default:
		// Guards against criteria EC2 may add later.
		return awsv1.CapacityReservation{}, fmt.Errorf("capacity reservation %s has an unsupported instance match criteria %q", id, r.InstanceMatchCriteria)
	}
	cr := awsv1.CapacityReservation{
		AvailabilityZone:      aws.ToString(r.AvailabilityZone),
		ID:                    id,
		InstanceMatchCriteria: string(r.InstanceMatchCriteria),
		InstanceType:          aws.ToString(r.InstanceType),
		Interruptible:         aws.ToBool(r.Interruptible),
		OwnerID:               aws.ToString(r.OwnerId),
		ReservationType:       awsv1.CapacityReservationTypeDefault,
		State:                 awsv1.CapacityReservationStateActive,
	}
	if r.EndDate != nil {
		// Whole seconds, as the API server stores it, so an unchanged
		// reservation compares equal to the stored status.
		end := metav1.NewTime(r.EndDate.UTC().Truncate(time.Second))
		cr.EndTime = &end
	}
	if r.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
		cr.ReservationType = awsv1.CapacityReservationTypeCapacityBlock
		if r.EndDate != nil && !now.Before(r.EndDate.Add(-ExpirationWindow)) {
			cr.State = awsv1.CapacityReservationStateExpiring
		}
	}
	return cr, nil
}

// NextChange is when the status of reservations next changes by the
// clock alone (a capacity block turning expiring, or a reservation
// ending), zero when never.
func NextChange(now time.Time, reservations []ec2types.CapacityReservation) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, r := range reservations {
		if r.EndDate == nil {
			continue
		}
		consider(*r.EndDate)
		if r.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
			consider(r.EndDate.Add(-ExpirationWindow))
		}
	}
	return next
}
