package interruption

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// StatusName is the instance-status controller's name.
const StatusName = "interruption.instancestatus"

// DefaultStatusInterval is how often the instance status is checked, as
// upstream.
const DefaultStatusInterval = time.Minute

// ImpairmentToleration is how long an instance or system status must stay
// impaired, without a healthy reading in between, before the NodeClaim is
// replaced (upstream's 120s): a status check fails briefly during a host's
// routine events, and replacing on one reading churns healthy nodes.
const ImpairmentToleration = 120 * time.Second

// MaxUnhealthyShare bounds what one pass replaces: at most this share of a
// NodePool's NodeClaims (rounded up, so a small pool still gets one)
// deleting at once, counting those already deleting for any reason. A
// fault that impairs much of a pool at once (a zone, a bad image) then
// drains it gradually instead of all at once. The share is upstream's node
// repair threshold.
const MaxUnhealthyShare = 0.2

// Categories of karpenter_interruption_instance_status_unhealthy_total, and
// the disrupted reason of the NodeClaims they delete.
const (
	CategoryInstanceStatus = "instance_status"
	CategorySystemStatus   = "system_status"
	CategoryScheduledEvent = "scheduled_event"
)

// EC2StatusAPI is the part of the EC2 client the check calls.
type EC2StatusAPI interface {
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

var _ EC2StatusAPI = (*ec2.Client)(nil)

// StatusOptions configure a StatusController. The zero value is usable.
type StatusOptions struct {
	// Interval between checks; zero is DefaultStatusInterval.
	Interval time.Duration
	// Recorder records the events; nil drops them.
	Recorder Recorder
	// Clock times impairments; nil is the real clock.
	Clock clock.Clock
}

// StatusController polls DescribeInstanceStatus for Karpenter's instances:
// an instance or system status impaired for ImpairmentToleration, or a
// scheduled event (reboot, maintenance, retirement, stop), replaces the
// node through the normal drain, at most MaxUnhealthyShare of a pool at a
// time.
type StatusController struct {
	kube client.Client
	ec2  EC2StatusAPI
	opts StatusOptions

	mu sync.Mutex
	// impairedSeen is when this controller first read each instance as
	// impaired, for statuses EC2 gives no ImpairedSince for; an instance
	// read healthy (or gone) drops out.
	impairedSeen map[string]time.Time
}

// NewStatusController builds the instance-status check.
func NewStatusController(kube client.Client, ec2api EC2StatusAPI, opts StatusOptions) *StatusController {
	if opts.Interval <= 0 {
		opts.Interval = DefaultStatusInterval
	}
	if opts.Recorder == nil {
		opts.Recorder = nopRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &StatusController{kube: kube, ec2: ec2api, opts: opts, impairedSeen: map[string]time.Time{}}
}

// Name is the controller's name.
func (c *StatusController) Name() string { return StatusName }

// Register adds the periodic check to mgr as a leader-elected runnable.
func (c *StatusController) Register(_ context.Context, mgr manager.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(c.Run)); err != nil {
		return fmt.Errorf("adding the instance-status check: %w", err)
	}
	return nil
}

// Run checks every Interval until ctx is done. A failed check is logged and
// the next one tries again; a panic is recovered, so the loop never dies.
func (c *StatusController) Run(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", StatusName))
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.safeCheck(ctx); err != nil && ctx.Err() == nil {
				log.FromContext(ctx).Error(err, "checking instance status")
			}
		}
	}
}

func (c *StatusController) safeCheck(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic checking instance status: %v\n%s", p, debug.Stack())
		}
	}()
	return c.Check(ctx)
}

// unhealthy is what one status row says is wrong, "" for nothing; for an
// impaired status, impaired is the earliest ImpairedSince EC2 gives for its
// failed checks (zero when it gives none).
func unhealthy(s ec2types.InstanceStatus) (category, detail string, impaired time.Time) {
	if st := s.InstanceStatus; st != nil && st.Status == ec2types.SummaryStatusImpaired {
		return CategoryInstanceStatus, "instance status check is impaired", impairedSince(st)
	}
	if st := s.SystemStatus; st != nil && st.Status == ec2types.SummaryStatusImpaired {
		return CategorySystemStatus, "system status check is impaired", impairedSince(st)
	}
	for _, ev := range s.Events {
		d := aws.ToString(ev.Description)
		// EC2 keeps finished events listed for a while, prefixed so.
		if strings.HasPrefix(d, "[Completed]") || strings.HasPrefix(d, "[Canceled]") {
			continue
		}
		return CategoryScheduledEvent, fmt.Sprintf("scheduled event %s: %s", ev.Code, d), time.Time{}
	}
	return "", "", time.Time{}
}

func impairedSince(st *ec2types.InstanceStatusSummary) time.Time {
	var out time.Time
	for _, d := range st.Details {
		if d.ImpairedSince != nil && (out.IsZero() || d.ImpairedSince.Before(out)) {
			out = *d.ImpairedSince
		}
	}
	return out
}

// candidate is a NodeClaim the pass found unhealthy.
type candidate struct {
	nc               *v1.NodeClaim
	category, detail string
	since            time.Time // impaired since; the pass's time for an event
}

