package instance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/batcher"
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
// NodeClaim tag), and batching keeps that: a batched CreateFleet tags its
// instances with the batch's id, the NodeClaims it was for (in order) and
// launch-state=unclaimed; each instance is then claimed by one CreateTags
// (karpenter.sh/nodeclaim and launch-state=claimed) before its NodeClaim
// hears of it. If the controller dies in between, any reader can work out
// which NodeClaim an unclaimed instance belongs to (assignOwners): the
// batch's members without a claimed instance, in order, take its unclaimed
// instances in instance-id order, the order the live launch hands them out
// in. Create claims the one it owns instead of launching, List names it so
// garbage collection keeps it while its NodeClaim waits, and an instance
// whose NodeClaim is gone is listed without one and collected. A launch
// alone in its window sends today's request, with the NodeClaim tag in
// CreateFleet itself.
const (
	// FleetBatchIdle closes a batch window after this long without a new
	// launch (upstream's 35ms).
	FleetBatchIdle = 35 * time.Millisecond
	// FleetBatchMax closes a batch window this long after its first launch.
	FleetBatchMax = time.Second
	// FleetBatchMaxItems caps one batch (upstream's 1000); the tag budget
	// below may split a batch further.
	FleetBatchMaxItems = 1000

	// TagLaunchBatch is a batched launch's id on its instances.
	TagLaunchBatch = "karpenter-go.io/launch-batch"
	// TagLaunchState is "unclaimed" from a batched launch until the
	// instance's NodeClaim tag is written, then "claimed".
	TagLaunchState = "karpenter-go.io/launch-state"
	// TagLaunchMembersPrefix numbers the tags that list the batch's
	// NodeClaims, comma-separated, in the order instances go to them.
	TagLaunchMembersPrefix = "karpenter-go.io/launch-members-"

	launchUnclaimed = "unclaimed"
	launchClaimed   = "claimed"

	// maxTagsPerResource and maxTagValue are EC2's limits.
	maxTagsPerResource = 50
	maxTagValue        = 256
	// claimConcurrency bounds the CreateTags calls of one batch in flight.
	claimConcurrency = 8
)

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
// batched launches of as many NodeClaims as their member tags fit.
func (p *Provider) launchAll(ctx context.Context, ls []*launch) []batcher.Result[*Instance] {
	out := make([]batcher.Result[*Instance], len(ls))
	var wg sync.WaitGroup
	start := 0
	for _, n := range chunkByTagBudget(ls, maxTagsPerResource-len(ls[0].tags)-2) {
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
			copy(res, p.launchBatch(ctx, chunk))
		}()
	}
	wg.Wait()
	return out
}

// chunkByTagBudget splits ls into runs whose NodeClaim names fit in
// budget member tags; it returns the runs' lengths.
func chunkByTagBudget(ls []*launch, budget int) []int {
	var sizes []int
	if budget < 1 {
		// The class's own tags leave no room to name the members: every
		// launch goes alone, tagged in CreateFleet.
		for range ls {
			sizes = append(sizes, 1)
		}
		return sizes
	}
	n, tags, value := 0, 0, 0
	for _, l := range ls {
		name := len(l.req.NodeClaimName)
		switch {
		case n > 0 && value+1+name <= maxTagValue:
			value += 1 + name
		case tags < budget:
			tags, value = tags+1, name
		default:
			sizes = append(sizes, n)
			n, tags, value = 0, 1, name
		}
		n++
	}
	if n > 0 {
		sizes = append(sizes, n)
	}
	return sizes
}

// memberTags lists names in as few values of at most maxTagValue
// characters as fit, under numbered keys.
func memberTags(names []string) map[string]string {
	out := map[string]string{}
	var cur []string
	size := 0
	flush := func() {
		if len(cur) > 0 {
			out[TagLaunchMembersPrefix+strconv.Itoa(len(out))] = strings.Join(cur, ",")
		}
		cur, size = nil, 0
	}
	for _, n := range names {
		if len(cur) > 0 && size+1+len(n) > maxTagValue {
			flush()
		}
		if len(cur) > 0 {
			size++
		}
		cur, size = append(cur, n), size+len(n)
	}
	flush()
	return out
}

