// Package expiration drains nodes running in capacity blocks before EC2
// reclaims them, as upstream's capacityreservation/expiration controller:
// every minute, NodeClaims labelled with a capacity-block reservation whose
// block ends within 40 minutes are deleted, which gives their pods a
// graceful drain ten minutes before EC2 starts terminating the instances
// (30 minutes before the end).
package expiration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Name is the controller's name.
const Name = "capacityreservation.expiration"

// Interval is how often capacity blocks are checked, as upstream.
const Interval = time.Minute

// Reservations resolves reservations by id (capacityreservation.Provider
// does): active ones whose end has not passed.
type Reservations interface {
	List(ctx context.Context, terms ...awsv1.CapacityReservationSelectorTerm) ([]ec2types.CapacityReservation, error)
}

// Controller deletes NodeClaims of ending capacity blocks.
type Controller struct {
	kube         client.Client
	reservations Reservations
	clk          clock.Clock
}

// NewController returns the controller; clk is the real clock when nil.
func NewController(kube client.Client, reservations Reservations, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, reservations: reservations, clk: clk}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return Name }

// Register adds the periodic check to mgr as a leader-elected runnable.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(c.Run)); err != nil {
		return fmt.Errorf("adding the %s controller: %w", Name, err)
	}
	return nil
}

// Run checks at once and then every Interval until ctx is done
// (periodic.Loop: a failed pass is logged and retried, a panic recovered).
func (c *Controller) Run(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("controller", Name)
	return periodic.Loop{Interval: Interval, Immediately: true, Pass: c.Reconcile, Log: logger, Failure: "expiring capacity block nodeclaims"}.Run(log.IntoContext(ctx, logger))
}

// Reconcile runs one pass. A block EC2 no longer lists as active (ended,
// or its end passed) is over as well: its NodeClaims go too.
func (c *Controller) Reconcile(ctx context.Context) error {
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{awsv1.LabelCapacityReservationType: string(awsv1.CapacityReservationTypeCapacityBlock)}); err != nil {
		return fmt.Errorf("listing capacity block nodeclaims: %w", err)
	}
	byReservation := map[string][]*v1.NodeClaim{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if id := reservationID(nc.Labels); id != "" && nc.DeletionTimestamp.IsZero() {
			byReservation[id] = append(byReservation[id], nc)
		}
	}
	if len(byReservation) == 0 {
		return nil
	}
	ids := make([]string, 0, len(byReservation))
	terms := make([]awsv1.CapacityReservationSelectorTerm, 0, len(byReservation))
	for id := range byReservation {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		terms = append(terms, awsv1.CapacityReservationSelectorTerm{ID: id})
	}
	found, err := c.reservations.List(ctx, terms...)
	if err != nil {
		return fmt.Errorf("describing capacity blocks: %w", err)
	}
	now := c.clk.Now()
	// The end of each block still listed; nil for one without an end.
	ends := map[string]*time.Time{}
	for _, r := range found {
		ends[aws.ToString(r.CapacityReservationId)] = r.EndDate
	}
	var errs []error
	for _, id := range ids {
		end, listed := ends[id]
		if listed && (end == nil || now.Before(end.Add(-capacityreservation.ExpirationWindow))) {
			continue
		}
		for _, nc := range byReservation[id] {
			if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); err != nil {
				if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					errs = append(errs, fmt.Errorf("deleting nodeclaim %s of expiring capacity block %s: %w", nc.Name, id, err))
				}
				continue
			}
			logger := log.FromContext(ctx).WithValues("NodeClaim", klog.KObj(nc), "capacity-reservation-id", id)
			if end != nil {
				logger = logger.WithValues("end-time", end.UTC().Format(time.RFC3339))
			}
			logger.Info("deleting nodeclaim of expiring capacity block")
		}
	}
	return errors.Join(errs...)
}

func reservationID(labels map[string]string) string {
	if id := labels[scheduling.LabelReservationID]; id != "" {
		return id
	}
	return labels[awsv1.LabelCapacityReservationID]
}
