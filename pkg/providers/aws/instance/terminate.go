package instance

// Terminating instances: one TerminateInstances per instance, then
// polling at growing intervals until EC2 no longer lists it.

import (
	"context"
	"fmt"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

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
