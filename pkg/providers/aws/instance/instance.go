// Package instance owns the EC2 instances behind NodeClaims: it launches
// them with instant CreateFleet requests (overrides per instance type and
// subnet, price-capacity-optimized for spot, lowest-price for on-demand,
// capped at MaxInstanceTypes types), tags them with the NodeClaim, NodePool,
// EC2NodeClass and cluster, records offerings EC2 had no capacity for in the
// unavailable-offerings cache, and finds and terminates them.
//
// Identical launches arriving together share one CreateFleet (fleetbatch.go,
// as upstream's batcher); DescribeInstances and TerminateInstances by id are
// batched too (calls.go). Create is idempotent per NodeClaim: after a
// restart, or after a failed attempt, it first looks for an instance tagged
// with the NodeClaim's name, or one a batched launch made for it before a
// crash, and returns that instead of launching. What the provider learns of
// an instance (at launch, or from DescribeInstances) is cached, so drift and
// tagging do not poll EC2 per NodeClaim, and an instance asked to terminate
// is polled with a growing interval until it is gone. A reserved launch
// targets its capacity reservations through its launch templates, asks EC2
// for on-demand (capacity-block for a capacity block), and reports the
// reservations EC2 found full instead of caching their offerings
// (FullReservations).
package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"k8s.io/utils/clock"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/batcher"
)

// MaxInstanceTypes caps how many instance types one CreateFleet request
// offers EC2 (upstream's cap); the cheapest are kept.
const MaxInstanceTypes = 60

// Capacity types a launch can ask for.
const (
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
	CapacityTypeReserved = "reserved"
)

// Capacity reservation types (the EC2NodeClass status's reservationType).
const (
	ReservationTypeDefault       = string(awsv1.CapacityReservationTypeDefault)
	ReservationTypeCapacityBlock = string(awsv1.CapacityReservationTypeCapacityBlock)
)

// States counts as "exists": terminated instances are gone.
var States = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// unfulfillableCapacityCodes are the CreateFleet error codes that mean the
// offering cannot launch now (upstream's list): the offering is cached as
// unavailable so the next attempt picks another one.
var unfulfillableCapacityCodes = map[string]bool{
	"InsufficientInstanceCapacity": true,
	"MaxSpotInstanceCountExceeded": true,
	"VcpuLimitExceeded":            true,
	"UnfulfillableCapacity":        true,
	"Unsupported":                  true,
	errNoFreeAddresses:             true,
	"ReservationCapacityExceeded":  true,
}

const (
	errInstanceNotFound  = "InvalidInstanceID.NotFound"
	errNoFreeAddresses   = "InsufficientFreeAddressesInSubnet"
	errReservationIsFull = "ReservationCapacityExceeded"
)

// EC2API is the part of the EC2 client the provider calls.
type EC2API interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
}

// UnavailableOfferings is the insufficient-capacity cache
// (cloudprovider.UnavailableOfferings) that launches feed.
type UnavailableOfferings interface {
	MarkUnavailable(cloudprovider.OfferingKey)
}

// Subnets hears of the subnets EC2 found without a free address
// (subnet.Provider), so the next launch prefers another subnet of the zone.
type Subnets interface {
	MarkExhausted(subnetID string)
}

// Events records an event on a NodeClaim (by name); the cloud provider
// wires it to the NodeClaim's event recorder.
type Events func(nodeClaim, eventType, reason, message string)

// Option configures a Provider.
type Option func(*Provider)

// WithSubnets tells subnets of the subnets launches found full.
func WithSubnets(subnets Subnets) Option { return func(p *Provider) { p.subnets = subnets } }

// WithFleetBatchWindow replaces FleetBatchIdle and FleetBatchMax. Tests
// that assert how launches are batched widen the window, so a loaded
// machine cannot spread concurrent launches over several windows.
func WithFleetBatchWindow(idle, max time.Duration) Option {
	return func(p *Provider) { p.batchIdle, p.batchMax = idle, max }
}

// WithClock replaces the real clock (termination polling, the visibility
// grace, the batching fallback).
func WithClock(c clock.Clock) Option { return func(p *Provider) { p.clock = c } }

// WithEvents records the provider's events on NodeClaims.
func WithEvents(e Events) Option { return func(p *Provider) { p.events = e } }

