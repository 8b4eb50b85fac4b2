package instance

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
