package awslocal

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EC2's request throttling (AWS's "Request throttling for the Amazon EC2
// API"), for principals' calls: a token bucket per account, region and
// action, sized by the action's category, and resource token buckets that
// the instances launched or terminated drain. The account's root key is
// not throttled (it is the tests' own view of the account).

// Bucket is a token bucket: at most Capacity tokens, Refill added per
// second.
type Bucket struct {
	Capacity float64 `json:"capacity"`
	Refill   float64 `json:"refill"`
}

// ThrottleOptions configure the throttling. The zero value throttles at
// EC2's figures.
type ThrottleOptions struct {
	// Disabled turns throttling off.
	Disabled bool
	// Scale multiplies every bucket's capacity and refill rate; 0 means 1.
	Scale float64
	// Buckets replace request buckets by action name (for the unfiltered
	// and unpaginated bucket, "<Action>/unfiltered").
	Buckets map[string]Bucket
	// ResourceBuckets replace resource buckets by action name
	// (RunInstances, TerminateInstances, StartInstances, StopInstances).
	ResourceBuckets map[string]Bucket
}

// EC2's request bucket sizes and refill rates by category.
var (
	bucketNonMutating = Bucket{100, 20}
	bucketUnfiltered  = Bucket{50, 10}
	bucketMutating    = Bucket{50, 5}
	bucketIntensive   = Bucket{50, 5}
)

// unfilteredActions use the smaller bucket when called with neither a
// filter nor pagination.
var unfilteredActions = map[string]bool{
	"DescribeInstances": true, "DescribeInstanceStatus": true, "DescribeNetworkInterfaces": true,
	"DescribeSecurityGroups": true, "DescribeSnapshots": true, "DescribeSpotInstanceRequests": true, "DescribeVolumes": true,
}

var intensiveActions = map[string]bool{
	"AcceptVpcPeeringConnection": true, "AuthorizeSecurityGroupIngress": true, "CancelSpotInstanceRequests": true,
	"CreateKeyPair": true, "CreateVpcPeeringConnection": true, "DeleteVpcPeeringConnection": true,
	"RejectVpcPeeringConnection": true, "RevokeSecurityGroupIngress": true, "RequestSpotInstances": true,
}

// uncategorizedBuckets are the actions with buckets of their own (those of
// EC2's table an EC2 node controller or the local AWS can meet).
var uncategorizedBuckets = map[string]Bucket{
	"AssignIpv6Addresses": {100, 5}, "AssignPrivateIpAddresses": {100, 5}, "AssociateIamInstanceProfile": {100, 5},
	"CopyImage": {100, 1}, "CreateDefaultSubnet": {1, 1}, "CreateDefaultVpc": {1, 1},
	"CreateLaunchTemplateVersion": {100, 5}, "CreateNetworkInterface": {100, 5}, "CreateSnapshot": {100, 5},
	"CreateSnapshots": {100, 5}, "CreateTags": {100, 10}, "CreateVolume": {100, 5}, "DeleteNetworkInterface": {100, 5},
	"DeleteSnapshot": {100, 5}, "DeleteTags": {100, 10}, "DeleteVolume": {100, 5}, "DeregisterImage": {100, 5},
	"DescribeSecurityGroupReferences": {20, 5}, "DescribeSpotFleetInstances": {100, 5}, "DescribeSpotFleetRequests": {50, 3},
	"DescribeStaleSecurityGroups": {20, 5}, "DisassociateIamInstanceProfile": {100, 5}, "ModifyImageAttribute": {100, 5},
	"ModifyInstanceMetadataOptions": {100, 5}, "ModifyLaunchTemplate": {100, 5}, "ModifyNetworkInterfaceAttribute": {100, 5},
	"ModifySnapshotAttribute": {100, 5}, "RunInstances": {5, 2}, "StartInstances": {5, 2}, "TerminateInstances": {100, 5},
	"UnassignPrivateIpAddresses": {100, 5},
}

// resourceBuckets drain by the instances an action launches or ends;
// CreateFleet's launches drain RunInstances' bucket.
var resourceBuckets = map[string]Bucket{
	"RunInstances": {1000, 2}, "TerminateInstances": {1000, 20}, "StartInstances": {1000, 2}, "StopInstances": {1000, 20},
}

