package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
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
	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
)

// Name is the controller name, which also appears as "controller" in logs.
const Name = "nodeclaim.lifecycle"

// Defaults for Options.
const (
	DefaultRegistrationTTL = 15 * time.Minute
	DefaultLaunchTimeout   = 5 * time.Minute
	// launchCacheTTL bounds how long a launch result is remembered; the
	// status patch that makes it durable normally lands within seconds.
	launchCacheTTL = time.Hour
	// instanceTerminationRequeue is how often Delete is repeated until the
	// provider reports the instance gone.
	instanceTerminationRequeue = 5 * time.Second
)

// Options tune the controller. The zero value is the production setup.
type Options struct {
	// Clock drives timeouts and condition transition times.
	Clock clock.Clock
	// Recorder publishes Kubernetes events; Register fills it from the
	// manager when nil.
	Recorder events.Recorder
	// Unavailable receives offerings that failed with insufficient
	// capacity; a private cache is made when nil.
	Unavailable *cloudprovider.UnavailableOfferings
	// RegistrationTTL is how long a launched NodeClaim may go without a
	// registered Node before it is deleted (15m).
	RegistrationTTL time.Duration
	// LaunchTimeout is how long a NodeClaim may fail to launch before it
	// is deleted (5m).
	LaunchTimeout time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles (100).
	MaxConcurrentReconciles int
	// Health receives each NodeClaim's outcome (registered, or given up on
	// at the launch or registration timeout) for its NodePool's
	// NodeRegistrationHealthy condition; nil records nothing.
	Health *nodepoolhealth.Tracker
}

// Controller reconciles NodeClaims through launch, registration,
// initialization and liveness, and finalizes them on deletion.
type Controller struct {
	kube    client.Client
	cloud   cloudprovider.CloudProvider
	opts    Options
	managed func(*v1.NodeClaim) bool

	mu       sync.Mutex
	launched map[types.UID]launchEntry
	// written are the versions this controller wrote over.
	written *superseded
}

type launchEntry struct {
	nodeClaim *v1.NodeClaim
	expires   time.Time
}

// NewController builds the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Unavailable == nil {
		opts.Unavailable = cloudprovider.NewUnavailableOfferings(opts.Clock, 0)
	}
	if opts.RegistrationTTL <= 0 {
		opts.RegistrationTTL = DefaultRegistrationTTL
	}
	if opts.LaunchTimeout <= 0 {
		opts.LaunchTimeout = DefaultLaunchTimeout
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 100
	}
	return &Controller{
		kube:     kube,
		cloud:    cloud,
		opts:     opts,
		managed:  cloudprovider.ManagedBy(kube.Scheme(), cloud),
		launched: map[types.UID]launchEntry{},
		written:  newSuperseded(opts.Clock),
	}
}

// Unavailable returns the insufficient-capacity cache the controller writes,
// for the provisioner to read.
func (c *Controller) Unavailable() *cloudprovider.UnavailableOfferings { return c.opts.Unavailable }

// Register adds the controller to the manager: NodeClaims drive it, and Node
// changes wake the NodeClaim with the same provider ID.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := index.RegisterIndexes(ctx, mgr); err != nil {
		return err
	}
	if c.opts.Recorder == nil {
		c.opts.Recorder = mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // the describe output shows core/v1 events from "karpenter"
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*v1.NodeClaim)
			return ok && c.managed(nc)
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.nodeToNodeClaims)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles,
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter[reconcile.Request](
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute),
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(100), 1000)},
			),
		}).
		Complete(c)
}

func (c *Controller) nodeToNodeClaims(ctx context.Context, o client.Object) []reconcile.Request {
	node, ok := o.(*corev1.Node)
	if !ok || node.Spec.ProviderID == "" {
		return nil
	}
	claims, err := index.NodeClaimsForProviderID(ctx, c.kube, node.Spec.ProviderID)
	if err != nil {
		log.FromContext(ctx).Error(err, "mapping node to nodeclaims", "Node", node.Name)
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims))
	for _, nc := range claims {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	}
	return out
}

// pass is what one reconcile's steps hand on: what may only happen once
// the status that justifies it is stored (log lines, events, metrics; if
// the patch fails, typically a conflict with a stale cache, the next
// reconcile recomputes them, so they are emitted once, not once per
// attempt), and the Node as registration wrote it.
type pass struct {
	committed []func()
	// node is the Node as registration's patch returned it. Initialization
	// in the same reconcile judges it rather than the cache's copy, which
	// has not delivered that patch yet and would still show the
	// unregistered taint registration removed: the status write would name
	// a taint already gone, and the next Node event would write it again.
	node *corev1.Node
}

