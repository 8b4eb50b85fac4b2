package instance

import ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

// CapOverrides exposes capOverrides to the tests.
var CapOverrides = capOverrides

// AssignOwners exposes assignOwners to the tests.
var AssignOwners = assignOwners

// MemberTags, Members and BatchID expose the member-tag encoding to the
// tests.
var (
	MemberTags = memberTags
	Members    = members
	BatchID    = batchID
)

// BatchOrder is the member list of an unclaimed instance with these tags,
// in whichever form its batch wrote it; IsUnclaimed exposes isUnclaimed.
func BatchOrder(tags map[string]string) []string {
	inst := &Instance{Tags: map[string]string{}}
	for k, v := range tags {
		inst.Tags[k] = v
	}
	readBatch(inst)
	return inst.BatchMembers
}

var (
	IsUnclaimed      = isUnclaimed
	UnclaimedValueOf = unclaimedValue
)

// ChunkInValue runs chunkInValue on launches of these NodeClaims.
func ChunkInValue(names []string) []int {
	ls := make([]*launch, len(names))
	for i, n := range names {
		ls[i] = &launch{req: Request{NodeClaimName: n}}
	}
	return chunkInValue(ls)
}

// ChunkByTagBudget runs chunkByTagBudget on launches of these NodeClaims.
func ChunkByTagBudget(names []string, budget int) []int {
	ls := make([]*launch, len(names))
	for i, n := range names {
		ls[i] = &launch{req: Request{NodeClaimName: n}}
	}
	return chunkByTagBudget(ls, budget)
}

// LaunchHash is the batch key of req's launch.
func LaunchHash(p *Provider, req Request) (string, error) {
	l, err := p.newLaunch(req)
	if err != nil {
		return "", err
	}
	return l.hash()
}

// GroupRefused runs groupRefused on a fleet error of req's launch.
func GroupRefused(req Request, code, message string) bool {
	l := &launch{req: req}
	return l.groupRefused(ec2types.CreateFleetError{ErrorCode: &code, ErrorMessage: &message})
}

// WaitForClaims waits for the claims of the batches launched so far,
// written after their NodeClaims got their instances.
func (p *Provider) WaitForClaims() { p.claims.Wait() }