// Check runs one pass: it reads the status of every running instance and
// acts on the unhealthy ones that are Karpenter's. It lists the account's
// statuses page by page rather than naming instances, because naming one
// that EC2 no longer knows fails the whole call.
func (c *StatusController) Check(ctx context.Context) error {
	list := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, list); err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	byID := map[string][]*v1.NodeClaim{}
	for i := range list.Items {
		nc := &list.Items[i]
		if id := instanceIDOf(nc); id != "" && nc.DeletionTimestamp.IsZero() {
			byID[id] = append(byID[id], nc)
		}
	}
	if len(byID) == 0 {
		c.forgetImpaired(nil)
		return nil
	}
	now := c.opts.Clock.Now()
	var candidates []candidate
	impaired := map[string]bool{}
	pages := ec2.NewDescribeInstanceStatusPaginator(c.ec2, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnauthorizedOperation" {
				// upstream's words: the check is retried every interval
				return fmt.Errorf("ec2:DescribeInstanceStatus permission is not allowed for instance status checks; grant the permission and Karpenter will retry automatically, %w", err)
			}
			// An incomplete pass keeps what it knew of impairments: a
			// failed read is no healthy reading.
			return fmt.Errorf("describing instance status: %w", err)
		}
		for _, s := range page.InstanceStatuses {
			id := aws.ToString(s.InstanceId)
			category, detail, since := unhealthy(s)
			if category == "" || len(byID[id]) == 0 {
				continue
			}
			if category != CategoryScheduledEvent {
				impaired[id] = true
				since = c.impairedAt(id, since, now)
				if now.Sub(since) < ImpairmentToleration {
					continue
				}
			} else {
				since = now
			}
			for _, nc := range byID[id] {
				candidates = append(candidates, candidate{nc: nc, category: category, detail: detail, since: since})
			}
		}
	}
	c.forgetImpaired(impaired)
	return c.actWithinShare(ctx, list.Items, candidates)
}

// impairedAt is when the instance's impairment began: EC2's ImpairedSince
// when it gives one, else this controller's first impaired reading of it.
func (c *StatusController) impairedAt(id string, fromEC2, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, ok := c.impairedSeen[id]
	if !ok {
		seen = now
		c.impairedSeen[id] = seen
	}
	if !fromEC2.IsZero() {
		return fromEC2
	}
	return seen
}

// forgetImpaired drops the first readings of instances this pass did not
// read as impaired: their impairment, if it comes back, starts anew.
func (c *StatusController) forgetImpaired(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.impairedSeen {
		if !keep[id] {
			delete(c.impairedSeen, id)
		}
	}
}

// poolOf groups NodeClaims for the share: by NodePool, the NodeClaims of
// none together.
func poolOf(nc *v1.NodeClaim) string { return nc.Labels[v1.NodePoolLabelKey] }

// actWithinShare acts on the candidates, longest unhealthy first, while
// each pool has fewer than MaxUnhealthyShare of its NodeClaims deleting.
func (c *StatusController) actWithinShare(ctx context.Context, all []v1.NodeClaim, candidates []candidate) error {
	total, deleting := map[string]int{}, map[string]int{}
	for i := range all {
		pool := poolOf(&all[i])
		total[pool]++
		if !all[i].DeletionTimestamp.IsZero() {
			deleting[pool]++
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		if !candidates[i].since.Equal(candidates[j].since) {
			return candidates[i].since.Before(candidates[j].since)
		}
		return candidates[i].nc.Name < candidates[j].nc.Name
	})
	deferred := map[string]int{}
	var errs []error
	for _, cand := range candidates {
		pool := poolOf(cand.nc)
		if deleting[pool] >= int(math.Ceil(MaxUnhealthyShare*float64(total[pool]))) {
			deferred[pool]++
			continue
		}
		acted, err := c.act(ctx, cand.nc, cand.category, cand.detail)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if acted {
			deleting[pool]++
		}
	}
	for pool, n := range deferred {
		log.FromContext(ctx).Info("deferring replacement of unhealthy instances: the pool has its share of nodes deleting",
			"NodePool", klog.KRef("", pool), "deferred", n, "deleting", deleting[pool], "nodeclaims", total[pool])
	}
	return errors.Join(errs...)
}

// act replaces one unhealthy NodeClaim through the normal drain: an
// instance that has failed its checks for minutes is worth leaving, but
// not past PDBs and do-not-disrupt pods, and its NodeClaim's
// terminationGracePeriod still bounds the drain.
func (c *StatusController) act(ctx context.Context, nc *v1.NodeClaim, category, detail string) (bool, error) {
	node := nodeOf(ctx, c.kube, nc)
	deleted, err := deleteNodeClaim(ctx, c.kube, nc, false, c.opts.Clock.Now())
	if err != nil || !deleted {
		return false, err
	}
	logger := log.FromContext(ctx).WithValues("NodeClaim", klog.KObj(nc), "category", category)
	if node != nil {
		logger = logger.WithValues("Node", klog.KObj(node))
	}
	logger.Info("deleting nodeclaim for unhealthy instance status", "detail", detail)
	record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventInstanceUnhealthy, "An unhealthy warning was triggered for the instance: "+detail)
	record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventTerminatingOnInterruption, "Interruption triggered termination for the NodeClaim")
	metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(category).Inc()
	countDisrupted(nc, category, false)
	return true, nil
}
