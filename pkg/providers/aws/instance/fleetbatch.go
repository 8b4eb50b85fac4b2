package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/batcher"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
)

// CreateFleet batching, as upstream: launches whose CreateFleet input is
// identical apart from the NodeClaim arrive within FleetBatchIdle of each
// other (at most FleetBatchMax after the first) become one request for N
// instances, handed out one per NodeClaim.
//
// Upstream sends only the shared tags with CreateFleet and tags
// karpenter.sh/nodeclaim after registration, so a crash between the two
// leaves instances no NodeClaim can find; its garbage collection
// terminates them and the NodeClaims launch again. Our Create is
// idempotent instead (a restarted controller adopts the instance by its
// NodeClaim tag), and batching keeps that within what upstream's IAM
// policy allows, which is to tag a running instance only with
// karpenter.sh/nodeclaim, Name and eks:eks-cluster-name. A batched
// CreateFleet tags its instances karpenter.sh/nodeclaim=UnclaimedValue and
// lists the batch's id and NodeClaims (in order) in member tags. Any
// reader can work out from those which NodeClaim an unclaimed instance
// belongs to (assignOwners): the batch's members without a claimed
// instance, in order, take its unclaimed instances in instance-id order,
// the order the live launch hands them out in. So each NodeClaim gets its
// instance as soon as CreateFleet returns, and each instance is then
// claimed by one CreateTags that overwrites karpenter.sh/nodeclaim with
// its NodeClaim's name (EC2 may not know the instance for seconds, which
// the NodeClaim does not wait for). If the controller dies before a claim
// lands, Create claims the one it owns instead of launching, List names it
// so garbage collection keeps it while its NodeClaim waits, the tagging
// controller claims it once its Node registers, and an instance whose
// NodeClaim is gone is listed without one and collected. A launch alone in
// its window sends today's request, with the NodeClaim tag in CreateFleet
// itself.
//
// EC2 allows 50 tags on an instance. A batched instance carries the shared
// tags, karpenter.sh/nodeclaim and the member tags, and the tagging
// controller later adds Name (unless the class's tags have one): the
// member tags get what is left, and launches that cannot name even one
// member go alone.
const (
	// FleetBatchIdle closes a batch window after this long without a new
	// launch (upstream's 35ms).
	FleetBatchIdle = 35 * time.Millisecond
	// FleetBatchMax closes a batch window this long after its first launch.
	FleetBatchMax = time.Second
	// FleetBatchMaxItems caps one batch (upstream's 1000); the tag budget
	// below may split a batch further.
	FleetBatchMaxItems = 1000

	// UnclaimedValue is karpenter.sh/nodeclaim on an instance a batched
	// launch has not handed to its NodeClaim yet. The colon keeps it from
	// ever being a NodeClaim's name.
	UnclaimedValue = "karpenter-go.io:unclaimed"
	// TagLaunchMembersPrefix numbers the tags that list a batch: the
	// batch's id, then its NodeClaims in the order instances go to them,
	// comma-separated.
	TagLaunchMembersPrefix = "karpenter-go.io/launch-members-"

	// MaxTagsPerResource and maxTagValue are EC2's limits.
	MaxTagsPerResource = 50
	maxTagValue        = 256
	// batchIDLength is the length of a batch's id (hex).
	batchIDLength = 16
	// claimConcurrency bounds the CreateTags calls of one batch in flight.
	claimConcurrency = 8
	// unbatchedFor is how long a NodePool launches one NodeClaim per
	// CreateFleet after AWS denied a call only batching makes.
	unbatchedFor = 10 * time.Minute
)

// LaterTags is how many tags may be added to an instance after its
// launch with these tags: karpenter.sh/nodeclaim (a batched launch's
// claim) and Name (the tagging controller), unless the tags have them.
func LaterTags(tags map[string]string) int {
	n := 0
	for _, k := range []string{awsv1.NodeClaimTagKey, "Name"} {
		if _, ok := tags[k]; !ok {
			n++
		}
	}
	return n
}

// launch is one NodeClaim's CreateFleet request, before batching.
type launch struct {
	req    Request
	input  *ec2.CreateFleetInput // TotalTargetCapacity 1, no tags
	tags   map[string]string     // shared by every NodeClaim of the batch
	zoneOf map[string]string     // subnet → zone
	// zoneIDOf maps zones to their ids, for the launch-failure metric
	// (a function of the zone, so not part of the batch key).
	zoneIDOf map[string]string
	imageOf  map[string]string // launch template → image
	// reservationOf maps a reserved launch's templates to the
	// reservations they target.
	reservationOf map[string]string
	// groupsOf maps templates to their security groups (not part of the
	// request: a function of the template).
	groupsOf map[string][]string
}

