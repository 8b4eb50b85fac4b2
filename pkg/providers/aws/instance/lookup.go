package instance

// Finding instances: by id (batched and cached), by NodeClaim for
// adoption, and the cluster's whole list for garbage collection.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

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

// describe is DescribeInstances with filters, live instances only.
func (p *Provider) describe(ctx context.Context, filters []ec2types.Filter) ([]*Instance, error) {
	return p.describeWhere(ctx, filters, live)
}
