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

// PodController triggers provisioning for provisionable pods.
type PodController struct {
	kube        client.Client
	provisioner Triggerer
}

// NewPodController returns the pod trigger.
func NewPodController(kube client.Client, p Triggerer) *PodController {
	return &PodController{kube: kube, provisioner: p}
}

// Register adds the controller to mgr.
func (c *PodController) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("provisioner.trigger.pod").
		For(&corev1.Pod{}).
		Complete(c)
}

// Reconcile triggers the batcher while the pod is provisionable.
func (c *PodController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := c.kube.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !IsProvisionable(pod) {
		return reconcile.Result{}, nil
	}
	c.provisioner.TriggerPod(pod)
	return reconcile.Result{RequeueAfter: retrigger}, nil
}

// NodeController triggers provisioning while a Karpenter node carries the
// disrupted taint, so that replacement capacity for its pods is planned
// before they are evicted.
type NodeController struct {
	kube        client.Client
	provisioner Triggerer
}

// NewNodeController returns the node trigger.
func NewNodeController(kube client.Client, p Triggerer) *NodeController {
	return &NodeController{kube: kube, provisioner: p}
}

// Register adds the controller to mgr.
func (c *NodeController) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("provisioner.trigger.node").
		For(&corev1.Node{}).
		Complete(c)
}

// Reconcile triggers the batcher while the node is being disrupted.
func (c *NodeController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if _, managed := node.Labels[v1.NodePoolLabelKey]; !managed {
		return reconcile.Result{}, nil
	}
	for _, t := range node.Spec.Taints {
		if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
			c.provisioner.Trigger(string(node.UID))
			return reconcile.Result{RequeueAfter: retrigger}, nil
		}
	}
	return reconcile.Result{}, nil
}