// hash is the batch key: the whole request but the NodeClaim. The
// capacity type and reservations are named on their own, not only through
// the template names that embed them: a reserved launch must never share
// a fleet with an unreserved one, whose instances would be labelled as in
// a reservation they are not in (or the reverse).
func (l *launch) hash() (string, error) {
	raw, err := json.Marshal(struct {
		Input           *ec2.CreateFleetInput
		Tags            map[string]string
		ImageOf         map[string]string
		CapacityType    string
		ReservationType string
		ReservationOf   map[string]string
	}{l.input, l.tags, l.imageOf, l.req.CapacityType, l.req.ReservationType, l.reservationOf})
	if err != nil {
		return "", fmt.Errorf("encoding the fleet request of nodeclaim %s: %w", l.req.NodeClaimName, err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// launchAll serves one batch window: alone, the plain request; together,
// batched launches of as many NodeClaims as their member tags fit. A
// NodePool whose batched launches AWS refused launches one by one.
func (p *Provider) launchAll(ctx context.Context, ls []*launch) []batcher.Result[*Instance] {
	out := make([]batcher.Result[*Instance], len(ls))
	budget := MaxTagsPerResource - len(ls[0].tags) - LaterTags(ls[0].tags)
	sizes := chunkByTagBudget(ls, budget)
	// Without room for a member tag, the batch is listed in the
	// karpenter.sh/nodeclaim value itself, which every launch carries
	// anyway: such a batch needs no tag an unbatched launch does not.
	inValue := budget < 1 && len(ls[0].tags)+1 <= MaxTagsPerResource
	if inValue {
		sizes = chunkInValue(ls)
	}
	if p.unbatched(ls[0].req.NodePoolName) {
		sizes = chunkByTagBudget(ls, 0)
	}
	var wg sync.WaitGroup
	start := 0
	for _, n := range sizes {
		chunk, res := ls[start:start+n], out[start:start+n]
		start += n
		wg.Add(1)
		go func() {
			defer wg.Done()
			if len(chunk) == 1 {
				inst, err := p.launchOne(ctx, chunk[0])
				res[0] = batcher.Result[*Instance]{Out: inst, Err: err}
				return
			}
			copy(res, p.launchBatch(ctx, chunk, inValue))
		}()
	}
	wg.Wait()
	return out
}

// unbatched: the NodePool's batching is switched off for now.
func (p *Provider) unbatched(nodePool string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.unbatchedUntil[nodePool]
	if ok && !p.clock.Now().Before(until) {
		delete(p.unbatchedUntil, nodePool)
		return false
	}
	return ok
}

// disableBatching switches the NodePool's batching off for unbatchedFor
// after AWS denied operation, a call only batched launches make, and says
// so once per switch (metric, log line via the event).
func (p *Provider) disableBatching(nodePool, operation string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if until, ok := p.unbatchedUntil[nodePool]; ok && now.Before(until) {
		return false
	}
	p.unbatchedUntil[nodePool] = now.Add(unbatchedFor)
	metrics.LaunchBatchingDisabledTotal.WithLabelValues(nodePool, operation).Inc()
	return true
}

// fleetInput is l's request for n instances with tags on everything it
// creates.
func (l *launch) fleetInput(n int, tags map[string]string) *ec2.CreateFleetInput {
	in := *l.input
	spec := *in.TargetCapacitySpecification
	spec.TotalTargetCapacity = aws.Int32(int32(n))
	in.TargetCapacitySpecification = &spec
	t := ec2Tags(tags)
	in.TagSpecifications = []ec2types.TagSpecification{
		{ResourceType: ec2types.ResourceTypeInstance, Tags: t},
		{ResourceType: ec2types.ResourceTypeVolume, Tags: t},
		{ResourceType: ec2types.ResourceTypeFleet, Tags: t},
	}
	return &in
}

// launchOne is an unbatched launch, tagged with its NodeClaim by
// CreateFleet itself.
func (p *Provider) launchOne(ctx context.Context, l *launch) (*Instance, error) {
	tags := Tags(p.clusterName, l.req.NodePoolName, l.req.NodeClaimName, l.req.NodeClassName, l.req.ClassTags)
	if len(tags) > MaxTagsPerResource {
		return nil, cloudprovider.NewCreateError(fmt.Errorf("launching nodeclaim %s: its instance would carry %d tags, more than EC2's %d (the EC2NodeClass has %d)",
			l.req.NodeClaimName, len(tags), MaxTagsPerResource, len(l.req.ClassTags)), "TagLimitExceeded", "The EC2NodeClass has too many tags")
	}
	out, err := p.ec2.CreateFleet(ctx, l.fleetInput(1, tags))
	if err != nil {
		// A launch template deleted behind our back, a throttle that outlived
		// the retries: the lifecycle retries the NodeClaim.
		return nil, launchError(fmt.Errorf("creating fleet for nodeclaim %s: %w", l.req.NodeClaimName, err))
	}
	iced, full, refused := p.recordErrors(out.Errors, l)
	if insts := p.instances(l, out, tags, full); len(insts) > 0 {
		return insts[0], nil
	}
	return nil, l.noInstance(out.Errors, iced, full, refused)
}

// launchError is a CreateFleet call's error as the lifecycle sees it; a
// launch template EC2 no longer has is named, so the caller can ensure it
// again.
func launchError(err error) error {
	if IsLaunchTemplateNotFound(err) {
		return cloudprovider.NewCreateError(&launchTemplateNotFoundError{err}, "LaunchTemplateNotFound", "Launch template not found")
	}
	return cloudprovider.NewCreateError(err, "LaunchFailed", "CreateFleet failed")
}

type launchTemplateNotFoundError struct{ err error }

func (e *launchTemplateNotFoundError) Error() string { return e.err.Error() }
func (e *launchTemplateNotFoundError) Unwrap() error { return e.err }

// IsLaunchTemplateNotFound reports a launch that EC2 refused because a
// launch template it names does not exist (deleted behind the cache's
// back, or not visible yet).
func IsLaunchTemplateNotFound(err error) bool {
	var lt *launchTemplateNotFoundError
	if errors.As(err, &lt) {
		return true
	}
	switch errorCode(err) {
	case "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.VersionNotFound":
		return true
	}
	return false
}

// noInstance is the error of a launch CreateFleet gave no instance to.
func (l *launch) noInstance(errs []ec2types.CreateFleetError, iced []cloudprovider.OfferingKey, full []string, refused bool) error {
	if len(full) > 0 {
		return &reservationsFullError{ids: full, err: cloudprovider.NewInsufficientCapacityError(
			fmt.Errorf("creating fleet for nodeclaim %s: %s", l.req.NodeClaimName, fleetErrors(errs)), iced...)}
	}
	// A zone the placement group refused is unavailable to the group's
	// offerings now, so the NodeClaim is planned again like one that met
	// no capacity.
	if len(iced) > 0 || refused {
		return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("creating fleet for nodeclaim %s: %s", l.req.NodeClaimName, fleetErrors(errs)), iced...)
	}
	for _, e := range errs {
		if IsLaunchTemplateNotFound(&smithy.GenericAPIError{Code: aws.ToString(e.ErrorCode)}) {
			return launchError(fmt.Errorf("creating fleet for nodeclaim %s: %s", l.req.NodeClaimName, fleetErrors(errs)))
		}
	}
	return cloudprovider.NewCreateError(fmt.Errorf("creating fleet for nodeclaim %s: no instance launched: %s", l.req.NodeClaimName, fleetErrors(errs)), "LaunchFailed", fleetErrors(errs))
}

// launchBatch launches len(ls) instances with one CreateFleet and hands
// one to each NodeClaim, in order, claiming them after it returns
// (claimAll); the NodeClaims left without one get
// the fleet's errors (upstream hands out partial fulfilment the same way).
// If AWS denies the batched request, the NodePool stops batching for a
// while and these launches go one by one.
func (p *Provider) launchBatch(ctx context.Context, ls []*launch, inValue bool) []batcher.Result[*Instance] {
	res := make([]batcher.Result[*Instance], len(ls))
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.req.NodeClaimName
	}
	tags := copyTags(ls[0].tags)
	if inValue {
		tags[awsv1.NodeClaimTagKey] = unclaimedValue(newBatchID(), names)
	} else {
		for k, v := range memberTags(newBatchID(), names) {
			tags[k] = v
		}
		tags[awsv1.NodeClaimTagKey] = UnclaimedValue
	}
	out, err := p.ec2.CreateFleet(ctx, ls[0].fleetInput(len(ls), tags))
	if sdk.IsDenied(err) {
		pool := ls[0].req.NodePoolName
		if p.disableBatching(pool, "CreateFleet") {
			for _, l := range ls {
				p.event(l.req.NodeClaimName, corev1.EventTypeWarning, EventLaunchBatchingDisabled,
					fmt.Sprintf("AWS denied a batched CreateFleet; NodePool %s launches one NodeClaim per CreateFleet for %s: %s", pool, unbatchedFor, errorMessage(err)))
			}
		}
		return p.launchEach(ctx, ls)
	}
	if err != nil {
		for i, l := range ls {
			res[i].Err = launchError(fmt.Errorf("creating fleet for nodeclaim %s (batch of %d): %w", l.req.NodeClaimName, len(ls), err))
		}
		return res
	}
	iced, full, refused := p.recordErrors(out.Errors, ls[0])
	insts := p.instances(ls[0], out, tags, full)
	// Instance-id order is the order assignOwners reads back after a crash.
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	for i := len(insts); i < len(ls); i++ {
		res[i].Err = ls[i].noInstance(out.Errors, iced, full, refused)
	}
	if len(insts) == 0 {
		return res
	}
	// Each NodeClaim hears of its instance now, and the claims are written
	// after: the member tags CreateFleet wrote already say which instance
	// is whose to any reader (assignOwners pairs them as this loop does),
	// so a NodeClaim need not wait for EC2 to know its instance before it
	// is Launched. If the controller dies before a claim lands, the
	// NodeClaim's provider ID keeps the instance from garbage collection,
	// List names its owner, a Create run again adopts it, and the tagging
	// controller writes the claim once the Node registers.
	n := min(len(ls), len(insts))
	reqs := make([]Request, n)
	for i := range n {
		reqs[i] = ls[i].req
		res[i] = batcher.Result[*Instance]{Out: handedTo(insts[i], reqs[i].NodeClaimName)}
	}
	p.claims.Add(1)
	go func() {
		defer p.claims.Done()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimsFor)
		defer cancel()
		p.claimAll(cctx, insts[:n], reqs)
	}()
	return res
}

