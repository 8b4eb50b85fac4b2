// Package instancetypes is the AWS instance-type provider: it keeps EC2's
// instance types (DescribeInstanceTypes) and where each is offered
// (DescribeInstanceTypeOfferings), refreshed when its caller ticks it, and
// turns them, per EC2NodeClass, into the solver's instance types with
// offerings per zone of the class's subnets and capacity type (on-demand,
// spot and reserved), each priced and marked available or not.
//
// The per-class list is cached under a key of everything it is computed
// from (the class's relevant spec and status, the EC2 data, the prices), not
// under the NodePool: NodePools sharing an EC2NodeClass share one list, and
// memory does not grow with the number of NodePools. Offerings that ran out
// of capacity (the caller's unavailable-offerings cache) and reservation
// counts are laid over the cached list on each call, copying only the
// instance types they change.
package instancetypes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/interval"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

const (
	// RefreshInterval is how often Tick refreshes instance types and
	// offerings from EC2 (upstream's instance-type controller period).
	RefreshInterval = 12 * time.Hour
	// CacheTTL is how long a computed per-class list is kept after its last
	// use (upstream's instance-types cache TTL, counted from the last use
	// rather than the computation).
	CacheTTL = 5 * time.Minute
	// reservedPriceDivisor makes a reserved offering nearly free but still
	// ordered by its type's on-demand price, as upstream prices them.
	reservedPriceDivisor = 10_000_000
)

// Page sizes the provider asks for (EC2's limits for the two calls).
var (
	InstanceTypesPageSize     int32 = 100
	InstanceTypeOfferingsPage int32 = 1000
)

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
}

// Pricing is where offering prices come from (pricing.Provider).
type Pricing interface {
	OnDemandPrice(instanceType string) (float64, bool)
	SpotPrice(instanceType, zone string) (float64, bool)
	// SeqNum changes whenever prices do.
	SeqNum() uint64
}

// UnavailableOfferings is the insufficient-capacity cache the launch path
// writes (cloudprovider.UnavailableOfferings): the offerings it lists are
// returned with Available=false.
type UnavailableOfferings interface {
	// Keys lists the offerings unavailable now.
	Keys() []cloudprovider.OfferingKey
}

// ReservationCounts reports how many instances a capacity reservation can
// still launch. A reservation it does not know is taken as exhausted: the
// solver must not plan on capacity nobody has counted.
type ReservationCounts interface {
	Available(reservationID string) (int, bool)
}

// ZonalShifts reports the zones ARC has shifted traffic away from
// (zonalshift.Provider): every offering there is unavailable while the
// shift lasts.
type ZonalShifts interface {
	IsShifted(zoneID string) bool
}

// Options configure NewProvider.
type Options struct {
	// Region the instance types are in (the topology.kubernetes.io/region
	// label).
	Region string
	// Settings are VM_MEMORY_OVERHEAD_PERCENT and RESERVED_ENIS.
	Settings instancetype.Settings
	// Unavailable is the insufficient-capacity cache (none when nil).
	Unavailable UnavailableOfferings
	// Reservations counts capacity reservations' remaining instances; when
	// nil, reserved offerings are listed but unavailable.
	Reservations ReservationCounts
	// ZonalShifts makes offerings in shifted zones unavailable (none when
	// nil: ENABLE_ZONAL_SHIFT off).
	ZonalShifts ZonalShifts
	// Clock drives the cache TTL and Tick (the real clock when nil).
	Clock clock.Clock
}

// Provider lists instance types per EC2NodeClass. It is safe for concurrent
// use.
type Provider struct {
	ec2     EC2API
	pricing Pricing
	opts    Options

	// loadMu lets one caller hydrate while concurrent first Lists wait,
	// instead of each fetching every instance type; refreshes hold it too.
	loadMu sync.Mutex
	// fetched is when both were last fetched together (under loadMu).
	fetched time.Time

	mu        sync.RWMutex
	infos     []ec2types.InstanceTypeInfo // sorted by name
	offered   map[string]map[string]bool  // type -> zone -> offered
	infoHash  uint64
	offerHash uint64
	// ticks gates Tick; it has its own lock.
	ticks interval.Gate

	// discovered are memory capacities real nodes reported (discovered.go).
	discoveredMu  sync.Mutex
	discovered    map[string]discovered
	discoveredSeq uint64

	// cacheMu also serializes computing lists, so NodePools asking at once
	// for the same class wait for one computation instead of each doing it.
	cacheMu sync.Mutex
	cache   map[string]*entry
}

// entry is one class's computed list and the overlay last laid over it.
type entry struct {
	base    []*scheduling.InstanceType
	byName  map[string]int
	expires time.Time
	overlay string // fingerprint of the overlay out was built with
	out     []*scheduling.InstanceType
}

// NewProvider builds a provider. Nothing is fetched until the first Tick,
// Refresh or List; the operator ticks it at start, on every replica.
func NewProvider(api EC2API, prices Pricing, opts Options) *Provider {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Provider{ec2: api, pricing: prices, opts: opts, cache: map[string]*entry{}, discovered: map[string]discovered{}}
}