// Instance is an EC2 instance as Karpenter sees it.
type Instance struct {
	ID           string
	Type         string
	Zone         string
	SubnetID     string
	ImageID      string
	CapacityType string
	State        string
	LaunchTime   time.Time
	// Tags are the instance's tags. An instance a batched launch has not
	// handed to its NodeClaim yet has no karpenter.sh/nodeclaim here
	// (EC2 holds UnclaimedValue under that key); see Unclaimed.
	Tags map[string]string
	// Unclaimed is true for an instance a batched launch made and has not
	// handed to its NodeClaim yet; BatchID names that launch.
	Unclaimed bool
	BatchID   string
	// BatchMembers are the NodeClaims of an unclaimed instance's batch,
	// in the order instances go to them.
	BatchMembers []string
	// batchInValue: the batch lists its members in the unclaimed
	// karpenter.sh/nodeclaim value, not in member tags.
	batchInValue bool
	// SecurityGroupIDs and CapacityReservationID are known from
	// DescribeInstances and from the launch request; drift compares them
	// with the class's resolved status.
	SecurityGroupIDs []string
	// CapacityReservationID is the reservation the instance runs in, or "".
	CapacityReservationID string
	// CapacityReservationType is default or capacity-block for an instance
	// in a reservation.
	CapacityReservationType string
	// Launched is true when this Create launched the instance, false when
	// it found or adopted one launched before (reservation counts must
	// not count it twice).
	Launched bool
	// FullReservations are the capacity reservations CreateFleet reported
	// full (ReservationCapacityExceeded) while launching this instance.
	FullReservations []string
}

// ProviderID is the instance's Kubernetes provider ID.
func (i *Instance) ProviderID() string { return fmt.Sprintf("aws:///%s/%s", i.Zone, i.ID) }

// ParseProviderID returns the instance ID of an aws:///<zone>/<id> provider ID.
func ParseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return "", fmt.Errorf("provider ID %q is not an AWS instance", providerID)
	}
	_, id, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("provider ID %q has no instance ID", providerID)
	}
	return id, nil
}

// Override is one instance type in one subnet, with its price (for the cap).
type Override struct {
	InstanceType string
	Zone         string
	// ZoneID is the zone's id (use1-az1), when known; it labels the
	// launch-failure metric.
	ZoneID   string
	SubnetID string
	Price    float64
}

// LaunchConfig is a launch template and the overrides that launch from it.
type LaunchConfig struct {
	LaunchTemplateName string
	ImageID            string
	// SecurityGroupIDs are the template's groups, which its instances
	// get: the provider remembers them so drift need not ask EC2.
	SecurityGroupIDs []string
	Overrides        []Override
	// CapacityReservationID is the reservation the template targets (a
	// reserved launch), or "".
	CapacityReservationID string
}

// Request is one NodeClaim's launch.
type Request struct {
	NodeClaimName string
	// NodeClaimCreated is the NodeClaim's creation time: a NodeClaim
	// older than this provider's time as the launching leader may have an
	// instance from the previous leader, so Create looks for it first.
	// Zero always looks.
	NodeClaimCreated time.Time
	NodePoolName     string
	NodeClassName    string
	// CapacityType is spot, on-demand or reserved for every override.
	CapacityType string
	// ReservationType is default or capacity-block for a reserved launch:
	// EC2 takes one kind per fleet.
	ReservationType string
	Configs         []LaunchConfig
	// ClassTags are the EC2NodeClass's spec.tags; Karpenter's own tags win.
	ClassTags map[string]string
	// Context is the class's spec.context, EC2 Fleet's reserved Context
	// field ("" sends none).
	Context string
}

// Provider launches, finds and terminates the cluster's instances. It is
// safe for concurrent use.
type Provider struct {
	ec2         EC2API
	clusterName string
	unavailable UnavailableOfferings
	subnets     Subnets
	clock       clock.Clock
	events      Events
	fleets      *batcher.Batcher[*launch, *Instance]
	describes   *batcher.Batcher[string, *Instance]
	terminates  *batcher.Batcher[string, *ec2types.InstanceStateChange]
	// batchIdle and batchMax are the batch window (FleetBatchIdle and
	// FleetBatchMax unless an Option says).
	batchIdle, batchMax time.Duration
	cache               cache

	mu sync.Mutex
	// activeSince is when this provider started launching as the leader
	// (SetActive, else its first Create).
	activeSince time.Time
	// attempts are the NodeClaims whose last Create failed, or whose
	// batched instance is not claimed yet.
	attempts map[string]*attempt
	// terminating are the instances this provider asked EC2 to terminate.
	terminating map[string]*termination
	// unbatchedUntil switches batching off per NodePool after AWS denied a
	// call only batching makes.
	unbatchedUntil map[string]time.Time
	// zoneIDs maps the zones launches named to their ids, for the
	// termination-failure metric (DescribeInstances gives only the zone).
	zoneIDs sync.Map
}

