// Package registrationhealth owns a NodePool's NodeRegistrationHealthy
// condition: it reads the pool's recent launch and registration outcomes
// (kept by state/nodepoolhealth and fed by the NodeClaim lifecycle) and
// reports False once half of them failed, True while fewer did, and Unknown
// until there is evidence for the current configuration. A change of the
// NodePool's or its NodeClass's generation starts the evidence afresh, so a
// fixed configuration is not held to the failures of the broken one.
package registrationhealth

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
)

// Name is the controller name.
const Name = "nodepool.registrationhealth"

// resync re-reads the tracker in case a wake-up was dropped.
const resync = 5 * time.Minute

// Controller sets NodeRegistrationHealthy on NodePools.
type Controller struct {
	kube    client.Client
	cloud   cloudprovider.CloudProvider
	tracker *nodepoolhealth.Tracker
}

// NewController builds the controller over the tracker the lifecycle feeds.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, tracker *nodepoolhealth.Tracker) *Controller {
	return &Controller{kube: kube, cloud: cloud, tracker: tracker}
}

// Register adds the controller to mgr: NodePools, every new outcome, and
// changes to the provider's NodeClasses (whose CRDs are installed) wake it.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	b := builder.ControllerManagedBy(mgr).Named(Name).For(&v1.NodePool{}).
		WatchesRawSource(source.Channel(c.tracker.Events(), &handler.EnqueueRequestForObject{}))
	for _, nc := range c.cloud.GetSupportedNodeClasses() {
		gvk, err := apiutil.GVKForObject(nc, mgr.GetScheme())
		if err != nil {
			return fmt.Errorf("resolving nodeclass kind %T: %w", nc, err)
		}
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			continue // CRD not installed: nothing to watch
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(c.poolsFor(gvk.GroupKind())))
	}
	return b.Complete(c)
}

func (c *Controller) poolsFor(gk schema.GroupKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &v1.NodePoolList{}
		if err := c.kube.List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			ref := list.Items[i].Spec.Template.Spec.NodeClassRef
			if ref != nil && ref.Name == obj.GetName() && ref.GroupKind() == gk {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
			}
		}
		return out
	}
}

// Reconcile writes the pool's condition from the tracker.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			c.tracker.Forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting nodepool %s: %w", req.Name, err)
	}
	classGen, err := c.nodeClassGeneration(ctx, np)
	if err != nil {
		return reconcile.Result{}, err
	}
	reset := c.tracker.SetGeneration(np.Name, nodepoolhealth.Generation{NodePool: np.Generation, NodeClass: classGen})
	current := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeNodeRegistrationHealthy)
	st := c.tracker.Status(np.Name)

	stored := np.DeepCopy()
	changed := false
	switch {
	case st.Known && st.Healthy:
		changed = np.SetCondition(v1.ConditionTypeNodeRegistrationHealthy, metav1.ConditionTrue, "", "")
	case st.Known:
		reason := st.Reason
		if reason == "" {
			reason = nodepoolhealth.ReasonRegistrationFailed
		}
		changed = np.SetCondition(v1.ConditionTypeNodeRegistrationHealthy, metav1.ConditionFalse, reason,
			fmt.Sprintf("%d of the last %d NodeClaims failed to launch or register", st.Failures, st.Observed))
	case reset || current == nil || current.ObservedGeneration != np.Generation:
		// No evidence for this configuration yet. (After a restart with no
		// new outcomes, a verdict for the same generation is kept.)
		changed = np.SetCondition(v1.ConditionTypeNodeRegistrationHealthy, metav1.ConditionUnknown, "", "")
	}
	if !changed {
		return reconcile.Result{RequeueAfter: resync}, nil
	}
	if err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating nodepool %s status: %w", np.Name, err))
	}
	return reconcile.Result{RequeueAfter: resync}, nil
}

// nodeClassGeneration is the generation of the NodeClass the pool
// references, 0 when there is none (the readiness controller reports that).
func (c *Controller) nodeClassGeneration(ctx context.Context, np *v1.NodePool) (int64, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return 0, nil
	}
	mapping, err := c.kube.RESTMapper().RESTMapping(ref.GroupKind())
	if err != nil {
		return 0, nil // kind not served: no NodeClass to follow
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("getting nodeclass %s: %w", ref.Name, err)
	}
	return obj.Generation, nil
}