// afterCommit defers f until the status is stored.
func (p *pass) afterCommit(f func()) { p.committed = append(p.committed, f) }

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !c.managed(nc) {
		return reconcile.Result{}, nil
	}
	if c.written.stale(nc) {
		// Our own write's event comes next (see superseded); the requeue
		// is only a safety net, answered from the cache.
		return reconcile.Result{RequeueAfter: staleRecheck}, nil
	}
	if nc.Status.ProviderID != "" {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("provider-id", nc.Status.ProviderID))
	}
	if !nc.DeletionTimestamp.IsZero() {
		return c.finalize(ctx, nc)
	}

	// The finalizer must be stored before anything is bought, or a delete
	// racing the launch would leak the instance.
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		stored := nc.DeepCopy()
		controllerutil.AddFinalizer(nc, v1.TerminationFinalizer)
		if err := guardedpatch.Patch(ctx, c.kube, stored, nc); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("adding termination finalizer: %w", err))
		}
		c.written.wrote(nc, stored.ResourceVersion, nc.ResourceVersion)
	}

	stored := nc.DeepCopy()
	now := c.opts.Clock.Now()
	nc.InitializeConditions(now)
	before := nc.DeepCopy()
	var p pass

	steps := []func(context.Context, *v1.NodeClaim, *pass) (reconcile.Result, bool, error){
		c.launch, c.register, c.initialize, c.liveness,
	}
	var results []reconcile.Result
	var errs []error
	for _, step := range steps {
		res, deleted, err := step(ctx, nc, &p)
		if deleted {
			// The NodeClaim is going away; its finalizer takes over.
			return reconcile.Result{}, err
		}
		results = append(results, res)
		if err != nil {
			errs = append(errs, err)
		}
	}
	nc.UpdateReady(c.opts.Clock.Now())

	if err := c.commit(ctx, stored, nc); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(errors.Join(append(errs, err)...))
	}
	for _, f := range p.committed {
		f()
	}
	events.PublishTransitions(c.opts.Recorder, before, nc)
	if len(errs) > 0 {
		if allConflicts(errs) {
			// Someone else wrote the Node first (the kubelet's status, the
			// node lifecycle controller's taints): read it again and retry,
			// without reporting the expected race as an error.
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, errors.Join(errs...)
	}
	return minResult(results...), nil
}

func allConflicts(errs []error) bool {
	for _, err := range errs {
		if !apierrors.IsConflict(err) {
			return false
		}
	}
	return true
}

// commit stores metadata and status changes, each as a guarded patch: the
// lists it replaces (finalizers, conditions) must still be what it read,
// so a write based on a stale read fails rather than undo someone else's,
// while a write beside it (pod events' lastPodEventTime) does not refuse
// it.
func (c *Controller) commit(ctx context.Context, stored, nc *v1.NodeClaim) error {
	metaChanged := !equality.Semantic.DeepEqual(stored.ObjectMeta, nc.ObjectMeta)
	statusChanged := !equality.Semantic.DeepEqual(stored.Status, nc.Status)
	if !metaChanged && !statusChanged {
		return nil
	}
	status := nc.Status.DeepCopy()
	base := stored
	if metaChanged {
		patched := nc.DeepCopy()
		if err := guardedpatch.Patch(ctx, c.kube, stored, patched); err != nil {
			return fmt.Errorf("patching nodeclaim: %w", err)
		}
		c.written.wrote(nc, stored.ResourceVersion, patched.ResourceVersion)
		base = patched
	}
	if statusChanged {
		target := base.DeepCopy()
		target.Status = *status
		if err := guardedpatch.PatchStatus(ctx, c.kube, base, target); err != nil {
			return fmt.Errorf("patching nodeclaim status: %w", err)
		}
		c.written.wrote(nc, base.ResourceVersion, target.ResourceVersion)
	}
	return nil
}