// attempt is what a failed Create leaves for the NodeClaim's next one.
type attempt struct {
	at time.Time
	// unclaimed is the instance a batched launch made for the NodeClaim
	// when tagging it failed: the next Create claims it, without asking
	// EC2 (which may not list it yet) or launching again.
	unclaimed *Instance
}

// termination is an instance this provider asked EC2 to terminate.
type termination struct {
	requested time.Time
	next      time.Time
	interval  time.Duration
}

// Termination polling: an instance asked to terminate is not looked at
// again before terminationPollFirst, then at doubling intervals up to
// terminationPollMax; one still running terminationReissue after the call
// is asked again (the call may have been lost).
const (
	terminationPollFirst = 5 * time.Second
	terminationPollMax   = time.Minute
	terminationReissue   = 2 * time.Minute
)

// Eventual consistency: EC2 may answer "does not exist" about an instance
// for a while after launching it. restartGrace covers the skew between
// the API server's clock (NodeClaim creation) and ours; visibilityGrace is
// how long an unknown instance launched for a NodeClaim is taken for not
// visible yet rather than gone.
const (
	restartGrace    = 5 * time.Second
	visibilityGrace = 2 * time.Minute
	attemptTTL      = time.Hour
)

// NewProvider returns a provider for clusterName's instances; unavailable
// may be nil.
func NewProvider(api EC2API, clusterName string, unavailable UnavailableOfferings, opts ...Option) *Provider {
	p := &Provider{ec2: api, clusterName: clusterName, unavailable: unavailable, batchIdle: FleetBatchIdle, batchMax: FleetBatchMax,
		clock: clock.RealClock{}, attempts: map[string]*attempt{}, terminating: map[string]*termination{}, unbatchedUntil: map[string]time.Time{}}
	for _, o := range opts {
		o(p)
	}
	p.fleets = batcher.New(batcher.Options[*launch, *Instance]{
		IdleTimeout: p.batchIdle, MaxTimeout: p.batchMax, MaxItems: FleetBatchMaxItems,
		Hash: (*launch).hash, Exec: p.launchAll,
		Observe: func(window time.Duration, size int) {
			metrics.BatcherBatchTimeSeconds.WithLabelValues(batcherCreateFleet).Observe(window.Seconds())
			metrics.BatcherBatchSize.WithLabelValues(batcherCreateFleet).Observe(float64(size))
		},
	})
	p.describes = newIDBatcher(batcherDescribeInstances, p.describeIDs)
	p.terminates = newIDBatcher(batcherTerminateInstances, p.terminateIDs)
	return p
}

// SetActive tells the provider it launches for the leader from now on:
// NodeClaims created before then are looked up before launching. Without
// it, the first Create's time counts.
func (p *Provider) SetActive(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.activeSince = at
}

// Tags are the tags of every resource a launch creates: the class's tags,
// then cluster ownership, NodePool, NodeClaim, EKS cluster name and class.
func Tags(clusterName, nodePool, nodeClaim, nodeClass string, classTags map[string]string) map[string]string {
	out := make(map[string]string, len(classTags)+5)
	for k, v := range classTags {
		out[k] = v
	}
	out[awsv1.KubernetesClusterTagKeyPrefix+clusterName] = "owned"
	out[v1.NodePoolLabelKey] = nodePool
	out[awsv1.EKSClusterNameTagKey] = clusterName
	out[awsv1.NodeClassTagKey] = nodeClass
	if nodeClaim != "" {
		out[awsv1.NodeClaimTagKey] = nodeClaim
	}
	return out
}

// Create launches one instance for req. After a restart, or when the
// NodeClaim's last Create failed, it first returns the instance already
// tagged with req's NodeClaim, or claims the one a batched launch made for
// it, instead of launching again. Identical launches arriving together
// share one CreateFleet (fleetbatch.go).
func (p *Provider) Create(ctx context.Context, req Request) (*Instance, error) {
	inst, err := p.create(ctx, req)
	p.settle(req.NodeClaimName, err)
	return inst, err
}

func (p *Provider) create(ctx context.Context, req Request) (*Instance, error) {
	if inst := p.pendingClaim(req.NodeClaimName); inst != nil {
		return p.claim(ctx, inst, req)
	}
	if p.mustLookUp(req) {
		if existing, err := p.findByNodeClaim(ctx, req); err != nil {
			return nil, err
		} else if existing != nil {
			return existing, nil
		}
	}
	l, err := p.newLaunch(req)
	if err != nil {
		return nil, err
	}
	return p.fleets.Add(ctx, l)
}