// launchEach launches ls one CreateFleet each, claimConcurrency at a time.
func (p *Provider) launchEach(ctx context.Context, ls []*launch) []batcher.Result[*Instance] {
	res := make([]batcher.Result[*Instance], len(ls))
	sem := make(chan struct{}, claimConcurrency)
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			inst, err := p.launchOne(ctx, l)
			res[i] = batcher.Result[*Instance]{Out: inst, Err: err}
		}()
	}
	wg.Wait()
	return res
}

// EventLaunchBatchingDisabled is the NodeClaim event of a launch that AWS
// denied a call only batching makes.
const EventLaunchBatchingDisabled = "LaunchBatchingDisabled"

// instances are the instances a CreateFleet answer launched, described
// from the request (the answer has no tags, zone, image or reservation);
// full are the reservations the answer found full. Each is remembered, so
// drift and tagging need not describe it.
func (p *Provider) instances(l *launch, out *ec2.CreateFleetOutput, tags map[string]string, full []string) []*Instance {
	var insts []*Instance
	now := p.clock.Now()
	for _, fi := range out.Instances {
		for _, id := range fi.InstanceIds {
			inst := &Instance{
				ID:           id,
				Type:         string(fi.InstanceType),
				CapacityType: capacityTypeOf(fi.Lifecycle),
				State:        "pending",
				Tags:         copyTags(tags),
				LaunchTime:   now,
				Launched:     true,
				// FullReservations: shared read-only by the batch's instances.
				FullReservations: full,
			}
			readBatch(inst)
			complete := false
			if lto := fi.LaunchTemplateAndOverrides; lto != nil {
				if lto.Overrides != nil {
					inst.SubnetID = aws.ToString(lto.Overrides.SubnetId)
					inst.Zone = aws.ToString(lto.Overrides.AvailabilityZone)
					if inst.Zone == "" {
						inst.Zone = l.zoneOf[inst.SubnetID]
					}
				}
				if lto.LaunchTemplateSpecification != nil {
					name := aws.ToString(lto.LaunchTemplateSpecification.LaunchTemplateName)
					inst.ImageID = l.imageOf[name]
					inst.SecurityGroupIDs = l.groupsOf[name]
					complete = len(inst.SecurityGroupIDs) > 0
					if id := l.reservationOf[name]; id != "" {
						inst.CapacityType = CapacityTypeReserved
						inst.CapacityReservationID = id
						inst.CapacityReservationType = l.req.ReservationType
					}
				}
			}
			p.cache.put(inst, now, complete)
			insts = append(insts, inst)
		}
	}
	return insts
}
