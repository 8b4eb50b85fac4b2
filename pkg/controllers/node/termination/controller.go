package termination

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/events"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Name is the controller name.
const Name = "node.termination"

const (
	// drainRequeue paces drain passes while pods are leaving normally.
	drainRequeue = time.Second
	// blockedRequeue paces retries while a PDB or do-not-disrupt blocks.
	blockedRequeue = 5 * time.Second
	// instanceTerminationRequeue paces Delete until the provider reports
	// the instance gone.
	instanceTerminationRequeue = 5 * time.Second
)

// Options tune the controller; the zero value is the production setup.
type Options struct {
	Clock    clock.Clock
	Recorder events.Recorder
	// MaxConcurrentReconciles bounds parallel node terminations (100).
	MaxConcurrentReconciles int
	// Config, when set, is used for eviction calls (Register falls back to
	// the manager's). Evictions need their own REST client: client-go
	// silently retries a 429 for as long as its Retry-After says (10s, ten
	// times), which would stall a drain behind one PDB-protected pod.
	Config *rest.Config
}

// Controller finalizes deleting Nodes that carry the termination finalizer.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder events.Recorder
	opts     Options
	evictor  rest.Interface
	sent     sentEvents
}

// NewController builds the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 100
	}
	c := &Controller{kube: kube, cloud: cloud, clock: opts.Clock, recorder: opts.Recorder, opts: opts}
	if opts.Config != nil {
		// An invalid config fails again, with context, on first use.
		c.evictor, _ = evictionClient(opts.Config)
	}
	return c
}

func evictionClient(cfg *rest.Config) (rest.Interface, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building eviction client: %w", err)
	}
	return cs.CoreV1().RESTClient(), nil
}

// Register adds the controller to the manager. Pod deletions on a
// terminating node wake it, so drain progresses without polling.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := index.RegisterIndexes(ctx, mgr); err != nil {
		return err
	}
	if c.recorder == nil {
		c.recorder = mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // core/v1 events, as upstream shows them
	}
	if c.evictor == nil {
		ev, err := evictionClient(mgr.GetConfig())
		if err != nil {
			return err
		}
		c.evictor = ev
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Node{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return !o.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(o, v1.TerminationFinalizer)
		}))).
		Watches(&corev1.Pod{}, podEvents()).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](100*time.Millisecond, 10*time.Second),
		}).
		Complete(c)
}

// podEvents wakes a node's termination when one of its pods starts
// terminating or is gone; other pod churn is not its business.
func podEvents() handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Spec.NodeName}})
		}
	}
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !e.ObjectNew.GetDeletionTimestamp().IsZero() && e.ObjectOld.GetDeletionTimestamp().IsZero() {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// Reconcile implements reconcile.Reconciler. A conflict means we acted on
// a stale read; it is retried rather than reported.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil
	}
	return res, err
}