// mustLookUp: the NodeClaim may already have an instance when this
// provider did not make every attempt for it (it was created before this
// provider became the launching leader) or an attempt failed after EC2
// may have launched (a timeout, a lost answer, a claim not written).
func (p *Provider) mustLookUp(req Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.activeSince.IsZero() {
		p.activeSince = p.clock.Now()
	}
	if _, failed := p.attempts[req.NodeClaimName]; failed {
		return true
	}
	return req.NodeClaimCreated.IsZero() || req.NodeClaimCreated.Before(p.activeSince.Add(restartGrace))
}

// settle records how a Create ended: a failure that may have left an
// instance behind makes the next Create look first. Insufficient capacity
// launched nothing.
func (p *Provider) settle(nodeClaim string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for name, a := range p.attempts {
		if now.Sub(a.at) > attemptTTL {
			delete(p.attempts, name)
		}
	}
	a := p.attempts[nodeClaim]
	switch {
	case err == nil || (cloudprovider.IsInsufficientCapacityError(err) && (a == nil || a.unclaimed == nil)):
		delete(p.attempts, nodeClaim)
	case a == nil:
		p.attempts[nodeClaim] = &attempt{at: now}
	default:
		a.at = now
	}
}

// pendingClaim is the instance a batched launch made for the NodeClaim
// and could not tag, or nil.
func (p *Provider) pendingClaim(nodeClaim string) *Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.attempts[nodeClaim]; a != nil && a.unclaimed != nil {
		return a.unclaimed
	}
	return nil
}

func (p *Provider) setPendingClaim(nodeClaim string, inst *Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.attempts[nodeClaim]
	if a == nil {
		a = &attempt{}
		p.attempts[nodeClaim] = a
	}
	a.at, a.unclaimed = p.clock.Now(), inst
}

func (p *Provider) clearPendingClaim(nodeClaim string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a := p.attempts[nodeClaim]; a != nil {
		a.unclaimed = nil
	}
}

func (p *Provider) event(nodeClaim, eventType, reason, message string) {
	if p.events != nil {
		p.events(nodeClaim, eventType, reason, message)
	}
}

// newLaunch is req's CreateFleet request for one instance, before
// batching: the configs capped at MaxInstanceTypes types, the fleet's
// capacity type and allocation strategy, and the shared tags.
func (p *Provider) newLaunch(req Request) (*launch, error) {
	if req.CapacityType == CapacityTypeReserved && req.ReservationType == "" {
		req.ReservationType = ReservationTypeDefault
	}
	configs := capOverrides(req.Configs, MaxInstanceTypes)
	if len(configs) == 0 {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("all requested instance types were unavailable during launch: no %s offering for nodeclaim %s", req.CapacityType, req.NodeClaimName))
	}
	l := &launch{req: req, zoneOf: map[string]string{}, zoneIDOf: map[string]string{}, imageOf: map[string]string{}, reservationOf: map[string]string{}, groupsOf: map[string][]string{}}
	var ltConfigs []ec2types.FleetLaunchTemplateConfigRequest
	for _, c := range configs {
		if (req.CapacityType == CapacityTypeReserved) != (c.CapacityReservationID != "") {
			return nil, fmt.Errorf("launching nodeclaim %s: launch template %s targets reservation %q in a %s launch", req.NodeClaimName, c.LaunchTemplateName, c.CapacityReservationID, req.CapacityType)
		}
		l.imageOf[c.LaunchTemplateName] = c.ImageID
		l.groupsOf[c.LaunchTemplateName] = c.SecurityGroupIDs
		if c.CapacityReservationID != "" {
			l.reservationOf[c.LaunchTemplateName] = c.CapacityReservationID
		}
		overrides := make([]ec2types.FleetLaunchTemplateOverridesRequest, 0, len(c.Overrides))
		for _, o := range c.Overrides {
			l.zoneOf[o.SubnetID] = o.Zone
			if o.ZoneID != "" {
				l.zoneIDOf[o.Zone] = o.ZoneID
				p.zoneIDs.Store(o.Zone, o.ZoneID)
			}
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType:     ec2types.InstanceType(o.InstanceType),
				SubnetId:         aws.String(o.SubnetID),
				AvailabilityZone: aws.String(o.Zone),
			})
		}
		ltConfigs = append(ltConfigs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: aws.String(c.LaunchTemplateName), Version: aws.String("$Latest"),
			},
			Overrides: overrides,
		})
	}
	// The shared tags only: the NodeClaim's own tag is added per launch,
	// so that identical launches for different NodeClaims hash alike.
	l.tags = Tags(p.clusterName, req.NodePoolName, "", req.NodeClassName, req.ClassTags)
	l.input = &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: ltConfigs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			DefaultTargetCapacityType: targetCapacityType(req),
			TotalTargetCapacity:       aws.Int32(1),
		},
	}
	if req.Context != "" {
		l.input.Context = aws.String(req.Context)
	}
	if req.CapacityType == CapacityTypeSpot {
		l.input.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		l.input.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return l, nil
}

