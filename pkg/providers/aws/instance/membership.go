package instance

// Batch membership: which NodeClaims a batched launch was for, written in
// the instances' tags at CreateFleet, and which instance each of them owns
// when a crash interrupted the claims.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// chunkByTagBudget splits ls into runs whose batch id and NodeClaim names
// fit in budget member tags; it returns the runs' lengths.
func chunkByTagBudget(ls []*launch, budget int) []int {
	var sizes []int
	if budget < 1 {
		// No room to name the members: every launch goes alone, tagged
		// in CreateFleet.
		for range ls {
			sizes = append(sizes, 1)
		}
		return sizes
	}
	n, tags, value := 0, 1, batchIDLength
	for _, l := range ls {
		name := len(l.req.NodeClaimName)
		switch {
		case value+1+name <= maxTagValue:
			value += 1 + name
		case tags < budget:
			tags, value = tags+1, name
		case n == 0:
			// A name too long to share the first tag with the batch's
			// id, and no second tag: this launch goes alone.
			sizes = append(sizes, 1)
			continue
		default:
			sizes = append(sizes, n)
			n, tags, value = 0, 1, batchIDLength+1+name
		}
		n++
	}
	if n > 0 {
		sizes = append(sizes, n)
	}
	return sizes
}

// memberTags lists the batch's id and then names in as few values of at
// most maxTagValue characters as fit, under numbered keys.
func memberTags(batch string, names []string) map[string]string {
	out := map[string]string{}
	cur, size := []string{batch}, len(batch)
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

// readBatch reads what a batched launch wrote on inst: whether it is
// unclaimed and, if so, its batch's id and members, from the
// karpenter.sh/nodeclaim value (a batch listed in it) or the member tags.
// An unclaimed instance keeps no karpenter.sh/nodeclaim in Tags.
func readBatch(inst *Instance) {
	v, ok := inst.Tags[awsv1.NodeClaimTagKey]
	if !ok || !isUnclaimed(v) {
		return
	}
	delete(inst.Tags, awsv1.NodeClaimTagKey)
	inst.Unclaimed = true
	if list, ok := strings.CutPrefix(v, UnclaimedValue+":"); ok {
		parts := strings.Split(list, ",")
		inst.BatchID, inst.BatchMembers, inst.batchInValue = parts[0], parts[1:], true
		return
	}
	inst.BatchID, inst.BatchMembers = batchID(inst.Tags), members(inst.Tags)
}

// isUnclaimed: a karpenter.sh/nodeclaim value a batched launch wrote.
func isUnclaimed(v string) bool {
	return v == UnclaimedValue || strings.HasPrefix(v, UnclaimedValue+":")
}

// unclaimedValue is the karpenter.sh/nodeclaim value of a batch listed in
// that value: UnclaimedValue, ":", the batch's id, then its NodeClaims,
// comma-separated.
func unclaimedValue(batch string, names []string) string {
	return UnclaimedValue + ":" + strings.Join(append([]string{batch}, names...), ",")
}

// chunkInValue splits ls into runs whose batch fits in one
// karpenter.sh/nodeclaim value; it returns the runs' lengths.
func chunkInValue(ls []*launch) []int {
	var sizes []int
	n, value := 0, len(UnclaimedValue)+1+batchIDLength
	for _, l := range ls {
		name := 1 + len(l.req.NodeClaimName)
		if n > 0 && value+name > maxTagValue {
			sizes = append(sizes, n)
			n, value = 0, len(UnclaimedValue)+1+batchIDLength
		}
		n, value = n+1, value+name
	}
	if n > 0 {
		sizes = append(sizes, n)
	}
	return sizes
}

// members reads the batch's NodeClaims back from an instance's tags.
func members(tags map[string]string) []string {
	var out []string
	for i := 0; ; i++ {
		v, ok := tags[TagLaunchMembersPrefix+strconv.Itoa(i)]
		if !ok {
			return out
		}
		parts := strings.Split(v, ",")
		if i == 0 {
			parts = parts[1:]
		}
		out = append(out, parts...)
	}
}

// batchID reads the batch's id back from an instance's tags.
func batchID(tags map[string]string) string {
	id, _, _ := strings.Cut(tags[TagLaunchMembersPrefix+"0"], ",")
	return id
}

func newBatchID() string {
	return strings.ReplaceAll(uuid.NewString(), "-", "")[:batchIDLength]
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
			// A batch listed in the nodeclaim value names its members
			// on its unclaimed instances only.
			names = inst.BatchMembers
			if names == nil {
				names = members(inst.Tags)
			}
		}
		if inst.Unclaimed {
			unclaimed = append(unclaimed, inst)
		} else if nc, ok := inst.Tags[awsv1.NodeClaimTagKey]; ok {
			served[nc] = true
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

// batchOwners maps the unclaimed instances of of's batch to their
// NodeClaims. Terminated instances count (EC2 lists them for about an
// hour): a collected instance keeps its owner, so the others' owners do
// not move. A batch listed in the karpenter.sh/nodeclaim value loses that
// mark on the instances it claimed; those are found by their members'
// names instead.
func (p *Provider) batchOwners(ctx context.Context, of *Instance) (map[string]string, error) {
	cluster := ec2types.Filter{Name: aws.String("tag:" + awsv1.KubernetesClusterTagKeyPrefix + p.clusterName), Values: []string{"owned"}}
	batch := of.BatchID
	if !of.batchInValue {
		insts, err := p.describeAll(ctx, []ec2types.Filter{
			{Name: aws.String("tag:" + TagLaunchMembersPrefix + "0"), Values: []string{batch + ",*"}}, cluster})
		if err != nil {
			return nil, err
		}
		var mine []*Instance
		for _, inst := range insts {
			if batchID(inst.Tags) == batch {
				mine = append(mine, inst)
			}
		}
		return assignOwners(mine), nil
	}
	insts, err := p.describeAll(ctx, []ec2types.Filter{
		{Name: aws.String("tag:" + awsv1.NodeClaimTagKey), Values: []string{UnclaimedValue + ":" + batch + ",*"}}, cluster})
	if err != nil {
		return nil, err
	}
	var mine []*Instance
	for _, inst := range insts {
		if inst.Unclaimed && inst.BatchID == batch {
			mine = append(mine, inst)
		}
	}
	if len(mine) == 0 {
		return map[string]string{}, nil
	}
	// EC2 takes up to 200 values in a filter.
	names := mine[0].BatchMembers
	for start := 0; start < len(names); start += 200 {
		claimed, err := p.describeAll(ctx, []ec2types.Filter{
			{Name: aws.String("tag:" + awsv1.NodeClaimTagKey), Values: names[start:min(start+200, len(names))]}, cluster})
		if err != nil {
			return nil, err
		}
		mine = append(mine, claimed...)
	}
	return assignOwners(mine), nil
}

// describeAll is DescribeInstances with filters, terminated instances
// included.
func (p *Provider) describeAll(ctx context.Context, filters []ec2types.Filter) ([]*Instance, error) {
	return p.describeWhere(ctx, filters, nil)
}

// describeWhere pages through DescribeInstances with filters, keeping the
// instances keep accepts (all of them when keep is nil).
func (p *Provider) describeWhere(ctx context.Context, filters []ec2types.Filter, keep func(ec2types.Instance) bool) ([]*Instance, error) {
	var out []*Instance
	pager := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: filters})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if keep == nil || keep(i) {
					out = append(out, fromEC2(i))
				}
			}
		}
	}
	return out, nil
}