// RetryInterval is how soon Tick tries again after a refresh failed.
const RetryInterval = 5 * time.Minute

// Tick loads instance types and offerings if they are not loaded yet, and
// refreshes them when RefreshInterval has passed since the last refresh.
// A failure keeps the previous data and is retried on the first tick
// RetryInterval later. Lists never wait for a refresh of loaded data: it
// replaces the data when it is complete.
func (p *Provider) Tick(ctx context.Context) error {
	if !p.ticks.Due(p.opts.Clock.Now(), RefreshInterval) {
		return nil
	}
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	// A List that found nothing loaded may have fetched everything just
	// before this first tick: once is enough.
	if !p.fetched.IsZero() && p.opts.Clock.Since(p.fetched) < RefreshInterval {
		return nil
	}
	err := p.refreshLocked(ctx)
	if err != nil {
		p.ticks.RetryAt(p.opts.Clock.Now().Add(RetryInterval))
	}
	return err
}

// Refresh fetches instance types and their offerings now. It holds the
// load lock, so a List that finds nothing loaded yet waits for this fetch
// instead of starting one of its own; a List of loaded data does not take
// that lock and never waits.
func (p *Provider) Refresh(ctx context.Context) error {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	return p.refreshLocked(ctx)
}

func (p *Provider) refreshLocked(ctx context.Context) error {
	err := errors.Join(p.UpdateInstanceTypes(ctx), p.UpdateInstanceTypeOfferings(ctx))
	if err == nil {
		p.fetched = p.opts.Clock.Now()
	}
	return err
}

// Loaded reports whether instance types and offerings have been fetched,
// so Lists answer without calling EC2.
func (p *Provider) Loaded() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.infos != nil && p.offered != nil
}

// UpdateInstanceTypes fetches the HVM x86_64 and arm64 instance types.
func (p *Provider) UpdateInstanceTypes(ctx context.Context) error {
	in := &ec2.DescribeInstanceTypesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
			{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
		},
		MaxResults: aws.Int32(InstanceTypesPageSize),
	}
	var infos []ec2types.InstanceTypeInfo
	for pages := ec2.NewDescribeInstanceTypesPaginator(p.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing instance types: %w", err)
		}
		infos = append(infos, page.InstanceTypes...)
	}
	if len(infos) == 0 {
		return fmt.Errorf("describing instance types: none returned")
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].InstanceType < infos[j].InstanceType })
	h, err := hashJSON(infos)
	if err != nil {
		return fmt.Errorf("hashing instance types: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.infos == nil || h != p.infoHash {
		p.infos, p.infoHash = infos, h
		log.FromContext(ctx).V(1).Info("discovered instance types", "count", len(infos))
	}
	return nil
}

// UpdateInstanceTypeOfferings fetches which zones offer which types.
func (p *Provider) UpdateInstanceTypeOfferings(ctx context.Context) error {
	in := &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		MaxResults:   aws.Int32(InstanceTypeOfferingsPage),
	}
	offered := map[string]map[string]bool{}
	n := 0
	for pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			it, zone := string(o.InstanceType), aws.ToString(o.Location)
			if offered[it] == nil {
				offered[it] = map[string]bool{}
			}
			offered[it][zone] = true
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("describing instance type offerings: none returned")
	}
	h, err := hashJSON(offered) // map keys are sorted by encoding/json
	if err != nil {
		return fmt.Errorf("hashing instance type offerings: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.offered == nil || h != p.offerHash {
		p.offered, p.offerHash = offered, h
		log.FromContext(ctx).V(1).Info("discovered offerings for instance types", "count", n)
	}
	return nil
}

// ensureLoaded fetches what is missing of EC2's data, so a List before the
// start-up load finished (or after it failed) works. Once loaded it returns
// at once, without the load lock a refresh may hold.
func (p *Provider) ensureLoaded(ctx context.Context) error {
	if p.Loaded() {
		return nil
	}
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	p.mu.RLock()
	needInfos, needOffered := p.infos == nil, p.offered == nil
	p.mu.RUnlock()
	var errs []error
	if needInfos {
		errs = append(errs, p.UpdateInstanceTypes(ctx))
	}
	if needOffered {
		errs = append(errs, p.UpdateInstanceTypeOfferings(ctx))
	}
	err := errors.Join(errs...)
	if err == nil && needInfos && needOffered {
		p.fetched = p.opts.Clock.Now()
	}
	return err
}