// targetCapacityType is the fleet's DefaultTargetCapacityType: a capacity
// block launches only as capacity-block, and an ordinary reservation is
// on-demand capacity the templates target.
func targetCapacityType(req Request) ec2types.DefaultTargetCapacityType {
	switch {
	case req.CapacityType == CapacityTypeReserved && req.ReservationType == ReservationTypeCapacityBlock:
		return ec2types.DefaultTargetCapacityTypeCapacityBlock
	case req.CapacityType == CapacityTypeReserved:
		return ec2types.DefaultTargetCapacityTypeOnDemand
	}
	return ec2types.DefaultTargetCapacityType(req.CapacityType)
}

// batcherCreateFleet is the batcher label of the CreateFleet batcher.
const batcherCreateFleet = "create_fleet"

// countFailure counts one CreateFleet error entry in
// karpenter_cloudprovider_instance_launch_failures_total, labelled with the
// failed override's zone, zone id and capacity type (those it names, else
// the launch's) and the error code.
func countFailure(e ec2types.CreateFleetError, l *launch) {
	zone, ct := "", l.req.CapacityType
	if lo := e.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
		zone = aws.ToString(lo.Overrides.AvailabilityZone)
		if zone == "" {
			zone = l.zoneOf[aws.ToString(lo.Overrides.SubnetId)]
		}
	}
	if e.Lifecycle != "" && ct != CapacityTypeReserved {
		ct = capacityTypeOf(e.Lifecycle)
	}
	reason := aws.ToString(e.ErrorCode)
	if reason == "" {
		reason = "Unknown"
	}
	metrics.InstanceLaunchFailuresTotal.WithLabelValues(zone, l.zoneIDOf[zone], ct, reason).Inc()
}

// recordErrors marks the offerings CreateFleet had no capacity for as
// unavailable and returns them, with the reservations it found full. A
// subnet out of addresses counts as the zone having no capacity for the
// offering, as upstream: the next launch goes to another zone (or, once
// the cache entry expires, to the zone's fullest-free subnet, which the
// subnet provider now knows this one is not). A full reservation is the
// reservation's business (the caller's tracker), not the offering's: the
// same type may still launch on-demand there.
func (p *Provider) recordErrors(errs []ec2types.CreateFleetError, l *launch) ([]cloudprovider.OfferingKey, []string) {
	var keys []cloudprovider.OfferingKey
	var full []string
	seen := map[cloudprovider.OfferingKey]bool{}
	for _, e := range errs {
		countFailure(e, l)
		if !unfulfillableCapacityCodes[aws.ToString(e.ErrorCode)] || e.LaunchTemplateAndOverrides == nil || e.LaunchTemplateAndOverrides.Overrides == nil {
			continue
		}
		o := e.LaunchTemplateAndOverrides.Overrides
		if aws.ToString(e.ErrorCode) == errNoFreeAddresses && p.subnets != nil && aws.ToString(o.SubnetId) != "" {
			p.subnets.MarkExhausted(aws.ToString(o.SubnetId))
		}
		reservation := l.reservationOfError(e)
		if aws.ToString(e.ErrorCode) == errReservationIsFull {
			if reservation != "" && !slices.Contains(full, reservation) {
				full = append(full, reservation)
			}
			continue
		}
		zone := aws.ToString(o.AvailabilityZone)
		if zone == "" {
			zone = l.zoneOf[aws.ToString(o.SubnetId)]
		}
		ct := l.req.CapacityType
		if e.Lifecycle != "" && ct != CapacityTypeReserved {
			ct = capacityTypeOf(e.Lifecycle)
		}
		key := cloudprovider.OfferingKey{InstanceType: string(o.InstanceType), Zone: zone, CapacityType: ct}
		if seen[key] {
			continue
		}
		seen[key] = true
		keys = append(keys, key)
		if p.unavailable != nil {
			p.unavailable.MarkUnavailable(key)
		}
	}
	return keys, full
}