func isNonMutating(action string) bool {
	for _, p := range []string{"Describe", "List", "Search", "Get"} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

// requestBucket is the bucket a call draws one token from, by name.
func requestBucket(c *call) (string, Bucket) {
	a := c.Action
	if b, ok := uncategorizedBuckets[a]; ok {
		return a, b
	}
	if unfilteredActions[a] && !filteredOrPaged(c) {
		return a + "/unfiltered", bucketUnfiltered
	}
	switch {
	case intensiveActions[a]:
		return a, bucketIntensive
	case isNonMutating(a):
		return a, bucketNonMutating
	default:
		return a, bucketMutating
	}
}

func filteredOrPaged(c *call) bool {
	for k := range c.Form {
		if strings.HasPrefix(k, "Filter.") || k == "MaxResults" || k == "NextToken" {
			return true
		}
	}
	return false
}

// resourceCost is how many resource tokens a call needs and from which
// bucket.
func resourceCost(c *call) (string, int) {
	switch c.Action {
	case "RunInstances":
		n, _ := strconv.Atoi(c.Form.Get("MaxCount"))
		return "RunInstances", max(n, 1)
	case "CreateFleet":
		if c.Form.Get("Type") != "instant" {
			return "", 0
		}
		n, _ := strconv.Atoi(c.Form.Get("TargetCapacitySpecification.TotalTargetCapacity"))
		return "RunInstances", max(n, 1)
	case "TerminateInstances", "StartInstances", "StopInstances":
		return c.Action, len(ec2List(c.Form, "InstanceId"))
	}
	return "", 0
}

type tokenBucket struct {
	Bucket
	tokens float64
	last   time.Time
}

func (b *tokenBucket) take(now time.Time, n float64) bool {
	b.tokens = math.Min(b.Capacity, b.tokens+now.Sub(b.last).Seconds()*b.Refill)
	b.last = now
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

type throttler struct {
	opts      ThrottleOptions
	mu        sync.Mutex
	buckets   map[string]*tokenBucket
	throttled map[string]int
}

func newThrottler(o ThrottleOptions) *throttler {
	if o.Scale == 0 {
		o.Scale = 1
	}
	return &throttler{opts: o, buckets: map[string]*tokenBucket{}, throttled: map[string]int{}}
}

func (t *throttler) bucket(key string, b Bucket, now time.Time) *tokenBucket {
	tb := t.buckets[key]
	if tb == nil {
		b = Bucket{b.Capacity * t.opts.Scale, b.Refill * t.opts.Scale}
		tb = &tokenBucket{Bucket: b, tokens: b.Capacity, last: now}
		t.buckets[key] = tb
	}
	return tb
}

// admit takes the call's tokens; false means EC2 would answer
// RequestLimitExceeded.
func (t *throttler) admit(c *call) bool {
	if t.opts.Disabled || c.Service != "ec2" {
		return true
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	name, b := requestBucket(c)
	if o, ok := t.opts.Buckets[name]; ok {
		b = o
	}
	if !t.bucket(c.Region+"/request/"+name, b, now).take(now, 1) {
		t.throttled[c.Action]++
		return false
	}
	if res, n := resourceCost(c); n > 0 {
		rb := resourceBuckets[res]
		if o, ok := t.opts.ResourceBuckets[res]; ok {
			rb = o
		}
		if !t.bucket(c.Region+"/resource/"+res, rb, now).take(now, float64(n)) {
			t.throttled[c.Action]++
			return false
		}
	}
	return true
}

func writeThrottled(w http.ResponseWriter, c *call) {
	writeError(w, c, http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
}

// Throttled is how many principals' calls of each EC2 action were answered
// RequestLimitExceeded by the throttling (injected faults not counted).
func (l *Local) Throttled() map[string]int {
	t := l.front.throttle
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.throttled))
	for k, v := range t.throttled {
		out[k] = v
	}
	return out
}

// ThrottleSummary is Throttled as one line, actions sorted.
func (l *Local) ThrottleSummary() string {
	m := l.Throttled()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
