package interruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Name is the queue controller's name.
const Name = "interruption"

// UnavailableOfferings is the shared insufficient-capacity cache
// (cloudprovider.UnavailableOfferings).
type UnavailableOfferings interface {
	MarkUnavailable(cloudprovider.OfferingKey)
}

// ReservationUnavailable takes a capacity reservation out of launches, as
// upstream's capacity-reservation provider does on an interruption. The
// insufficient-capacity cache is keyed by (instance type, zone, capacity
// type) and has no reservation key: marking the reserved offering there
// would block every reservation of that type in the zone. So a reservation
// interruption marks the reservation only when the provider passes an
// implementation; without one it drains the node and marks nothing.
type ReservationUnavailable interface {
	MarkUnavailable(reservationID string)
}

// Options configure a Controller. The zero value is usable.
type Options struct {
	// Unavailable is the cache a spot interruption marks; nil marks
	// nothing.
	Unavailable UnavailableOfferings
	// Reservations is told of interrupted capacity reservations; nil
	// leaves them alone (see ReservationUnavailable).
	Reservations ReservationUnavailable
	// Recorder records the events; nil drops them.
	Recorder Recorder
	// Clock stamps termination deadlines; nil is the real clock.
	Clock clock.Clock
	// Receiver tunes the SQS receiver (workers, backoff).
	Receiver interruption.Options
	// ReplaceOnRebalance marks a NodeClaim whose instance gets a rebalance
	// recommendation (AnnotationRebalanceRecommendation), which the AWS
	// provider reports as drift: replaced like drift, replacement first
	// (beyond upstream; off by default, when a rebalance only records its
	// event).
	ReplaceOnRebalance bool
	// Learner, when set, learns interruption rates per offering and keeps
	// often-interrupted ones unavailable for longer (beyond upstream; off
	// by default). It must share Unavailable's cache.
	Learner *Learner
}

// Controller acts on the interruption queue's messages.
type Controller struct {
	kube     client.Client
	receiver *interruption.Receiver
	opts     Options
}

var _ interruption.Handler = (*Controller)(nil)

// NewController builds the controller for the SQS queue named queueName.
// The operator constructs it only when INTERRUPTION_QUEUE is set.
func NewController(kube client.Client, sqs interruption.SQSAPI, queueName string, opts Options) *Controller {
	if opts.Recorder == nil {
		opts.Recorder = nopRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Receiver.Clock == nil {
		opts.Receiver.Clock = opts.Clock
	}
	return &Controller{kube: kube, receiver: interruption.NewReceiver(sqs, queueName, opts.Receiver), opts: opts}
}

// Name is the controller's name.
func (c *Controller) Name() string { return Name }

// Register indexes NodeClaims by instance ID and adds the receiver (and the
// learner's refresher, when learning is on) to mgr as runnables. They run
// only on the leader: two replicas polling the queue would act twice.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, instanceIDField, indexInstanceID); err != nil {
		return fmt.Errorf("indexing nodeclaims by instance id: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(c.Run)); err != nil {
		return fmt.Errorf("adding the interruption receiver: %w", err)
	}
	if c.opts.Learner != nil {
		if err := mgr.Add(manager.RunnableFunc(c.opts.Learner.Run)); err != nil {
			return fmt.Errorf("adding the interruption-rate learner: %w", err)
		}
	}
	return nil
}

// Run polls the queue and handles its messages until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", Name))
	return c.receiver.Run(ctx, c)
}