// reservationOfError is the reservation the failed override's template
// targets, or "".
func (l *launch) reservationOfError(e ec2types.CreateFleetError) string {
	if e.LaunchTemplateAndOverrides == nil || e.LaunchTemplateAndOverrides.LaunchTemplateSpecification == nil {
		return ""
	}
	return l.reservationOf[aws.ToString(e.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName)]
}

// reservationsFullError is an insufficient-capacity error that names the
// reservations CreateFleet found full.
type reservationsFullError struct {
	ids []string
	err error
}

func (e *reservationsFullError) Error() string { return e.err.Error() }
func (e *reservationsFullError) Unwrap() error { return e.err }

// FullReservations are the capacity reservations a failed Create found
// full (ReservationCapacityExceeded); the caller's tracker stops offering
// them.
func FullReservations(err error) []string {
	var rf *reservationsFullError
	if errors.As(err, &rf) {
		return rf.ids
	}
	return nil
}

func fleetErrors(errs []ec2types.CreateFleetError) string {
	if len(errs) == 0 {
		return "CreateFleet returned no instances and no errors"
	}
	parts := make([]string, 0, len(errs))
	seen := map[string]bool{}
	for _, e := range errs {
		s := aws.ToString(e.ErrorCode) + ": " + aws.ToString(e.ErrorMessage)
		if !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}

// capOverrides keeps the overrides of the MaxInstanceTypes cheapest instance
// types (by their cheapest override), dropping configs left empty.
func capOverrides(configs []LaunchConfig, limit int) []LaunchConfig {
	cheapest := map[string]float64{}
	for _, c := range configs {
		for _, o := range c.Overrides {
			if p, ok := cheapest[o.InstanceType]; !ok || o.Price < p {
				cheapest[o.InstanceType] = o.Price
			}
		}
	}
	types := make([]string, 0, len(cheapest))
	for t := range cheapest {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if cheapest[types[i]] != cheapest[types[j]] {
			return cheapest[types[i]] < cheapest[types[j]]
		}
		return types[i] < types[j]
	})
	keep := map[string]bool{}
	for i, t := range types {
		if i >= limit {
			break
		}
		keep[t] = true
	}
	var out []LaunchConfig
	for _, c := range configs {
		var os []Override
		for _, o := range c.Overrides {
			if keep[o.InstanceType] {
				os = append(os, o)
			}
		}
		if len(os) > 0 {
			c.Overrides = os
			out = append(out, c)
		}
	}
	return out
}