func (c *Controller) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("Node", map[string]string{"name": node.Name}))

	nodeClaim, err := c.nodeClaimFor(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nodeClaim != nil {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("NodeClaim", map[string]string{"name": nodeClaim.Name}))
		// Deleting the Node means deleting the machine: the NodeClaim goes
		// too, and its finalizer stamps the drain deadline we read below.
		if nodeClaim.DeletionTimestamp.IsZero() {
			if err := c.kube.Delete(ctx, nodeClaim); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting nodeclaim %s: %w", nodeClaim.Name, err)
			}
			// Re-read it: deletion bumped its version, and the conditions
			// we write below must not conflict with that.
			if nodeClaim, err = c.nodeClaimFor(ctx, node); err != nil {
				return reconcile.Result{}, err
			}
		}
	}

	// A node whose kubelet stopped reporting and whose instance is gone has
	// nothing left to drain.
	if !scheduling.NodeReady(node) && node.Spec.ProviderID != "" {
		if _, err := c.cloud.Get(ctx, node.Spec.ProviderID); cloudprovider.IsNodeClaimNotFoundError(err) {
			return reconcile.Result{}, c.removeFinalizer(ctx, node)
		} else if err != nil {
			return reconcile.Result{}, fmt.Errorf("getting instance %s: %w", node.Spec.ProviderID, err)
		}
	}

	deadline, err := terminationDeadline(nodeClaim)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := c.taint(ctx, node); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if deadline != nil {
		c.eventOnChange(node, corev1.EventTypeWarning, "TerminationGracePeriodExpiring", "All pods will be deleted by %s", deadline.Format(time.RFC3339))
	}

	res, err := c.drain(ctx, node, deadline, evictionReason(nodeClaim))
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("draining node: %w", err)
	}
	if !res.done {
		if res.blocked {
			c.eventOnChange(node, corev1.EventTypeWarning, "FailedDraining", "Failed to drain node, %s", res.waiting)
		}
		if err := c.setCondition(ctx, nodeClaim, v1.ConditionTypeDrained, metav1.ConditionUnknown, "Draining", "Draining"); err != nil {
			return reconcile.Result{}, err
		}
		after := drainRequeue
		if res.blocked {
			after = blockedRequeue
		}
		if deadline != nil {
			if until := deadline.Sub(c.clock.Now()); until > 0 && until < after {
				after = until
			}
		}
		return reconcile.Result{RequeueAfter: after}, nil
	}
	wasDrained := nodeClaim != nil && nodeClaim.IsTrue(v1.ConditionTypeDrained)
	pending, err := c.pendingVolumeAttachments(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	// Drained and VolumesDetached go in one write, and, once the instance's
	// Delete is accepted, InstanceTerminating with them: the pass that
	// finds the Node drained and its volumes detached (or past waiting for)
	// writes the NodeClaim once.
	drained := condition{v1.ConditionTypeDrained, metav1.ConditionTrue, v1.ConditionTypeDrained, ""}
	var detached condition
	switch {
	case len(pending) == 0:
		detached = condition{v1.ConditionTypeVolumesDetached, metav1.ConditionTrue, v1.ConditionTypeVolumesDetached, ""}
	case deadline == nil || c.clock.Now().Before(*deadline):
		// The attach-detach controller removes these once the pods are
		// gone; terminating first would strand the volumes.
		c.eventOnChange(node, corev1.EventTypeWarning, "AwaitingVolumeDetachment", "Awaiting deletion of %d VolumeAttachments bound to node", len(pending))
		if err := c.setConditions(ctx, nodeClaim, drained, condition{v1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, "AwaitingVolumeDetachment", "AwaitingVolumeDetachment"}); err != nil {
			return reconcile.Result{}, err
		}
		c.countDrained(node, nodeClaim, wasDrained)
		return reconcile.Result{RequeueAfter: drainRequeue}, nil
	default:
		detached = condition{v1.ConditionTypeVolumesDetached, metav1.ConditionFalse, "TerminationGracePeriodElapsed", "TerminationGracePeriodElapsed"}
	}

	target := nodeClaim
	if target == nil {
		target = &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	}
	target = target.DeepCopy()
	if target.Status.ProviderID == "" {
		target.Status.ProviderID = node.Spec.ProviderID
	}
	deleteErr := c.cloud.Delete(ctx, target)
	if deleteErr != nil && !cloudprovider.IsNodeClaimNotFoundError(deleteErr) {
		// The drain is done all the same.
		if err := c.setConditions(ctx, nodeClaim, drained, detached); err != nil {
			return reconcile.Result{}, err
		}
		c.countDrained(node, nodeClaim, wasDrained)
		c.eventOnChange(node, corev1.EventTypeWarning, "FailedTermination", "Failed to terminate instance %s, %s", target.Status.ProviderID, events.Truncate(deleteErr.Error()))
		return reconcile.Result{}, fmt.Errorf("terminating instance %s: %w", target.Status.ProviderID, deleteErr)
	}
	// InstanceTerminating turns True also when the instance is already
	// gone (reclaimed, or terminated by hand), as upstream's: the
	// NodeClaim's last status then says how its instance ended.
	if err := c.setConditions(ctx, nodeClaim, drained, detached, condition{v1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, v1.ConditionTypeInstanceTerminating, ""}); err != nil {
		return reconcile.Result{}, err
	}
	c.countDrained(node, nodeClaim, wasDrained)
	if deleteErr == nil {
		return reconcile.Result{RequeueAfter: instanceTerminationRequeue}, nil
	}
	return reconcile.Result{}, c.removeFinalizer(ctx, node)
}

