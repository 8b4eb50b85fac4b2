package instance

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/batcher"
)

// DescribeInstances and TerminateInstances by id are batched as upstream
// batches them: calls within IDBatchIdle of each other (at most IDBatchMax
// after the first) become one call for up to IDBatchMaxItems ids. A
// thousand NodeClaims checking their instances, or a thousand nodes
// scaling in, then cost two calls instead of a thousand against EC2's
// per-account request buckets.
const (
	IDBatchIdle     = 100 * time.Millisecond
	IDBatchMax      = time.Second
	IDBatchMaxItems = 500

	batcherDescribeInstances  = "describe_instances"
	batcherTerminateInstances = "terminate_instances"
)

// instanceIDs finds the ids in EC2's InvalidInstanceID.NotFound message
// ("The instance IDs 'i-1, i-2' do not exist").
var instanceIDs = regexp.MustCompile(`i-[0-9a-zA-Z]+`)

func newIDBatcher[Out any](name string, exec func(context.Context, []string) []batcher.Result[Out]) *batcher.Batcher[string, Out] {
	return batcher.New(batcher.Options[string, Out]{
		IdleTimeout: IDBatchIdle, MaxTimeout: IDBatchMax, MaxItems: IDBatchMaxItems,
		// One bucket: every caller asks about ids alone.
		Hash: func(string) (string, error) { return "", nil },
		Exec: exec,
		Observe: func(window time.Duration, size int) {
			metrics.BatcherBatchTimeSeconds.WithLabelValues(name).Observe(window.Seconds())
			metrics.BatcherBatchSize.WithLabelValues(name).Observe(float64(size))
		},
	})
}

// byIDs calls call with the distinct ids and, when EC2 refuses the call
// because some of them do not exist (it then answers nothing about the
// others), again without the ids its error names, so one instance that is
// gone cannot fail everyone else's answer. It returns the ids EC2 said do
// not exist.
func byIDs(ids []string, call func([]string) error) (missing map[string]bool, err error) {
	missing = map[string]bool{}
	todo := slices.Compact(slices.Sorted(slices.Values(ids)))
	for len(todo) > 0 {
		err := call(todo)
		if err == nil || !notFound(err) {
			return missing, err
		}
		named := instanceIDs.FindAllString(errorMessage(err), -1)
		rest := todo[:0:0]
		for _, id := range todo {
			if slices.Contains(named, id) {
				missing[id] = true
			} else {
				rest = append(rest, id)
			}
		}
		if len(rest) == len(todo) {
			// The message named none of them: ask one at a time.
			for _, id := range todo {
				if err := call([]string{id}); notFound(err) {
					missing[id] = true
				} else if err != nil {
					return missing, err
				}
			}
			return missing, nil
		}
		todo = rest
	}
	return missing, nil
}

// describeIDs serves one DescribeInstances batch: each id's instance (any
// state, terminated included), or nil when EC2 does not know it.
func (p *Provider) describeIDs(ctx context.Context, ids []string) []batcher.Result[*Instance] {
	found := map[string]*Instance{}
	_, err := byIDs(ids, func(ids []string) error {
		pager := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{InstanceIds: ids})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, r := range page.Reservations {
				for _, i := range r.Instances {
					inst := fromEC2(i)
					found[inst.ID] = inst
				}
			}
		}
		return nil
	})
	out := make([]batcher.Result[*Instance], len(ids))
	for i, id := range ids {
		if err != nil {
			out[i].Err = fmt.Errorf("describing instances: %w", err)
			continue
		}
		if inst := found[id]; inst != nil {
			// Each caller gets a copy of its own.
			c := *inst
			c.Tags = copyTags(inst.Tags)
			out[i].Out = &c
		}
	}
	return out
}

// terminateIDs serves one TerminateInstances batch: each id's state
// change, or nil when EC2 does not know it.
func (p *Provider) terminateIDs(ctx context.Context, ids []string) []batcher.Result[*ec2types.InstanceStateChange] {
	changes := map[string]ec2types.InstanceStateChange{}
	_, err := byIDs(ids, func(ids []string) error {
		out, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
		if err != nil {
			return err
		}
		for _, c := range out.TerminatingInstances {
			changes[aws.ToString(c.InstanceId)] = c
		}
		return nil
	})
	out := make([]batcher.Result[*ec2types.InstanceStateChange], len(ids))
	for i, id := range ids {
		if err != nil {
			out[i].Err = fmt.Errorf("terminating instances: %w", err)
			continue
		}
		if c, ok := changes[id]; ok {
			out[i].Out = &c
		}
	}
	return out
}

// cache is what the provider last learnt of each instance: from a launch
// (the request says its tags, type, zone, subnet, image and groups), a
// DescribeInstances, or a List. Drift and the tagging controller read it,
// so neither polls EC2 per NodeClaim: garbage collection's List refreshes
// every instance every two minutes, and a launch seeds its own.
type cache struct {
	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	inst *Instance
	at   time.Time
	// complete is false for a launch whose security groups were not
	// given: drift cannot judge from it.
	complete bool
}

// cacheRetention drops an entry nobody refreshed for this long (the
// instance is gone, or no longer the cluster's).
const cacheRetention = 30 * time.Minute

func (c *cache) put(inst *Instance, at time.Time, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cacheEntry{}
	}
	cp := *inst
	cp.Tags = copyTags(inst.Tags)
	c.entries[inst.ID] = cacheEntry{inst: &cp, at: at, complete: complete}
}

func (c *cache) get(id string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if ok {
		cp := *e.inst
		cp.Tags = copyTags(e.inst.Tags)
		e.inst = &cp
	}
	return e, ok
}

// tag records tags written to an instance.
func (c *cache) tag(id string, tags map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return
	}
	cp := *e.inst
	cp.Tags = copyTags(e.inst.Tags)
	for k, v := range tags {
		cp.Tags[k] = v
	}
	e.inst = &cp
	c.entries[id] = e
}

func (c *cache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}

// prune drops the entries older than cacheRetention.
func (c *cache) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.entries {
		if now.Sub(e.at) > cacheRetention {
			delete(c.entries, id)
		}
	}
}

func copyTags(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func notFound(err error) bool {
	switch errorCode(err) {
	case errInstanceNotFound, "InvalidInstanceID.Malformed":
		return true
	}
	return false
}

func errorMessage(err error) string {
	var apiErr interface{ ErrorMessage() string }
	if errors.As(err, &apiErr) {
		return apiErr.ErrorMessage()
	}
	return err.Error()
}