// members reads the batch's NodeClaims back from an instance's tags.
func members(tags map[string]string) []string {
	var out []string
	for i := 0; ; i++ {
		v, ok := tags[TagLaunchMembersPrefix+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, strings.Split(v, ",")...)
	}
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
	out, err := p.ec2.CreateFleet(ctx, l.fleetInput(1, tags))
	if err != nil {
		// A launch template deleted behind our back, a throttle that outlived
		// the retries: the lifecycle retries the NodeClaim.
		return nil, cloudprovider.NewCreateError(fmt.Errorf("creating fleet for nodeclaim %s: %w", l.req.NodeClaimName, err), "LaunchFailed", "CreateFleet failed")
	}
	iced, full := p.recordErrors(out.Errors, l)
	if insts := l.instances(out, tags, full); len(insts) > 0 {
		return insts[0], nil
	}
	return nil, l.noInstance(out.Errors, iced, full)
}

// noInstance is the error of a launch CreateFleet gave no instance to.
func (l *launch) noInstance(errs []ec2types.CreateFleetError, iced []cloudprovider.OfferingKey, full []string) error {
	if len(full) > 0 {
		return &reservationsFullError{ids: full, err: cloudprovider.NewInsufficientCapacityError(
			fmt.Errorf("creating fleet for nodeclaim %s: %s", l.req.NodeClaimName, fleetErrors(errs)), iced...)}
	}
	if len(iced) > 0 {
		return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("creating fleet for nodeclaim %s: %s", l.req.NodeClaimName, fleetErrors(errs)), iced...)
	}
	return cloudprovider.NewCreateError(fmt.Errorf("creating fleet for nodeclaim %s: no instance launched: %s", l.req.NodeClaimName, fleetErrors(errs)), "LaunchFailed", fleetErrors(errs))
}

// launchBatch launches len(ls) instances with one CreateFleet and claims
// one for each NodeClaim, in order; the NodeClaims left without one get
// the fleet's errors (upstream hands out partial fulfilment the same way).
func (p *Provider) launchBatch(ctx context.Context, ls []*launch) []batcher.Result[*Instance] {
	res := make([]batcher.Result[*Instance], len(ls))
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.req.NodeClaimName
	}
	tags := map[string]string{}
	for k, v := range ls[0].tags {
		tags[k] = v
	}
	for k, v := range memberTags(names) {
		tags[k] = v
	}
	tags[TagLaunchBatch] = uuid.NewString()
	tags[TagLaunchState] = launchUnclaimed
	out, err := p.ec2.CreateFleet(ctx, ls[0].fleetInput(len(ls), tags))
	if err != nil {
		for i, l := range ls {
			res[i].Err = cloudprovider.NewCreateError(fmt.Errorf("creating fleet for nodeclaim %s (batch of %d): %w", l.req.NodeClaimName, len(ls), err), "LaunchFailed", "CreateFleet failed")
		}
		return res
	}
	iced, full := p.recordErrors(out.Errors, ls[0])
	insts := ls[0].instances(out, tags, full)
	// Instance-id order is the order assignOwners reads back after a crash.
	sort.Slice(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	sem := make(chan struct{}, claimConcurrency)
	var wg sync.WaitGroup
	for i, l := range ls {
		if i >= len(insts) {
			res[i].Err = l.noInstance(out.Errors, iced, full)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			inst, err := p.claim(ctx, insts[i], l.req.NodeClaimName)
			res[i] = batcher.Result[*Instance]{Out: inst, Err: err}
		}()
	}
	wg.Wait()
	return res
}

// instances are the instances a CreateFleet answer launched, described
// from the request (the answer has no tags, zone, image or reservation);
// full are the reservations the answer found full.
func (l *launch) instances(out *ec2.CreateFleetOutput, tags map[string]string, full []string) []*Instance {
	var insts []*Instance
	for _, fi := range out.Instances {
		for _, id := range fi.InstanceIds {
			inst := &Instance{
				ID:           id,
				Type:         string(fi.InstanceType),
				CapacityType: capacityTypeOf(fi.Lifecycle),
				State:        "pending",
				Tags:         map[string]string{},
				LaunchTime:   time.Now(),
				Launched:     true,
				// FullReservations: shared read-only by the batch's instances.
				FullReservations: full,
			}
			for k, v := range tags {
				inst.Tags[k] = v
			}
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
					if id := l.reservationOf[name]; id != "" {
						inst.CapacityType = CapacityTypeReserved
						inst.CapacityReservationID = id
						inst.CapacityReservationType = l.req.ReservationType
					}
				}
			}
			insts = append(insts, inst)
		}
	}
	return insts
}

