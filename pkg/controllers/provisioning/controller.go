package provisioning

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// retrigger is how often a pod (or disrupted node) that still needs capacity
// triggers another round: launches can fail and offerings can come back.
const retrigger = 10 * time.Second

// Triggerer is the part of the Provisioner the trigger controllers use.
type Triggerer interface {
	Trigger(uid string)
	TriggerPod(pod *corev1.Pod)
}

// TriggerController triggers provisioning from one kind of object (pods,
// nodes): fire looks at the object and triggers the Provisioner when it
// needs capacity, reporting whether it did; an object that did is looked
// at again after retrigger.
type TriggerController[T client.Object] struct {
	kube        client.Client
	provisioner Triggerer
	name        string
	object      func() T
	fire        func(T, Triggerer) bool
}

// PodController triggers provisioning for provisionable pods.
type PodController = TriggerController[*corev1.Pod]

// NodeController triggers provisioning while a Karpenter node carries the
// disrupted taint, so that replacement capacity for its pods is planned
// before they are evicted.
type NodeController = TriggerController[*corev1.Node]

// NewPodController returns the pod trigger.
func NewPodController(kube client.Client, p Triggerer) *PodController {
	return &PodController{kube: kube, provisioner: p, name: "provisioner.trigger.pod",
		object: func() *corev1.Pod { return &corev1.Pod{} },
		fire: func(pod *corev1.Pod, p Triggerer) bool {
			if !IsProvisionable(pod) {
				return false
			}
			p.TriggerPod(pod)
			return true
		}}
}

// NewNodeController returns the node trigger.
func NewNodeController(kube client.Client, p Triggerer) *NodeController {
	return &NodeController{kube: kube, provisioner: p, name: "provisioner.trigger.node",
		object: func() *corev1.Node { return &corev1.Node{} },
		fire: func(node *corev1.Node, p Triggerer) bool {
			if _, managed := node.Labels[v1.NodePoolLabelKey]; !managed {
				return false
			}
			for _, t := range node.Spec.Taints {
				if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
					p.Trigger(string(node.UID))
					return true
				}
			}
			return false
		}}
}

// Register adds the controller to mgr.
func (c *TriggerController[T]) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.name).For(c.object()).Complete(c)
}

// Reconcile triggers the batcher while the object needs capacity.
func (c *TriggerController[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := c.object()
	if err := c.kube.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if c.fire(obj, c.provisioner) {
		return reconcile.Result{RequeueAfter: retrigger}, nil
	}
	return reconcile.Result{}, nil
}