// List returns the instance types nodeClass may launch: those offered in
// at least one zone of its subnets, with an offering per such zone and
// capacity type (and per selected capacity reservation). The result is
// shared between callers and must not be modified.
func (p *Provider) List(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]*scheduling.InstanceType, error) {
	if err := p.ensureLoaded(ctx); err != nil {
		return nil, err
	}
	p.mu.RLock()
	infos, offered, infoHash, offerHash := p.infos, p.offered, p.infoHash, p.offerHash
	p.mu.RUnlock()

	key, err := cacheKey(nodeClass, infoHash, offerHash, p.pricing.SeqNum())
	if err != nil {
		return nil, err
	}
	var unavailable []cloudprovider.OfferingKey
	if p.opts.Unavailable != nil {
		unavailable = p.opts.Unavailable.Keys()
	}
	counts := p.reservationCounts(nodeClass)
	shifted := p.shiftedZones(nodeClass)
	memory, memorySeq := p.discoveredFor(nodeClass)

	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	now := p.opts.Clock.Now()
	e, ok := p.cache[key]
	if ok && now.Before(e.expires) {
		// The key covers every input, so a list in use cannot go stale:
		// its expiry only frees lists nobody asks for any more, and a list
		// in use is never recomputed in a round.
		e.expires = now.Add(CacheTTL)
	} else {
		base, err := p.compute(ctx, nodeClass, infos, offered)
		if err != nil {
			return nil, err
		}
		p.pruneLocked(now)
		e = &entry{base: base, byName: make(map[string]int, len(base)), expires: now.Add(CacheTTL)}
		for i, it := range base {
			e.byName[it.Name] = i
		}
		p.cache[key] = e
	}
	fp := overlayFingerprint(unavailable, counts, shifted) + fmt.Sprintf("|mem:%d/%d", memorySeq, len(memory))
	if e.out == nil || e.overlay != fp {
		e.out, e.overlay = e.applyOverlay(unavailable, counts, shifted, memory), fp
	}
	return e.out, nil
}

// pruneLocked drops expired lists so classes that changed or went away do
// not hold memory.
func (p *Provider) pruneLocked(now time.Time) {
	for k, e := range p.cache {
		if !now.Before(e.expires) {
			delete(p.cache, k)
		}
	}
}

// reservationCounts are the remaining counts of nodeClass's reservations,
// by ID (absent when unknown).
func (p *Provider) reservationCounts(nodeClass *awsv1.EC2NodeClass) map[string]int {
	if p.opts.Reservations == nil || len(nodeClass.Status.CapacityReservations) == 0 {
		return nil
	}
	out := map[string]int{}
	for _, r := range nodeClass.Status.CapacityReservations {
		if n, ok := p.opts.Reservations.Available(r.ID); ok {
			out[r.ID] = n
		}
	}
	return out
}

// shiftedZones are the names of the class's zones that a zonal shift has
// traffic away from now.
func (p *Provider) shiftedZones(nodeClass *awsv1.EC2NodeClass) map[string]bool {
	if p.opts.ZonalShifts == nil {
		return nil
	}
	var out map[string]bool
	for _, z := range classZones(nodeClass) {
		if p.opts.ZonalShifts.IsShifted(z.ID) {
			if out == nil {
				out = map[string]bool{}
			}
			out[z.Name] = true
		}
	}
	return out
}

// cacheKey covers every input of the computed list: the parts of the class
// that change capacity, requirements or offerings, and the versions of the
// EC2 data and prices.
func cacheKey(nc *awsv1.EC2NodeClass, infoHash, offerHash, priceSeq uint64) (string, error) {
	h, err := hashJSON(struct {
		Family               string
		Kubelet              any
		BlockDeviceMappings  any
		InstanceStorePolicy  any
		NetworkInterfaces    any
		Zones                []instancetype.Zone
		CapacityReservations []awsv1.CapacityReservation
		ConnectionTracking   bool
		CPUOptions           any
	}{
		nc.AMIFamily(), nc.Spec.Kubelet, nc.Spec.BlockDeviceMappings, nc.Spec.InstanceStorePolicy,
		nc.Spec.NetworkInterfaces, classZones(nc), nc.Status.CapacityReservations,
		nc.Spec.ConnectionTracking != nil, nc.Spec.CPUOptions,
	})
	if err != nil {
		return "", fmt.Errorf("hashing EC2NodeClass %s: %w", nc.Name, err)
	}
	return fmt.Sprintf("%x/%x/%x/%d", h, infoHash, offerHash, priceSeq), nil
}

func overlayFingerprint(unavailable []cloudprovider.OfferingKey, counts map[string]int, shifted map[string]bool) string {
	var b strings.Builder
	zones := make([]string, 0, len(shifted))
	for z := range shifted {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	b.WriteString("shifted:" + strings.Join(zones, ",") + ";")
	for _, k := range unavailable {
		b.WriteString(k.InstanceType + "/" + k.Zone + "/" + k.CapacityType + ";")
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		b.WriteString("|" + id + "=" + strconv.Itoa(counts[id]))
	}
	return b.String()
}

// classZones are the zones of the class's subnets, sorted, with their IDs.
func classZones(nc *awsv1.EC2NodeClass) []instancetype.Zone {
	byName := map[string]string{}
	for _, s := range nc.Status.Subnets {
		if id, ok := byName[s.Zone]; !ok || id == "" {
			byName[s.Zone] = s.ZoneID
		}
	}
	out := make([]instancetype.Zone, 0, len(byName))
	for name, id := range byName {
		out = append(out, instancetype.Zone{Name: name, ID: id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func hashJSON(v any) (uint64, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	h.Write(raw)
	return h.Sum64(), nil
}
