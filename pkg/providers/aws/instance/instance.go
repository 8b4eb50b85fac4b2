// Package instance owns the EC2 instances behind NodeClaims: it launches
// them with instant CreateFleet requests (overrides per instance type and
// subnet, price-capacity-optimized for spot, lowest-price for on-demand, or
// their prioritized counterparts when NodeOverlays changed prices, capped at
// MaxInstanceTypes types), tags them with the NodeClaim, NodePool,
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

// PlacementGroupZones hears of the zones a placement group refused a
// launch in (placementgroup.Provider), so the group's offerings there are
// unavailable for a while.
type PlacementGroupZones interface {
	MarkZoneUnavailable(groupID, zone string)
}

// Events records an event on a NodeClaim (by name); the cloud provider
// wires it to the NodeClaim's event recorder.
type Events func(nodeClaim, eventType, reason, message string)

// Option configures a Provider.
type Option func(*Provider)

// WithSubnets tells subnets of the subnets launches found full.
func WithSubnets(subnets Subnets) Option { return func(p *Provider) { p.subnets = subnets } }

// WithPlacementGroupZones tells zones of the zones a placement group
// refused.
func WithPlacementGroupZones(zones PlacementGroupZones) Option {
	return func(p *Provider) { p.groupZones = zones }
}

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
	// PlacementGroupID and PartitionNumber are the instance's placement
	// group and partition (0 when unknown or not a partition group), from
	// DescribeInstances or the launch.
	PlacementGroupID string
	PartitionNumber  int32
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
	// PriceOverlaid: a NodeOverlay set Price. EC2's lowest-price and
	// price-capacity-optimized strategies know only its own prices, so a
	// launch with such an override asks EC2 for the order of Price
	// instead (each override's priority is its price's rank, and the
	// fleet takes the prioritized strategy of its capacity type).
	PriceOverlaid bool
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
	// PlacementGroupID and PlacementGroupStrategy are the group the
	// launch templates place the instance in ("" for none): a zone the
	// group refuses is the group's, not the offering's.
	PlacementGroupID, PlacementGroupStrategy string
}

// Provider launches, finds and terminates the cluster's instances. It is
// safe for concurrent use.
type Provider struct {
	ec2         EC2API
	clusterName string
	unavailable UnavailableOfferings
	subnets     Subnets
	groupZones  PlacementGroupZones
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
	// claims are the batches whose claims are still being written after
	// their NodeClaims got their instances.
	claims sync.WaitGroup
}

// attempt is what a failed Create leaves for the NodeClaim's next one.
type attempt struct {
	at time.Time
	// unclaimed is the instance a batched launch made for the NodeClaim
	// when tagging it failed: the next Create claims it, without asking
	// EC2 (which may not list it yet) or launching again.
	unclaimed *Instance
}

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
		// Once a CreateFleet of the same request has returned while others
		// are on the wire, the launches that follow gather for the next one
		// (up to the one-second window) instead of each opening a small
		// call: in a large scale-up the lifecycle's workers come back a few
		// at a time as calls return, and without the hold the batches stay
		// as small as those returns. A round's own launches, spread over a
		// few windows, all go at once.
		HoldWhileBusy: true,
		Hash:          (*launch).hash, Exec: p.launchAll,
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
		inst.PlacementGroupID = aws.ToString(i.Placement.GroupId)
		inst.PartitionNumber = aws.ToInt32(i.Placement.PartitionNumber)
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