// Get returns the live (not terminated) instance with this ID, or a
// NodeClaimNotFoundError. Calls within a short window share one
// DescribeInstances.
func (p *Provider) Get(ctx context.Context, id string) (*Instance, error) {
	inst, err := p.describes.Add(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	if inst == nil || inst.State == string(ec2types.InstanceStateNameTerminated) {
		p.cache.forget(id)
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	p.cache.put(inst, p.clock.Now(), true)
	return inst, nil
}

// Cached returns what the provider knows of the instance when it learnt
// it within maxAge (at launch, or from DescribeInstances), else Get.
// Drift and tagging read instances this way: garbage collection's List
// refreshes every instance every two minutes and a launch records its
// own, so neither makes a call per NodeClaim.
func (p *Provider) Cached(ctx context.Context, id string, maxAge time.Duration) (*Instance, error) {
	if e, ok := p.cache.get(id); ok && e.complete && p.clock.Since(e.at) <= maxAge {
		return e.inst, nil
	}
	return p.Get(ctx, id)
}

// Tagged records tags another writer (the tagging controller) put on
// the instance.
func (p *Provider) Tagged(id string, tags map[string]string) { p.cache.tag(id, tags) }

// List returns the cluster's live instances launched for NodeClaims. An
// instance a batched launch left unclaimed (the controller died before
// tagging it) is named after the NodeClaim that will claim it, so garbage
// collection leaves it to that NodeClaim, and without a name when that
// NodeClaim never will, so it is collected.
func (p *Provider) List(ctx context.Context) ([]*Instance, error) {
	now := p.clock.Now()
	out, err := p.describe(ctx, []ec2types.Filter{
		{Name: aws.String("tag-key"), Values: []string{awsv1.NodeClaimTagKey}},
		{Name: aws.String("tag:" + awsv1.KubernetesClusterTagKeyPrefix + p.clusterName), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: States},
	})
	if err != nil {
		return nil, err
	}
	p.cache.prune(now)
	owners := map[string]map[string]string{}
	for _, inst := range out {
		p.cache.put(inst, now, true)
		if !inst.Unclaimed {
			continue
		}
		if _, ok := owners[inst.BatchID]; !ok {
			if owners[inst.BatchID], err = p.batchOwners(ctx, inst); err != nil {
				return nil, fmt.Errorf("listing launch batch %s: %w", inst.BatchID, err)
			}
		}
		if owner, ok := owners[inst.BatchID][inst.ID]; ok {
			// In memory only: the tag the claim will write.
			inst.Tags[awsv1.NodeClaimTagKey] = owner
		}
	}
	return out, nil
}

// adoptableStates are the states of an instance a NodeClaim may take over:
// one that is stopping, stopped or shutting down would never become its
// node.
var adoptableStates = []string{"pending", "running"}

// findByNodeClaim returns the instance a NodeClaim already has: the live
// one tagged with its name, else the one a batched launch made for it and
// did not hand over (which it claims), or nil. Either must belong to the
// request's NodePool and EC2NodeClass. One DescribeInstances asks for
// both; a batch the NodeClaim was part of costs one more.
func (p *Provider) findByNodeClaim(ctx context.Context, req Request) (*Instance, error) {
	insts, err := p.describe(ctx, []ec2types.Filter{
		{Name: aws.String("tag:" + awsv1.NodeClaimTagKey), Values: []string{req.NodeClaimName, UnclaimedValue, UnclaimedValue + ":*"}},
		{Name: aws.String("tag:" + awsv1.KubernetesClusterTagKeyPrefix + p.clusterName), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: adoptableStates},
	})
	if err != nil {
		return nil, fmt.Errorf("looking up the instance of nodeclaim %s: %w", req.NodeClaimName, err)
	}
	var tagged []*Instance
	byID := map[string]*Instance{}
	batches := map[string]*Instance{}
	for _, inst := range insts {
		if !belongs(inst, req) {
			continue
		}
		if !inst.Unclaimed {
			tagged = append(tagged, inst)
			continue
		}
		byID[inst.ID] = inst
		if slices.Contains(inst.BatchMembers, req.NodeClaimName) {
			batches[inst.BatchID] = inst
		}
	}
	if len(tagged) > 0 {
		// Oldest first: if a duplicate ever happened, keep returning the same one.
		sort.Slice(tagged, func(i, j int) bool { return tagged[i].LaunchTime.Before(tagged[j].LaunchTime) })
		p.cache.put(tagged[0], p.clock.Now(), true)
		return tagged[0], nil
	}
	for batch, of := range batches {
		owners, err := p.batchOwners(ctx, of)
		if err != nil {
			return nil, fmt.Errorf("looking up launch batch %s of nodeclaim %s: %w", batch, req.NodeClaimName, err)
		}
		for id, owner := range owners {
			if inst, ok := byID[id]; ok && owner == req.NodeClaimName {
				p.cache.put(inst, p.clock.Now(), true)
				return p.claim(ctx, inst, req)
			}
		}
	}
	return nil, nil
}

// belongs: the instance was launched for the request's NodePool and
// EC2NodeClass (a NodeClaim name alone could be a deleted one's reused).
func belongs(inst *Instance, req Request) bool {
	return inst.Tags[v1.NodePoolLabelKey] == req.NodePoolName && inst.Tags[awsv1.NodeClassTagKey] == req.NodeClassName
}

func (p *Provider) describe(ctx context.Context, filters []ec2types.Filter) ([]*Instance, error) {
	var out []*Instance
	pager := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: filters})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if live(i) {
					out = append(out, fromEC2(i))
				}
			}
		}
	}
	return out, nil
}

// Delete terminates the instance. It returns a NodeClaimNotFoundError once
// the instance is gone (terminated or unknown); while it shuts down it
// returns nil so the caller asks again.
func (p *Provider) Delete(ctx context.Context, id string) error {
	_, err := p.Terminate(ctx, id, time.Time{})
	return err
}

