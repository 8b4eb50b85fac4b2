package instance

// Claims: after a batched CreateFleet returned, each instance is handed to
// its NodeClaim by one CreateTags overwriting karpenter.sh/nodeclaim,
// written in the background so the NodeClaims need not wait for EC2 to
// know their instances.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
)

const (
	// claimRetryFor bounds how long a claim retries an instance EC2 does
	// not know yet (eventual consistency right after CreateFleet).
	claimRetryFor = 30 * time.Second
	// claimsFor bounds a batch's claims written after its launch
	// returned. Its NodeClaims no longer retry the claims, so a claim
	// that fails (throttled past the SDK's retries, a slow answer) is
	// tried again, from claimBackoff doubling, for this long; past it the
	// tagging controller claims the instance when its Node registers.
	claimsFor    = 10 * time.Minute
	claimBackoff = time.Second
)

// claimAll writes the claims of a batch whose NodeClaims already have
// their instances. The batch's instances became known to EC2 together:
// the first claim waits out EC2's consistency alone, and the others
// follow once it lands, so a batch of n spends its retries of "instance
// unknown" once and not n times (each one a CreateTags token). A claim
// that fails is left to the NodeClaim's next Create, if any, and to the
// tagging controller.
func (p *Provider) claimAll(ctx context.Context, insts []*Instance, reqs []Request) {
	logFailure := func(i int, err error) {
		if err != nil {
			log.FromContext(ctx).Error(err, "claiming a batched instance; its member tags keep it the NodeClaim's", "instance", insts[i].ID, "NodeClaim", reqs[i].NodeClaimName)
		}
	}
	logFailure(0, p.claimPersistently(ctx, insts[0], reqs[0]))
	sem := make(chan struct{}, claimConcurrency)
	var wg sync.WaitGroup
	for i := 1; i < len(insts); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			logFailure(i, p.claimPersistently(ctx, insts[i], reqs[i]))
		}()
	}
	wg.Wait()
}

// claimPersistently claims inst until that succeeds, AWS denies it, EC2
// has not known the instance for claimRetryFor (it is gone), or ctx ends.
func (p *Provider) claimPersistently(ctx context.Context, inst *Instance, req Request) error {
	wait := claimBackoff
	for {
		_, err := p.claim(ctx, inst, req)
		if err == nil || notFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-p.clock.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// handedTo is inst as its NodeClaim sees it: karpenter.sh/nodeclaim names
// the NodeClaim, as its claim writes.
func handedTo(inst *Instance, nodeClaim string) *Instance {
	out := *inst
	out.Tags = copyTags(inst.Tags)
	out.Tags[awsv1.NodeClaimTagKey] = nodeClaim
	out.Unclaimed = false
	return &out
}

// claim hands inst to req's NodeClaim by overwriting its
// karpenter.sh/nodeclaim tag, the one key upstream's policy lets the
// controller write on a running instance besides Name and
// eks:eks-cluster-name. EC2 may not know a fresh instance for a few
// seconds, so an unknown instance is retried for claimRetryFor. If the
// claim still fails, the NodeClaim's next Create claims the same instance
// (without asking EC2 or launching again). If AWS denies the call, the
// instance is the NodeClaim's all the same (the batch's member tags say
// so to any reader), and the NodePool launches one by one for a while.
func (p *Provider) claim(ctx context.Context, inst *Instance, req Request) (*Instance, error) {
	nodeClaim := req.NodeClaimName
	err := retryUnknown(ctx, p.clock, func() error {
		_, err := p.ec2.CreateTags(ctx, &ec2.CreateTagsInput{
			Resources: []string{inst.ID},
			Tags:      []ec2types.Tag{{Key: aws.String(awsv1.NodeClaimTagKey), Value: aws.String(nodeClaim)}},
		})
		return err
	})
	out := handedTo(inst, nodeClaim)
	switch {
	case err == nil:
		p.cache.tag(inst.ID, map[string]string{awsv1.NodeClaimTagKey: nodeClaim})
	case sdk.IsDenied(err):
		if p.disableBatching(req.NodePoolName, "CreateTags") {
			p.event(nodeClaim, corev1.EventTypeWarning, EventLaunchBatchingDisabled,
				fmt.Sprintf("AWS denied tagging instance %s with its NodeClaim; NodePool %s launches one NodeClaim per CreateFleet for %s: %s", inst.ID, req.NodePoolName, unbatchedFor, errorMessage(err)))
		}
	default:
		p.setPendingClaim(nodeClaim, inst)
		return nil, cloudprovider.NewCreateError(fmt.Errorf("tagging instance %s with nodeclaim %s: %w", inst.ID, nodeClaim, err), "LaunchFailed", "CreateTags failed")
	}
	p.clearPendingClaim(nodeClaim)
	return out, nil
}

// retryUnknown calls call until it does not fail with "instance unknown",
// for at most claimRetryFor, backing off from a quarter second.
func retryUnknown(ctx context.Context, clk clock.Clock, call func() error) error {
	deadline := clk.Now().Add(claimRetryFor)
	wait := 250 * time.Millisecond
	for {
		err := call()
		if !notFound(err) || !clk.Now().Add(wait).Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-clk.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}