// countDrained counts the Node drained once, when its NodeClaim's Drained
// condition turns True (as upstream, only for nodes with a NodeClaim).
func (c *Controller) countDrained(node *corev1.Node, nodeClaim *v1.NodeClaim, wasDrained bool) {
	if nodeClaim != nil && !wasDrained {
		metrics.NodesDrainedTotal.WithLabelValues(node.Labels[v1.NodePoolLabelKey]).Inc()
	}
}

// nodeClaimFor returns the NodeClaim with the node's provider ID, or nil
// when there is none (a Node someone gave our finalizer by hand still gets
// drained and terminated).
func (c *Controller) nodeClaimFor(ctx context.Context, node *corev1.Node) (*v1.NodeClaim, error) {
	claims, err := index.NodeClaimsForProviderID(ctx, c.kube, node.Spec.ProviderID)
	if err != nil {
		return nil, fmt.Errorf("finding nodeclaim for node %s: %w", node.Name, err)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	return claims[0], nil
}

func terminationDeadline(nc *v1.NodeClaim) (*time.Time, error) {
	if nc == nil {
		return nil, nil
	}
	s, ok := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]
	if !ok {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("parsing %s annotation %q: %w", v1.NodeClaimTerminationTimestampAnnotationKey, s, err)
	}
	return &t, nil
}

// taint cordons the node and adds the disrupted taint (replacing one with
// the same key and another effect), plus the label that takes it out of
// external load balancers.
func (c *Controller) taint(ctx context.Context, node *corev1.Node) error {
	stored := node.DeepCopy()
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == v1.DisruptedTaintKey && t.Effect != v1.DisruptedNoScheduleTaint.Effect {
			continue
		}
		taints = append(taints, t)
	}
	found := false
	for i := range taints {
		if taints[i].MatchTaint(&v1.DisruptedNoScheduleTaint) {
			found = true
		}
	}
	if !found {
		t := v1.DisruptedNoScheduleTaint
		now := metav1.NewTime(c.clock.Now())
		t.TimeAdded = &now
		taints = append(taints, t)
	}
	node.Spec.Taints = taints
	node.Spec.Unschedulable = true
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[v1.NodeExcludeFromExternalLoadBalancersLabelKey] = v1.NodeExcludeFromExternalLoadBalancersLabelValue
	if equality.Semantic.DeepEqual(stored, node) {
		return nil
	}
	// Refused only when the taints changed since the read (see guardedpatch).
	if err := guardedpatch.Patch(ctx, c.kube, stored, node); err != nil {
		return fmt.Errorf("tainting node %s: %w", node.Name, err)
	}
	if !found {
		log.FromContext(ctx).Info("tainted node", "taint", v1.DisruptedTaintKey+":"+string(v1.DisruptedNoScheduleTaint.Effect))
	}
	return nil
}