// Terminate asks EC2 to terminate the instance once, then, on later
// calls, polls it at growing intervals (answering nil in between without
// a call) until EC2 no longer lists it, and then answers
// NodeClaimNotFoundError. It returns the instance from the call that asked
// EC2, so the caller gives a reservation's unit back once. launched is
// when the instance was launched, if known: EC2 may not know an instance
// for a while after launching it, and such an instance is not taken for
// gone within visibilityGrace of its launch.
func (p *Provider) Terminate(ctx context.Context, id string, launched time.Time) (*Instance, error) {
	now := p.clock.Now()
	p.mu.Lock()
	t := p.terminating[id]
	if t != nil && now.Before(t.next) {
		p.mu.Unlock()
		return nil, nil
	}
	p.mu.Unlock()
	if launched.IsZero() {
		if e, ok := p.cache.get(id); ok && e.inst.Launched {
			launched = e.inst.LaunchTime
		}
	}
	if t != nil {
		// Asked before: look whether it is gone yet.
		inst, err := p.Get(ctx, id)
		if cloudprovider.IsNodeClaimNotFoundError(err) {
			p.forgetTermination(id)
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if inst.State == string(ec2types.InstanceStateNameShuttingDown) || now.Sub(t.requested) < terminationReissue {
			p.pollLater(id, now)
			return nil, nil
		}
	}
	change, err := p.terminates.Add(ctx, id)
	if err != nil {
		// The zone comes from the instance cache: the failed call gives none.
		zone := ""
		if e, ok := p.cache.get(id); ok {
			zone = e.inst.Zone
		}
		zoneID, _ := p.zoneIDs.Load(zone)
		zid, _ := zoneID.(string)
		metrics.InstanceTerminationFailuresTotal.WithLabelValues(zone, zid).Inc()
		return nil, fmt.Errorf("terminating instance %s: %w", id, err)
	}
	if change == nil {
		if !launched.IsZero() && now.Sub(launched) < visibilityGrace {
			return nil, fmt.Errorf("terminating instance %s: EC2 does not list it yet %s after its launch", id, now.Sub(launched).Round(time.Second))
		}
		p.forgetTermination(id)
		p.cache.forget(id)
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	if prev := change.PreviousState; prev != nil && prev.Name == ec2types.InstanceStateNameTerminated {
		// EC2 lists terminated instances for a while: this one is gone.
		p.forgetTermination(id)
		p.cache.forget(id)
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s already terminated", id))
	}
	p.mu.Lock()
	p.terminating[id] = &termination{requested: now, next: now.Add(terminationPollFirst), interval: terminationPollFirst}
	p.mu.Unlock()
	if prev := change.PreviousState; prev != nil && prev.Name == ec2types.InstanceStateNameShuttingDown {
		// Someone else (an interruption, an earlier call) terminated it.
		return nil, nil
	}
	inst := &Instance{ID: id, Tags: map[string]string{}}
	if e, ok := p.cache.get(id); ok {
		inst = e.inst
	}
	if change.CurrentState != nil {
		inst.State = string(change.CurrentState.Name)
	}
	return inst, nil
}

// pollLater doubles the instance's polling interval, up to
// terminationPollMax.
func (p *Provider) pollLater(id string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.terminating[id]
	if t == nil {
		return
	}
	t.interval = min(2*t.interval, terminationPollMax)
	t.next = now.Add(t.interval)
}

func (p *Provider) forgetTermination(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.terminating, id)
}

func live(i ec2types.Instance) bool {
	return i.State == nil || (i.State.Name != ec2types.InstanceStateNameTerminated)
}

func fromEC2(i ec2types.Instance) *Instance {
	inst := &Instance{
		ID:           aws.ToString(i.InstanceId),
		Type:         string(i.InstanceType),
		SubnetID:     aws.ToString(i.SubnetId),
		ImageID:      aws.ToString(i.ImageId),
		CapacityType: CapacityTypeOnDemand,
		LaunchTime:   aws.ToTime(i.LaunchTime),
		Tags:         map[string]string{},
	}
	if i.Placement != nil {
		inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	for _, g := range i.SecurityGroups {
		inst.SecurityGroupIDs = append(inst.SecurityGroupIDs, aws.ToString(g.GroupId))
	}
	// An instance in a reservation is reserved capacity (Karpenter only
	// launches into reservations it targets); one whose reservation ended
	// is on-demand again, which is how EC2 reports it.
	if inst.CapacityReservationID = aws.ToString(i.CapacityReservationId); inst.CapacityReservationID != "" {
		inst.CapacityType = CapacityTypeReserved
		inst.CapacityReservationType = ReservationTypeDefault
		if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			inst.CapacityReservationType = ReservationTypeCapacityBlock
		}
	}
	if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		inst.CapacityType = CapacityTypeSpot
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	readBatch(inst)
	return inst
}

func capacityTypeOf(l ec2types.InstanceLifecycle) string {
	if l == ec2types.InstanceLifecycleSpot {
		return CapacityTypeSpot
	}
	return CapacityTypeOnDemand
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