// claim tags inst with its NodeClaim. Until it succeeds the instance stays
// unclaimed, and the NodeClaim's next Create claims it (claimUnclaimed).
func (p *Provider) claim(ctx context.Context, inst *Instance, nodeClaim string) (*Instance, error) {
	_, err := p.ec2.CreateTags(ctx, &ec2.CreateTagsInput{
		Resources: []string{inst.ID},
		Tags: []ec2types.Tag{
			{Key: aws.String(awsv1.NodeClaimTagKey), Value: aws.String(nodeClaim)},
			{Key: aws.String(TagLaunchState), Value: aws.String(launchClaimed)},
		},
	})
	if err != nil {
		return nil, cloudprovider.NewCreateError(fmt.Errorf("tagging instance %s with nodeclaim %s: %w", inst.ID, nodeClaim, err), "LaunchFailed", "CreateTags failed")
	}
	out := *inst
	out.Tags = map[string]string{}
	for k, v := range inst.Tags {
		out.Tags[k] = v
	}
	out.Tags[awsv1.NodeClaimTagKey] = nodeClaim
	out.Tags[TagLaunchState] = launchClaimed
	return &out, nil
}

// claimUnclaimed claims the instance a batched launch made for nodeClaim
// and never tagged (the controller died in between), or returns nil.
func (p *Provider) claimUnclaimed(ctx context.Context, nodeClaim string) (*Instance, error) {
	unclaimed, err := p.unclaimed(ctx)
	if err != nil {
		return nil, fmt.Errorf("looking up unclaimed instances for nodeclaim %s: %w", nodeClaim, err)
	}
	byID := map[string]*Instance{}
	batches := map[string]bool{}
	for _, inst := range unclaimed {
		byID[inst.ID] = inst
		for _, m := range members(inst.Tags) {
			if m == nodeClaim {
				batches[inst.Tags[TagLaunchBatch]] = true
			}
		}
	}
	for batch := range batches {
		owners, err := p.batchOwners(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("looking up launch batch %s of nodeclaim %s: %w", batch, nodeClaim, err)
		}
		for id, owner := range owners {
			if inst, live := byID[id]; live && owner == nodeClaim {
				return p.claim(ctx, inst, nodeClaim)
			}
		}
	}
	return nil, nil
}

// unclaimed are the cluster's live instances a batched launch has not
// handed out yet.
func (p *Provider) unclaimed(ctx context.Context) ([]*Instance, error) {
	return p.describe(ctx, []ec2types.Filter{
		{Name: aws.String("tag:" + TagLaunchState), Values: []string{launchUnclaimed}},
		{Name: aws.String("tag:" + awsv1.KubernetesClusterTagKeyPrefix + p.clusterName), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: States},
	})
}

// batchOwners maps the batch's unclaimed instances to their NodeClaims.
// Terminated instances count (EC2 lists them for about an hour): a
// collected instance keeps its owner, so the others' owners do not move.
func (p *Provider) batchOwners(ctx context.Context, batch string) (map[string]string, error) {
	var insts []*Instance
	pager := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagLaunchBatch), Values: []string{batch}},
		{Name: aws.String("tag:" + awsv1.KubernetesClusterTagKeyPrefix + p.clusterName), Values: []string{"owned"}},
	}})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				insts = append(insts, fromEC2(i))
			}
		}
	}
	return assignOwners(insts), nil
}

// assignOwners is the crash-recovery rule: the batch's NodeClaims that own
// no claimed instance, in the batch's order, take its unclaimed instances
// in instance-id order. The live launch pairs NodeClaim i with instance i
// in that order, so removing the pairs already claimed leaves the rest
// paired as the live launch would have: every reader, in any process,
// agrees on each instance's owner.
func assignOwners(insts []*Instance) map[string]string {
	var names []string
	served := map[string]bool{}
	var unclaimed []*Instance
	for _, inst := range insts {
		if names == nil {
			names = members(inst.Tags)
		}
		if nc, ok := inst.Tags[awsv1.NodeClaimTagKey]; ok {
			served[nc] = true
		} else if inst.Tags[TagLaunchState] == launchUnclaimed {
			unclaimed = append(unclaimed, inst)
		}
	}
	sort.Slice(unclaimed, func(i, j int) bool { return unclaimed[i].ID < unclaimed[j].ID })
	owners := map[string]string{}
	i := 0
	for _, name := range names {
		if served[name] {
			continue
		}
		if i >= len(unclaimed) {
			break
		}
		owners[unclaimed[i].ID] = name
		i++
	}
	return owners
}