// finalize runs once the NodeClaim is being deleted: it stamps the drain
// deadline, deletes the Node (whose own finalizer drains it) and waits for
// it, then deletes the instance until the provider confirms it is gone.
func (c *Controller) finalize(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if err := c.annotateTerminationTime(ctx, nc); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}

	// A launch whose status patch never landed still has its result here;
	// without it the instance would only be found by garbage collection.
	providerID := nc.Status.ProviderID
	if providerID == "" {
		if cached := c.cachedLaunch(nc.UID); cached != nil {
			providerID = cached.Status.ProviderID
		}
	}

	// The Node is found by provider id whether or not Registered was
	// written: a registration whose status patch was lost, or a kubelet that
	// joined after the NodeClaim was deleted, still leaves a Node with pods
	// on it. Upstream deletes Nodes only of Registered NodeClaims.
	if providerID != "" {
		nodes, err := index.NodesForProviderID(ctx, c.kube, providerID)
		if err != nil {
			return reconcile.Result{}, err
		}
		for _, node := range nodes {
			if node.DeletionTimestamp.IsZero() {
				if err := c.ensureTerminationFinalizer(ctx, node); err != nil {
					if apierrors.IsConflict(err) {
						return reconcile.Result{Requeue: true}, nil
					}
					return reconcile.Result{}, client.IgnoreNotFound(err)
				}
				if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, fmt.Errorf("deleting node %s: %w", node.Name, err)
				}
			}
		}
		if len(nodes) > 0 {
			// The Node's termination drains it; its deletion wakes us, the
			// requeue is a safety net.
			return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
		}
	}

	if providerID != "" {
		target := nc.DeepCopy()
		target.Status.ProviderID = providerID
		err := c.cloud.Delete(ctx, target)
		if err != nil && !cloudprovider.IsNodeClaimNotFoundError(err) {
			if c.opts.Recorder != nil {
				c.opts.Recorder.Eventf(nc, corev1.EventTypeWarning, "FailedTermination", "Failed to terminate instance %s, %s", providerID, events.Truncate(err.Error()))
			}
			return reconcile.Result{}, fmt.Errorf("terminating instance %s: %w", providerID, err)
		}
		if err != nil {
			// Gone: from the first Delete that was accepted (0 when the
			// first call already found it gone).
			terminating := 0.0
			if cond := nc.Condition(v1.ConditionTypeInstanceTerminating); cond != nil && cond.Status == metav1.ConditionTrue {
				terminating = c.opts.Clock.Since(cond.LastTransitionTime.Time).Seconds()
			}
			metrics.NodeClaimsInstanceTerminationDurationSeconds.WithLabelValues(nc.Labels[v1.NodePoolLabelKey]).Observe(terminating)
		}
		if err == nil {
			stored := nc.DeepCopy()
			if nc.SetCondition(c.opts.Clock.Now(), v1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, v1.ConditionTypeInstanceTerminating, "") {
				if err := guardedpatch.PatchStatus(ctx, c.kube, stored, nc); err != nil {
					if apierrors.IsConflict(err) {
						return reconcile.Result{Requeue: true}, nil
					}
					return reconcile.Result{}, client.IgnoreNotFound(err)
				}
			}
			return reconcile.Result{RequeueAfter: instanceTerminationRequeue}, nil
		}
	}

	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, v1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("removing termination finalizer: %w", err))
	}
	c.forgetLaunch(nc.UID)
	logger := log.FromContext(ctx)
	if nc.Status.NodeName != "" {
		logger = logger.WithValues("Node", map[string]string{"name": nc.Status.NodeName})
	}
	logger.Info("deleted nodeclaim")
	if !stored.DeletionTimestamp.IsZero() {
		metrics.NodeClaimsTerminationDurationSeconds.WithLabelValues(nc.Labels[v1.NodePoolLabelKey]).Observe(c.opts.Clock.Since(stored.DeletionTimestamp.Time).Seconds())
	}
	metrics.NodeClaimsTerminatedTotal.WithLabelValues(nc.Labels[v1.NodePoolLabelKey], nc.Labels[v1.CapacityTypeLabelKey], nc.Labels[corev1.LabelTopologyZone]).Inc()
	return reconcile.Result{}, nil
}

// ensureTerminationFinalizer puts the termination finalizer on a Node that
// registration never reached, so deleting it drains it through the node
// termination controller instead of dropping it with its pods.
func (c *Controller) ensureTerminationFinalizer(ctx context.Context, node *corev1.Node) error {
	if controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
		return nil
	}
	stored := node.DeepCopy()
	controllerutil.AddFinalizer(node, v1.TerminationFinalizer)
	if err := guardedpatch.Patch(ctx, c.kube, stored, node); err != nil {
		return fmt.Errorf("adding termination finalizer to node %s: %w", node.Name, err)
	}
	return nil
}

// annotateTerminationTime records deletion time + terminationGracePeriod as
// the deadline by which the node's pods are deleted regardless of PDBs.
func (c *Controller) annotateTerminationTime(ctx context.Context, nc *v1.NodeClaim) error {
	if nc.Spec.TerminationGracePeriod == nil || nc.DeletionTimestamp.IsZero() {
		return nil
	}
	if _, ok := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		return nil
	}
	deadline := nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration).Format(time.RFC3339)
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] = deadline
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("annotating termination deadline: %w", err)
	}
	log.FromContext(ctx).Info("annotated nodeclaim", v1.NodeClaimTerminationTimestampAnnotationKey, deadline)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(nc, corev1.EventTypeWarning, "TerminationGracePeriodExpiring", "All pods will be deleted by %s", deadline)
	}
	return nil
}

func (c *Controller) cachedLaunch(uid types.UID) *v1.NodeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.launched[uid]
	if !ok {
		return nil
	}
	if !c.opts.Clock.Now().Before(e.expires) {
		delete(c.launched, uid)
		return nil
	}
	return e.nodeClaim
}

func (c *Controller) rememberLaunch(uid types.UID, nc *v1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	for k, e := range c.launched {
		if !now.Before(e.expires) {
			delete(c.launched, k)
		}
	}
	c.launched[uid] = launchEntry{nodeClaim: nc, expires: now.Add(launchCacheTTL)}
}

func (c *Controller) forgetLaunch(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.launched, uid)
}

// minResult merges step results: any immediate requeue wins, otherwise the
// shortest positive RequeueAfter.
func minResult(results ...reconcile.Result) reconcile.Result {
	var out reconcile.Result
	for _, r := range results {
		if r.Requeue { //nolint:staticcheck // Requeue is still how a step asks for a rate-limited retry
			out.Requeue = true //nolint:staticcheck
		}
		if r.RequeueAfter > 0 && (out.RequeueAfter == 0 || r.RequeueAfter < out.RequeueAfter) {
			out.RequeueAfter = r.RequeueAfter
		}
	}
	return out
}
