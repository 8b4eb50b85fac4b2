// Package consistency owns a NodeClaim's ConsistentStateFound condition: at
// most every 10 minutes it compares an initialized node with what the cloud
// provider promised for it, and flags a node whose capacity falls short of
// the NodeClaim's by more than 10% for any requested resource (a wrong image,
// a misreported instance type, a kubelet reserving far more than expected),
// with a FailedConsistencyCheck event naming the resource. The first look
// is the lifecycle's, in the write that initializes the NodeClaim: a Node
// as promised gets ConsistentStateFound=True there, and this controller's
// first scan finds nothing to write.
package consistency

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/capacity"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/events"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
)

// Name is the controller name.
const Name = "nodeclaim.consistency"

const (
	// ScanPeriod is how often a NodeClaim is checked (upstream's).
	ScanPeriod = 10 * time.Minute
	// Condition reason and message on failure, and the event reason.
	ReasonFailed  = "ConsistencyCheckFailed"
	messageFailed = "Consistency Check Failed"
	EventReason   = "FailedConsistencyCheck"
)

// Controller runs the check.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder events.Recorder

	mu          sync.Mutex
	lastScanned map[types.UID]time.Time
}

// NewController builds the controller; a nil clock is the real one and a
// nil recorder is taken from the manager at Register.
func NewController(kube client.Client, clk clock.Clock, recorder events.Recorder) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, clock: clk, recorder: recorder, lastScanned: map[types.UID]time.Time{}}
}

// Register adds the controller to mgr.
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := index.RegisterIndexes(ctx, mgr); err != nil {
		return err
	}
	if c.recorder == nil {
		c.recorder = mgr.GetEventRecorderFor("karpenter") //nolint:staticcheck // core/v1 events, as upstream shows them
	}
	return ctrl.NewControllerManagedBy(mgr).Named(Name).For(&v1.NodeClaim{}).Complete(c)
}

// Reconcile checks the NodeClaim if it is due.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			c.forgetName(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !nc.DeletionTimestamp.IsZero() || !nc.IsTrue(v1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	now := c.clock.Now()
	if left := c.due(nc.UID, now); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	nodes, err := index.NodesForProviderID(ctx, c.kube, nc.Status.ProviderID)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("finding node for nodeclaim %s: %w", nc.Name, err)
	}
	if len(nodes) != 1 {
		return reconcile.Result{RequeueAfter: ScanPeriod}, nil // registration's business
	}
	issues := capacity.Shortfalls(nc, nodes[0])
	stored := nc.DeepCopy()
	if len(issues) > 0 {
		for _, issue := range issues {
			c.event(nc, issue)
		}
		nc.SetCondition(now, v1.ConditionTypeConsistentStateFound, metav1.ConditionFalse, ReasonFailed, messageFailed)
	} else {
		nc.SetCondition(now, v1.ConditionTypeConsistentStateFound, metav1.ConditionTrue, v1.ConditionTypeConsistentStateFound, "")
	}
	// Guarded: the conditions list is replaced whole (see guardedpatch).
	if err := guardedpatch.PatchStatus(ctx, c.kube, stored, nc); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("setting %s on nodeclaim %s: %w", v1.ConditionTypeConsistentStateFound, nc.Name, err))
	}
	events.PublishTransitions(c.recorder, stored, nc)
	c.scanned(nc.UID, now)
	return reconcile.Result{RequeueAfter: ScanPeriod}, nil
}

func (c *Controller) due(uid types.UID, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.lastScanned[uid]
	if !ok {
		return 0
	}
	return ScanPeriod - now.Sub(last)
}

func (c *Controller) scanned(uid types.UID, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastScanned[uid] = now
}

// forgetName drops scan times of NodeClaims that no longer exist; the
// request carries only the name, so stale entries are pruned by age.
func (c *Controller) forgetName(string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for uid, t := range c.lastScanned {
		if now.Sub(t) > 2*ScanPeriod {
			delete(c.lastScanned, uid)
		}
	}
}

func (c *Controller) event(nc *v1.NodeClaim, msg string) {
	if c.recorder != nil {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, EventReason, "%s", strings.TrimSpace(msg))
	}
}