// pendingVolumeAttachments are the node's VolumeAttachments except those of
// volumes used by pods drain leaves behind (they will never detach first).
func (c *Controller) pendingVolumeAttachments(ctx context.Context, node *corev1.Node) ([]*storagev1.VolumeAttachment, error) {
	vas, err := index.VolumeAttachmentsOnNode(ctx, c.kube, node.Name)
	if err != nil {
		return nil, fmt.Errorf("listing volume attachments: %w", err)
	}
	if len(vas) == 0 {
		return nil, nil
	}
	pods, err := index.PodsOnNode(ctx, c.kube, node.Name)
	if err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	now := c.clock.Now()
	ignore := sets.New[string]()
	for _, p := range pods {
		if c.drainable(p, now) {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if vol.PersistentVolumeClaim == nil {
				continue
			}
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.kube.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: vol.PersistentVolumeClaim.ClaimName}, pvc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("getting pvc %s/%s: %w", p.Namespace, vol.PersistentVolumeClaim.ClaimName, err)
			}
			if pvc.Spec.VolumeName != "" {
				ignore.Insert(pvc.Spec.VolumeName)
			}
		}
	}
	var out []*storagev1.VolumeAttachment
	for _, va := range vas {
		pv := va.Spec.Source.PersistentVolumeName
		if pv == nil || ignore.Has(*pv) {
			continue
		}
		out = append(out, va)
	}
	return out, nil
}

// condition is a termination condition to set on the NodeClaim.
type condition struct {
	kind            string
	status          metav1.ConditionStatus
	reason, message string
}

// setCondition updates a termination condition on the NodeClaim, if there
// is one; a NodeClaim already gone is not an error.
func (c *Controller) setCondition(ctx context.Context, nc *v1.NodeClaim, conditionType string, status metav1.ConditionStatus, reason, message string) error {
	return c.setConditions(ctx, nc, condition{conditionType, status, reason, message})
}

// setConditions is setCondition for several conditions, in one write.
func (c *Controller) setConditions(ctx context.Context, nc *v1.NodeClaim, conditions ...condition) error {
	if nc == nil {
		return nil
	}
	stored := nc.DeepCopy()
	now := c.clock.Now()
	changed := false
	for _, cond := range conditions {
		changed = nc.SetCondition(now, cond.kind, cond.status, cond.reason, cond.message) || changed
	}
	if !changed {
		return nil
	}
	if err := guardedpatch.PatchStatus(ctx, c.kube, stored, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("setting %s on nodeclaim %s: %w", conditions[0].kind, nc.Name, err)
	}
	events.PublishTransitions(c.recorder, stored, nc)
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, node *corev1.Node) error {
	stored := node.DeepCopy()
	controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
	if equality.Semantic.DeepEqual(stored, node) {
		return nil
	}
	// A strategic merge patch removes just our entry from the finalizer
	// set, leaving anyone else's intact.
	if err := c.kube.Patch(ctx, node, client.StrategicMergeFrom(stored)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing termination finalizer: %w", err))
	}
	c.sent.forget(node.UID)
	log.FromContext(ctx).Info("deleted node")
	pool := node.Labels[v1.NodePoolLabelKey]
	metrics.NodesTerminatedTotal.WithLabelValues(pool, node.Labels[corev1.LabelTopologyZone]).Inc()
	// stored keeps the deletion timestamp the patched object may lack.
	if !stored.DeletionTimestamp.IsZero() {
		metrics.NodesTerminationDurationSeconds.WithLabelValues(pool).Observe(c.clock.Since(stored.DeletionTimestamp.Time).Seconds())
	}
	metrics.NodesLifetimeDurationSeconds.WithLabelValues(pool).Observe(c.clock.Since(stored.CreationTimestamp.Time).Seconds())
	return nil
}

// evictionReason is what karpenter_pods_drained_total counts a node's
// evictions under: the reason of the disruption command that owns it, or
// "Forceful Termination" for every other deletion.
func evictionReason(nc *v1.NodeClaim) string {
	if nc != nil {
		if cond := nc.Condition(v1.ConditionTypeDisruptionReason); cond != nil && cond.Status == metav1.ConditionTrue {
			return cond.Reason
		}
	}
	return metrics.ForcefulTerminationReason
}

func (c *Controller) event(obj runtime.Object, eventType, reason, format string, args ...interface{}) {
	if c.recorder != nil {
		c.recorder.Eventf(obj, eventType, reason, format, args...)
	}
}