// Handle acts on every instance the message names. An error (the API
// server failing a list or a delete) leaves the message on the queue to be
// received again, or redriven; an instance no NodeClaim has is not an
// error, and neither is a NodeClaim already gone.
func (c *Controller) Handle(ctx context.Context, msg messages.Message) error {
	var errs []error
	for _, id := range msg.EC2InstanceIDs() {
		if err := c.handleInstance(ctx, msg, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) handleInstance(ctx context.Context, msg messages.Message, id string) error {
	kind := msg.Kind()
	claims, err := nodeClaimsFor(ctx, c.kube, id)
	if err != nil {
		return err
	}
	if len(claims) == 0 {
		metrics.InterruptionActionsPerformedTotal.WithLabelValues(string(kind), ActionUnmanaged).Inc()
		log.FromContext(ctx).V(1).Info("interruption message for an instance no nodeclaim has", "messageKind", string(kind), "instance", id)
		return nil
	}
	var errs []error
	for _, nc := range claims {
		if err := c.act(ctx, msg, nc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// act records the message's event and applies its action to one NodeClaim.
func (c *Controller) act(ctx context.Context, msg messages.Message, nc *v1.NodeClaim) error {
	kind := msg.Kind()
	node := nodeOf(ctx, c.kube, nc)
	logger := log.FromContext(ctx).WithValues("messageKind", string(kind), "NodeClaim", klog.KObj(nc))
	if node != nil {
		logger = logger.WithValues("Node", klog.KObj(node))
	}
	switch kind {
	case messages.KindSpotInterrupted:
		record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventSpotInterrupted, "Spot interruption warning was triggered")
		c.markSpot(ctx, nc)
	case messages.KindRebalanceRecommendation:
		record(c.opts.Recorder, nc, node, corev1.EventTypeNormal, EventSpotRebalanceRecommendation, "Spot rebalance recommendation was triggered")
		if !c.opts.ReplaceOnRebalance {
			metrics.InterruptionActionsPerformedTotal.WithLabelValues(string(kind), ActionNotify).Inc()
			return nil
		}
		return c.markRebalance(ctx, nc)
	case messages.KindInstanceStopped:
		record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventInstanceStopping, "Instance is stopping")
	case messages.KindInstanceTerminated:
		record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventInstanceTerminating, "Instance is terminating")
	case messages.KindScheduledChange:
		record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventInstanceUnhealthy, "An unhealthy warning was triggered for the instance")
	case messages.KindCapacityReservationInterrupted:
		record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventCapacityReservationInterrupted, "Capacity reservation interruption warning was triggered")
		c.markReservation(ctx, msg, nc)
	default:
		// The receiver hands over only actionable kinds; a new kind the
		// parser learns must be wired here before it deletes anything.
		return nil
	}

	deleted, err := deleteNodeClaim(ctx, c.kube, nc, false, c.opts.Clock.Now())
	if err != nil {
		return err
	}
	if !deleted {
		metrics.InterruptionActionsPerformedTotal.WithLabelValues(string(kind), ActionAlreadyDeleting).Inc()
		return nil
	}
	logger.Info("initiating delete from interruption message")
	record(c.opts.Recorder, nc, node, corev1.EventTypeWarning, EventTerminatingOnInterruption, "Interruption triggered termination for the NodeClaim")
	countDisrupted(nc, string(kind), false)
	metrics.InterruptionActionsPerformedTotal.WithLabelValues(string(kind), ActionCordonAndDrain).Inc()
	return nil
}

// markSpot takes the interrupted spot offering out of launches for the
// cache's TTL (and longer, when the learner says it is often interrupted).
func (c *Controller) markSpot(ctx context.Context, nc *v1.NodeClaim) {
	key := scheduling.OfferingKeyOf(nc.Labels)
	key.CapacityType = v1.CapacityTypeSpot
	if key.InstanceType == "" || key.Zone == "" {
		log.FromContext(ctx).V(1).Info("spot interruption for a nodeclaim without instance type or zone labels; no offering marked", "NodeClaim", klog.KObj(nc))
		return
	}
	if c.opts.Unavailable != nil {
		c.opts.Unavailable.MarkUnavailable(key)
	}
	if c.opts.Learner != nil {
		c.opts.Learner.Observe(key)
	}
}

// markReservation takes the interrupted reservation out of launches when
// the provider can (see ReservationUnavailable). The message may not name
// the reservation (AWS's documented event does not); the NodeClaim's label
// does.
func (c *Controller) markReservation(ctx context.Context, msg messages.Message, nc *v1.NodeClaim) {
	id := nc.Labels[awsv1.LabelCapacityReservationID]
	if m, ok := msg.(messages.CapacityReservationInterruption); ok && m.CapacityReservationID != "" {
		id = m.CapacityReservationID
	}
	if id == "" || c.opts.Reservations == nil {
		return
	}
	c.opts.Reservations.MarkUnavailable(id)
	log.FromContext(ctx).V(1).Info("marked capacity reservation unavailable", "capacityReservationID", id)
}

// markRebalance annotates the NodeClaim with when the recommendation came
// (the first one wins: a repeat must not look like a new one).
func (c *Controller) markRebalance(ctx context.Context, nc *v1.NodeClaim) error {
	if _, ok := nc.Annotations[awsv1.AnnotationRebalanceRecommendation]; ok || !nc.DeletionTimestamp.IsZero() {
		metrics.InterruptionActionsPerformedTotal.WithLabelValues(string(messages.KindRebalanceRecommendation), ActionAlreadyDeleting).Inc()
		return nil
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[awsv1.AnnotationRebalanceRecommendation] = c.opts.Clock.Now().UTC().Format(time.RFC3339)
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("marking nodeclaim %s for replacement on a rebalance recommendation: %w", nc.Name, err))
	}
	log.FromContext(ctx).Info("replacing on a rebalance recommendation", "NodeClaim", klog.KObj(nc))
	metrics.InterruptionActionsPerformedTotal.WithLabelValues(string(messages.KindRebalanceRecommendation), ActionReplace).Inc()
	return nil
}
