// Package podevents owns NodeClaim status.lastPodEventTime: the last time a
// pod was bound to the NodeClaim's node, or left it (went terminal, started
// terminating, or was deleted). consolidateAfter counts from there. Writes
// are deduplicated: within 10 s of the last one a new event changes nothing,
// which keeps a busy node from writing its NodeClaim on every pod and stays
// below disruption's 15 s validation delay. The controller remembers its
// own stamps for those 10 s, so an event read from a cache that has not
// delivered the last stamp yet does not write it again.
//
// A stamp restarts consolidateAfter, so the disruption conditions
// controller would remove a NodeClaim's Consolidatable condition as soon as
// it read the stamp; the stamp removes it in the same write instead (one
// write, not two), guarded like every conditions write. When the guard
// refuses it, the stamp goes alone and the removal is left to the
// disruption conditions controller.
package podevents

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
)

// Name is the controller name.
const Name = "nodeclaim.podevents"

// DedupeTimeout is how long after one write further pod events are ignored
// (upstream's value).
const DedupeTimeout = 10 * time.Second

// Controller keeps lastPodEventTime. Its reconcile key is a Node's name.
type Controller struct {
	kube  client.Client
	clock clock.Clock

	mu sync.Mutex
	// stamped is the lastPodEventTime each NodeClaim was last given by
	// this controller, kept for DedupeTimeout: a busy node's pods bind
	// faster than the cache delivers the stamp.
	stamped map[types.UID]time.Time
}

// NewController builds the controller; a nil clock is the real one.
func NewController(kube client.Client, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, clock: clk, stamped: map[types.UID]time.Time{}}
}

// Register adds the controller to mgr. Pod events are mapped to the node
// they concern, so a pod that is already gone still counts.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := index.RegisterIndexes(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, Handler())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(c)
}

// Handler maps the pod events that matter to their node.
func Handler() handler.TypedEventHandler[*corev1.Pod, reconcile.Request] {
	enqueue := func(node string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if node != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
		}
	}
	return handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(EventNode(e.ObjectOld, e.ObjectNew), q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// A pod deleted without passing through terminating (forced)
			// leaves its node all the same; one that was terminating
			// already counted, and the dedupe absorbs the repeat.
			if e.Object != nil && !terminal(e.Object) {
				enqueue(e.Object.Spec.NodeName, q)
			}
		},
	}
}

// EventNode returns the node a pod update is a pod event for, or "": the
// pod was bound to it, went terminal on it, or started terminating on it.
// Creates are not events: after a restart every existing pod is "created"
// again, and that must not postpone every node's consolidation.
func EventNode(old, cur *corev1.Pod) string {
	switch {
	case cur.Spec.NodeName == "":
		return ""
	case old.Spec.NodeName == "":
		return cur.Spec.NodeName
	case !terminal(old) && terminal(cur):
		return cur.Spec.NodeName
	case old.DeletionTimestamp.IsZero() && !cur.DeletionTimestamp.IsZero():
		return cur.Spec.NodeName
	}
	return ""
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Reconcile stamps the node's NodeClaims with now, unless one was stamped
// less than DedupeTimeout ago.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	claims, err := index.NodeClaimsForProviderID(ctx, c.kube, node.Spec.ProviderID)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("finding nodeclaim for node %s: %w", node.Name, err)
	}
	now := c.clock.Now()
	for _, nc := range claims {
		if !nc.DeletionTimestamp.IsZero() {
			continue
		}
		if last := c.last(nc); !last.IsZero() && now.Sub(last) < DedupeTimeout {
			continue
		}
		if err := c.write(ctx, nc, now); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating lastPodEventTime of nodeclaim %s: %w", nc.Name, err))
		}
		c.stamp(nc, now)
	}
	return reconcile.Result{}, nil
}

// write stamps nc with now and, when the stamp ends its Consolidatable
// condition, removes that in the same write.
func (c *Controller) write(ctx context.Context, nc *v1.NodeClaim, now time.Time) error {
	stored := nc.DeepCopy()
	nc.Status.LastPodEventTime = metav1.NewTime(now)
	if c.endsConsolidatable(ctx, nc, now) {
		nc.RemoveCondition(v1.ConditionTypeConsolidatable)
		err := guardedpatch.PatchStatus(ctx, c.kube, stored, nc)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
		// The conditions changed since the read: the stamp alone.
		stored.DeepCopyInto(nc)
		nc.Status.LastPodEventTime = metav1.NewTime(now)
	}
	// Only this field is sent, so no other writer's change can be lost
	// and no optimistic lock is needed.
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return err
	}
	// The other controllers' guarded writes from the version this
	// replaced are then known to be refused as well as from ours.
	guardedpatch.Record(stored, nc)
	return nil
}

// endsConsolidatable is whether nc, stamped (its lastPodEventTime set as
// the server keeps it, in whole seconds), holds a Consolidatable condition
// the disruption conditions controller would remove: its pool's
// consolidateAfter has not passed since the stamp.
func (c *Controller) endsConsolidatable(ctx context.Context, nc *v1.NodeClaim, now time.Time) bool {
	if nc.Condition(v1.ConditionTypeConsolidatable) == nil {
		return false
	}
	pool, ok := nc.Labels[v1.NodePoolLabelKey]
	if !ok {
		return false
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: pool}, np); err != nil {
		return false
	}
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	stamp := now.Truncate(time.Second) // as the server keeps lastPodEventTime
	return after != nil && now.Sub(stamp) < *after
}

// last is nc's lastPodEventTime: the later of the cached one and this
// controller's own last stamp.
func (c *Controller) last(nc *v1.NodeClaim) time.Time {
	last := nc.Status.LastPodEventTime.Time
	c.mu.Lock()
	defer c.mu.Unlock()
	if own, ok := c.stamped[nc.UID]; ok && own.After(last) {
		return own
	}
	return last
}

// stamp remembers the stamp written on nc (as stored: the API server keeps
// whole seconds), and forgets those that no longer deduplicate anything.
func (c *Controller) stamp(nc *v1.NodeClaim, now time.Time) {
	at := nc.Status.LastPodEventTime.Time
	if at.IsZero() {
		at = now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, t := range c.stamped {
		if now.Sub(t) >= DedupeTimeout {
			delete(c.stamped, uid)
		}
	}
	c.stamped[nc.UID] = at
}
