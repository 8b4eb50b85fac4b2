// Package partition labels the NodeClaims (and their Nodes) launched into a
// partition placement group with the partition EC2 put the instance in
// (karpenter.k8s.aws/placement-group-partition), when the launch could not
// tell: a NodeClaim that pins a partition gets it at launch, and the
// provider reads EC2's choice right after the launch, but an instance EC2
// does not report yet (eventual consistency) is left to this controller.
// Upstream blocks the NodeClaim's registration until the label is known
// (PlacementGroupRegistrationHook); ours labels the NodeClaim and the Node
// once DescribeInstances reports the partition.
package partition

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
)

// Instances reads instances (instance.Provider).
type Instances interface {
	Get(ctx context.Context, id string) (*instance.Instance, error)
}

// PlacementGroups resolves a class's selector (placementgroup.Provider).
type PlacementGroups interface {
	Get(ctx context.Context, sel *awsv1.PlacementGroupSelectorTerm) (*placementgroup.PlacementGroup, error)
}

// RetryAfter is how soon a NodeClaim whose partition EC2 does not report
// yet is looked at again.
var RetryAfter = 15 * time.Second

// Controller labels partitions.
type Controller struct {
	kube      client.Client
	instances Instances
	groups    PlacementGroups
}

// NewController returns the controller.
func NewController(kube client.Client, instances Instances, groups PlacementGroups) *Controller {
	return &Controller{kube: kube, instances: instances, groups: groups}
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "nodeclaim.placementgroup.partition" }

// Register watches the NodeClaims in a placement group without a partition
// label.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named(c.Name()).
		For(&v1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*v1.NodeClaim)
			return ok && needsPartition(nc)
		}), predicate.Funcs{DeleteFunc: func(event.DeleteEvent) bool { return false }})).
		Complete(c)
}

func needsPartition(nc *v1.NodeClaim) bool {
	if nc.Labels[awsv1.LabelPlacementGroupID] == "" || nc.Labels[awsv1.LabelPlacementGroupPartition] != "" {
		return false
	}
	return nc.DeletionTimestamp.IsZero() && nc.Status.ProviderID != "" && nc.Spec.NodeClassRef != nil && nc.Spec.NodeClassRef.Group == awsv1.Group
}

// Reconcile labels one NodeClaim, and its Node once it has one.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !needsPartition(nc) {
		return reconcile.Result{}, nil
	}
	// Only a partition group has partitions: the class's group says.
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Spec.NodeClassRef.Name}, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pg, err := c.groups.Get(ctx, class.Spec.PlacementGroupSelector)
	if err != nil {
		return reconcile.Result{}, err
	}
	if pg == nil || pg.ID != nc.Labels[awsv1.LabelPlacementGroupID] || pg.Strategy != placementgroup.StrategyPartition {
		return reconcile.Result{}, nil
	}
	id, err := instance.ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		return reconcile.Result{}, nil
	}
	inst, err := c.instances.Get(ctx, id)
	if cloudprovider.IsNodeClaimNotFoundError(err) {
		return reconcile.Result{RequeueAfter: RetryAfter}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading instance %s of nodeclaim %s: %w", id, nc.Name, err)
	}
	if inst.PartitionNumber == 0 {
		return reconcile.Result{RequeueAfter: RetryAfter}, nil
	}
	value := strconv.Itoa(int(inst.PartitionNumber))
	stored := nc.DeepCopy()
	nc.Labels[awsv1.LabelPlacementGroupPartition] = value
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("labelling nodeclaim %s: %w", nc.Name, err))
	}
	if nc.Status.NodeName == "" {
		return reconcile.Result{}, nil
	}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.Labels[awsv1.LabelPlacementGroupPartition] == value {
		return reconcile.Result{}, nil
	}
	storedNode := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[awsv1.LabelPlacementGroupPartition] = value
	if err := c.kube.Patch(ctx, node, client.MergeFrom(storedNode)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("labelling node %s: %w", node.Name, err))
	}
	return reconcile.Result{}, nil
}
