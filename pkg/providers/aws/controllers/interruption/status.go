package interruption

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
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
	// Clock stamps termination deadlines; nil is the real clock.
	Clock clock.Clock
}

// StatusController polls DescribeInstanceStatus for Karpenter's instances:
// an impaired instance or system status replaces the node forcefully, a
// scheduled event (reboot, maintenance, retirement, stop) drains it.
type StatusController struct {
	kube client.Client
	ec2  EC2StatusAPI
	opts StatusOptions
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
	return &StatusController{kube: kube, ec2: ec2api, opts: opts}
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

// unhealthy is what one status row says is wrong, "" for nothing.
func unhealthy(s ec2types.InstanceStatus) (category, detail string) {
	if st := s.InstanceStatus; st != nil && st.Status == ec2types.SummaryStatusImpaired {
		return CategoryInstanceStatus, "instance status check is impaired"
	}
	if st := s.SystemStatus; st != nil && st.Status == ec2types.SummaryStatusImpaired {
		return CategorySystemStatus, "system status check is impaired"
	}
	for _, ev := range s.Events {
		d := aws.ToString(ev.Description)
		// EC2 keeps finished events listed for a while, prefixed so.
		if strings.HasPrefix(d, "[Completed]") || strings.HasPrefix(d, "[Canceled]") {
			continue
		}
		return CategoryScheduledEvent, fmt.Sprintf("scheduled event %s: %s", ev.Code, d)
	}
	return "", ""
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
		return nil
	}
	var errs []error
	pages := ec2.NewDescribeInstanceStatusPaginator(c.ec2, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(1000)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			var apiErr smithy.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnauthorizedOperation" {
				// upstream's words: the check is retried every interval
				err = fmt.Errorf("ec2:DescribeInstanceStatus permission is not allowed for instance status checks; grant the permission and Karpenter will retry automatically, %w", err)
			} else {
				err = fmt.Errorf("describing instance status: %w", err)
			}
			return errors.Join(append(errs, err)...)
		}
		for _, s := range page.InstanceStatuses {
			category, detail := unhealthy(s)
			if category == "" {
				continue
			}
			for _, nc := range byID[aws.ToString(s.InstanceId)] {
				if err := c.act(ctx, nc, category, detail); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// act replaces one unhealthy NodeClaim: forcefully for an impaired status
// (the instance cannot run pods well, so waiting on PDBs only prolongs the
// outage), through the normal drain for a scheduled event.
func (c *StatusController) act(ctx context.Context, nc *v1.NodeClaim, category, detail string) error {
	forceful := category != CategoryScheduledEvent
	node := nodeOf(ctx, c.kube, nc)
	deleted, err := deleteNodeClaim(ctx, c.kube, nc, forceful, c.opts.Clock.Now())
	if err != nil || !deleted {
		return err
	}
	logger := log.FromContext(ctx).WithValues("NodeClaim", klog.KObj(nc), "category", category, "forceful", forceful)
	if node != nil {
		logger = logger.WithValues("Node", klog.KObj(node))
	}
	logger.Info("deleting nodeclaim for unhealthy instance status", "detail", detail)
	record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventInstanceUnhealthy, "An unhealthy warning was triggered for the instance: "+detail)
	record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventTerminatingOnInterruption, "Interruption triggered termination for the NodeClaim")
	metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(category).Inc()
	countDisrupted(nc, category, forceful)
	return nil
}
