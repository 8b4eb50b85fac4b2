package health

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/events"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Name is the controller name.
const Name = "node.health"

// AllowedUnhealthyFraction is the share of a pool's nodes (rounded up) that
// may be unhealthy while repair still acts, as upstream's "20%".
const AllowedUnhealthyFraction = 0.2

// blockedRequeue re-checks a blocked repair: the pool may recover without
// this node changing.
const blockedRequeue = time.Minute

// EventNodeRepairBlocked is the event reason of a blocked repair.
const EventNodeRepairBlocked = "NodeRepairBlocked"

// Policies is what the controller needs of the cloud provider.
type Policies interface {
	RepairPolicies() []cloudprovider.RepairPolicy
}

// Controller replaces unhealthy nodes.
type Controller struct {
	kube     client.Client
	policies Policies
	clock    clock.Clock
	recorder events.Recorder
}

// NewController builds the controller; a nil clock is the real one, a nil
// recorder drops events.
func NewController(kube client.Client, policies Policies, clk clock.Clock, recorder events.Recorder) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, policies: policies, clock: clk, recorder: recorder}
}

// Register adds the controller to mgr, watching Karpenter's nodes.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[v1.NodePoolLabelKey]
		return ok
	})
	return builder.ControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Node{}, builder.WithPredicates(managed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(c)
}

// Reconcile replaces the node once an unhealthy condition outlasted its
// toleration, unless too much of its pool is unhealthy.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() || node.Spec.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	claims, err := index.NodeClaimsForProviderID(ctx, c.kube, node.Spec.ProviderID)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(claims) != 1 {
		return reconcile.Result{}, nil // not ours, or an invariant the lifecycle reports
	}
	nc := claims[0]
	if !nc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	cond, toleration := c.unhealthy(node)
	if cond == nil {
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("Node", klog.KObj(node), "NodeClaim", klog.KObj(nc)))
	now := c.clock.Now()
	if deadline := cond.LastTransitionTime.Add(toleration); now.Before(deadline) {
		return reconcile.Result{RequeueAfter: deadline.Sub(now)}, nil
	}

	pool := nc.Labels[v1.NodePoolLabelKey]
	var scope []client.ListOption
	if pool != "" {
		scope = append(scope, client.MatchingLabels{v1.NodePoolLabelKey: pool})
	}
	unhealthy, total, err := c.count(ctx, scope...)
	if err != nil {
		return reconcile.Result{}, err
	}
	if allowed := AllowedUnhealthy(total); unhealthy > allowed {
		c.blocked(ctx, node, nc, pool)
		return reconcile.Result{RequeueAfter: blockedRequeue}, nil
	}

	if err := c.annotateDeadline(ctx, nc, now); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("deleting unhealthy nodeclaim %s: %w", nc.Name, err))
	}
	log.FromContext(ctx).Info("deleting unhealthy node", "condition", cond.Type, "status", cond.Status, "since", cond.LastTransitionTime.Time)
	capacityType := node.Labels[v1.CapacityTypeLabelKey]
	metrics.NodeClaimsDisruptedTotal.WithLabelValues(metrics.UnhealthyReason, pool, capacityType, "", "").Inc()
	metrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues(snakeCase(string(cond.Type)), pool, capacityType, nc.Status.ImageID).Inc()
	return reconcile.Result{}, nil
}

// AllowedUnhealthy is how many of total nodes may be unhealthy with repair
// still acting: 20%, rounded up (1 of 3, 2 of 10).
func AllowedUnhealthy(total int) int {
	return int(math.Ceil(float64(total) * AllowedUnhealthyFraction))
}

// unhealthy returns the node's condition that matches a policy, with that
// policy's toleration; when several match, the one whose toleration ends
// first.
func (c *Controller) unhealthy(node *corev1.Node) (*corev1.NodeCondition, time.Duration) {
	var found *corev1.NodeCondition
	var toleration time.Duration
	var end time.Time
	for _, p := range c.policies.RepairPolicies() {
		cond := condition(node, p.ConditionType)
		if cond == nil || cond.Status != p.ConditionStatus {
			continue
		}
		if e := cond.LastTransitionTime.Add(p.TolerationDuration); found == nil || e.Before(end) {
			found, toleration, end = cond, p.TolerationDuration, e
		}
	}
	return found, toleration
}

// count counts the nodes in scope and those matching any policy, however
// long they have matched.
func (c *Controller) count(ctx context.Context, scope ...client.ListOption) (unhealthy, total int, err error) {
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, scope...); err != nil {
		return 0, 0, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		total++
		for _, p := range c.policies.RepairPolicies() {
			if cond := condition(n, p.ConditionType); cond != nil && cond.Status == p.ConditionStatus {
				unhealthy++
				break
			}
		}
	}
	return unhealthy, total, nil
}

func (c *Controller) blocked(ctx context.Context, node *corev1.Node, nc *v1.NodeClaim, pool string) {
	msg := "more than 20% nodes are unhealthy in the nodepool"
	if pool == "" {
		msg = "more than 20% nodes are unhealthy in the cluster"
	}
	log.FromContext(ctx).Info("node repair blocked", "reason", msg)
	if c.recorder == nil {
		return
	}
	c.recorder.Eventf(node, corev1.EventTypeWarning, EventNodeRepairBlocked, "Cannot disrupt Node: %s", msg)
	c.recorder.Eventf(nc, corev1.EventTypeWarning, EventNodeRepairBlocked, "Cannot disrupt NodeClaim: %s", msg)
	if pool == "" {
		return
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: pool}, np); err == nil {
		c.recorder.Eventf(np, corev1.EventTypeWarning, EventNodeRepairBlocked, "Cannot disrupt NodePool: %s", msg)
	}
}

// annotateDeadline sets the termination deadline to now, so termination
// deletes the pods at once instead of draining them through PDBs. An
// earlier deadline already in place is kept.
func (c *Controller) annotateDeadline(ctx context.Context, nc *v1.NodeClaim, now time.Time) error {
	if s, ok := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil && !t.After(now) {
			return nil
		}
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	deadline := now.Format(time.RFC3339)
	nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] = deadline
	if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return fmt.Errorf("annotating nodeclaim %s with its termination deadline: %w", nc.Name, err)
	}
	log.FromContext(ctx).Info("annotated nodeclaim", v1.NodeClaimTerminationTimestampAnnotationKey, deadline)
	return nil
}

func condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// snakeCase renders a condition type as the metric's condition label:
// "Ready" → "ready", "MemoryPressure" → "memory_pressure".
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
