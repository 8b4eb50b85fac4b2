// Package capacitytype keeps the capacity-type label of reserved nodes
// true to EC2, as upstream's capacityreservation/capacitytype controller:
// every minute, a NodeClaim labelled karpenter.sh/capacity-type=reserved
// whose instance EC2 no longer reports in a capacity reservation (the
// reservation expired or was cancelled, and the instance runs on as
// on-demand capacity) is relabelled on-demand and loses its reservation
// labels, on the NodeClaim and on its Node. Reservation drift then replaces
// it if its class still wants reserved capacity, and the scheduler stops
// counting it against the reservation.
package capacitytype

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Name is the controller's name.
const Name = "capacityreservation.capacitytype"

// Interval is how often the labels are checked, as upstream.
const Interval = time.Minute

// ReservationLabels are the labels a reserved node loses when demoted: the
// core reservation-id label, the AWS id label (upstream's name for it) and
// the reservation's type and interruptibility.
var ReservationLabels = []string{
	scheduling.LabelReservationID,
	awsv1.LabelCapacityReservationID,
	awsv1.LabelCapacityReservationType,
	awsv1.LabelCapacityReservationInterruptible,
}

// Instances lists the cluster's instances (instance.Provider does).
type Instances interface {
	List(ctx context.Context) ([]*instance.Instance, error)
}

// Controller relabels demoted reserved nodes.
type Controller struct {
	kube      client.Client
	instances Instances
}

// NewController returns the controller.
func NewController(kube client.Client, instances Instances) *Controller {
	return &Controller{kube: kube, instances: instances}
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
	return periodic.Loop{Interval: Interval, Immediately: true, Pass: c.Reconcile, Log: logger, Failure: "syncing capacity types of reserved nodeclaims"}.Run(log.IntoContext(ctx, logger))
}

// Reconcile runs one pass. Instances EC2 did not list (terminated, or not
// launched yet) are left alone: there is nothing to compare with.
func (c *Controller) Reconcile(ctx context.Context) error {
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{v1.CapacityTypeLabelKey: v1.CapacityTypeReserved}); err != nil {
		return fmt.Errorf("listing reserved nodeclaims: %w", err)
	}
	if len(claims.Items) == 0 {
		return nil
	}
	insts, err := c.instances.List(ctx)
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	byID := make(map[string]*instance.Instance, len(insts))
	for _, inst := range insts {
		byID[inst.ID] = inst
	}
	var errs []error
	for i := range claims.Items {
		nc := &claims.Items[i]
		id, err := instance.ParseProviderID(nc.Status.ProviderID)
		if err != nil {
			continue
		}
		inst, ok := byID[id]
		if !ok || !demoted(inst) {
			continue
		}
		if err := c.demote(ctx, nc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// demoted is whether EC2 reports the instance as plain on-demand capacity.
func demoted(inst *instance.Instance) bool {
	return inst.CapacityReservationID == "" && inst.CapacityType != instance.CapacityTypeSpot
}

// demote relabels the NodeClaim and, once registered, its Node.
func (c *Controller) demote(ctx context.Context, nc *v1.NodeClaim) error {
	stored := nc.DeepCopy()
	relabel(nc.Labels)
	if !equality.Semantic.DeepEqual(stored.Labels, nc.Labels) {
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("relabelling nodeclaim %s as on-demand: %w", nc.Name, err))
		}
		log.FromContext(ctx).Info("reservation ended, relabelled nodeclaim as on-demand", "NodeClaim", klog.KObj(nc),
			"reservation-id", reservationID(stored.Labels))
	}
	if nc.Status.NodeName == "" {
		return nil // the Node registers with the NodeClaim's labels
	}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("getting node %s of nodeclaim %s: %w", nc.Status.NodeName, nc.Name, err)
	}
	storedNode := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	relabel(node.Labels)
	if equality.Semantic.DeepEqual(storedNode.Labels, node.Labels) {
		return nil
	}
	if err := c.kube.Patch(ctx, node, client.MergeFrom(storedNode)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("relabelling node %s as on-demand: %w", node.Name, err))
	}
	return nil
}

func relabel(labels map[string]string) {
	labels[v1.CapacityTypeLabelKey] = v1.CapacityTypeOnDemand
	for _, k := range ReservationLabels {
		delete(labels, k)
	}
}

func reservationID(labels map[string]string) string {
	if id := labels[scheduling.LabelReservationID]; id != "" {
		return id
	}
	return labels[awsv1.LabelCapacityReservationID]
}
