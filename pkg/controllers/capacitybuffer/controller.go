// Package capacitybuffer is the CapacityBuffer controller (gate
// CapacityBuffer): it resolves each buffer's pod shape (a PodTemplate, or
// the pod template of a Deployment, StatefulSet or ReplicaSet) and replica
// count (replicas, a percentage of the workload's replicas, capped by
// limits), writes the buffer's status, and publishes the buffer's virtual
// pods to state.Buffers, which every provisioning round plans for. It asks
// for a provisioning round after each change, and re-resolves every 30
// seconds as upstream.
package capacitybuffer

import (
	"context"
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// ReadyForProvisioning reasons, as upstream's.
const (
	ReasonResolved            = "Resolved"
	ReasonScalableRefNotFound = "ScalableRefNotFound"
	ReasonPodTemplateNotFound = "PodTemplateNotFound"
	ReasonResolutionFailed    = "ResolutionFailed"
)

// Resync is how often a buffer is re-resolved without an event.
const Resync = 30 * time.Second

// Trigger asks for a provisioning round.
type Trigger interface {
	Trigger(uid string)
}

// Controller reconciles CapacityBuffers.
type Controller struct {
	kube    client.Client
	buffers *state.Buffers
	trigger Trigger
}

// NewController returns the controller; trigger may be nil.
func NewController(kube client.Client, buffers *state.Buffers, trigger Trigger) *Controller {
	return &Controller{kube: kube, buffers: buffers, trigger: trigger}
}

// Register adds the controller to mgr: buffers, and the PodTemplates they
// name.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named("capacitybuffer").
		For(&v1beta1.CapacityBuffer{}).
		Watches(&corev1.PodTemplate{}, handler.EnqueueRequestsFromMapFunc(c.buffersOf)).
		Complete(c)
}

func (c *Controller) buffersOf(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &v1beta1.CapacityBufferList{}
	if err := c.kube.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if ref := list.Items[i].Spec.PodTemplateRef; ref != nil && ref.Name == obj.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile resolves one buffer, writes its status and publishes its
// virtual pods.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cb := &v1beta1.CapacityBuffer{}
	if err := c.kube.Get(ctx, req.NamespacedName, cb); err != nil {
		if apierrors.IsNotFound(err) {
			c.publish(req.NamespacedName, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := cb.DeepCopy()
	template, err := c.resolve(ctx, cb)
	cb.Status.ProvisioningStrategy = cb.Spec.ProvisioningStrategy
	if !equality.Semantic.DeepEqual(stored.Status, cb.Status) {
		if perr := c.kube.Status().Patch(ctx, cb, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); perr != nil {
			if apierrors.IsConflict(perr) || apierrors.IsNotFound(perr) {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, fmt.Errorf("patching capacitybuffer %s status: %w", req.NamespacedName, perr)
		}
	}
	if err != nil {
		c.publish(req.NamespacedName, nil)
		return reconcile.Result{}, err
	}
	var pods []*corev1.Pod
	if template != nil && active(cb) && cb.Status.Replicas != nil {
		pods = VirtualPods(cb, template, int(*cb.Status.Replicas))
	}
	c.publish(req.NamespacedName, pods)
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// publish replaces the buffer's virtual pods and asks for a round when
// they changed.
func (c *Controller) publish(key types.NamespacedName, pods []*corev1.Pod) {
	before := 0
	for _, p := range c.buffers.Pods() {
		if p.Annotations[v1beta1.BufferNamespaceAnnotation] == key.Namespace && p.Annotations[v1beta1.BufferNameAnnotation] == key.Name {
			before++
		}
	}
	c.buffers.Set(key, pods)
	if c.trigger != nil && (before != len(pods) || len(pods) > 0) {
		c.trigger.Trigger("")
	}
}

func active(cb *v1beta1.CapacityBuffer) bool {
	return cb.Spec.ProvisioningStrategy == nil || *cb.Spec.ProvisioningStrategy == v1beta1.ActiveProvisioningStrategy
}

// resolve finds the buffer's pod template and replica count and sets
// ReadyForProvisioning, status.podTemplateRef, podTemplateGeneration and
// replicas. It returns the template when resolved; an error only for
// failures worth retrying (not a missing object).
func (c *Controller) resolve(ctx context.Context, cb *v1beta1.CapacityBuffer) (*corev1.PodTemplateSpec, error) {
	fail := func(reason, message string) {
		cb.SetCondition(v1beta1.ReadyForProvisioningCondition, metav1.ConditionFalse, reason, message)
	}
	var template *corev1.PodTemplateSpec
	var workloadReplicas int32 = -1
	switch {
	case cb.Spec.PodTemplateRef != nil:
		pt := &corev1.PodTemplate{}
		if err := c.kube.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: cb.Spec.PodTemplateRef.Name}, pt); err != nil {
			if apierrors.IsNotFound(err) {
				fail(ReasonPodTemplateNotFound, err.Error())
				return nil, nil
			}
			fail(ReasonResolutionFailed, err.Error())
			return nil, err
		}
		template = &pt.Template
		gen := pt.Generation
		cb.Status.PodTemplateRef = &v1beta1.LocalObjectRef{Name: pt.Name}
		cb.Status.PodTemplateGeneration = &gen
	case cb.Spec.ScalableRef != nil:
		ref := cb.Spec.ScalableRef
		var obj client.Object
		switch ref.Kind {
		case v1beta1.KindDeployment:
			obj = &appsv1.Deployment{}
		case v1beta1.KindStatefulSet:
			obj = &appsv1.StatefulSet{}
		case v1beta1.KindReplicaSet:
			obj = &appsv1.ReplicaSet{}
		}
		if obj == nil || (ref.APIGroup != "" && ref.APIGroup != appsv1.GroupName) {
			fail(ReasonResolutionFailed, fmt.Sprintf("unsupported scalableRef %s %s: only apps Deployments, StatefulSets and ReplicaSets", ref.APIGroup, ref.Kind))
			return nil, nil
		}
		if err := c.kube.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: ref.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				fail(ReasonScalableRefNotFound, err.Error())
				return nil, nil
			}
			fail(ReasonResolutionFailed, err.Error())
			return nil, err
		}
		var replicas *int32
		switch w := obj.(type) {
		case *appsv1.Deployment:
			template, replicas = &w.Spec.Template, w.Spec.Replicas
		case *appsv1.StatefulSet:
			template, replicas = &w.Spec.Template, w.Spec.Replicas
		case *appsv1.ReplicaSet:
			template, replicas = &w.Spec.Template, w.Spec.Replicas
		}
		workloadReplicas = 1
		if replicas != nil {
			workloadReplicas = *replicas
		}
		cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration = nil, nil
	default:
		fail(ReasonResolutionFailed, "Neither podTemplateRef nor scalableRef is set")
		return nil, nil
	}
	n := Replicas(cb.Spec, requests(template), workloadReplicas)
	cb.Status.Replicas = &n
	cb.SetCondition(v1beta1.ReadyForProvisioningCondition, metav1.ConditionTrue, ReasonResolved, "Pod template resolved successfully")
	return template, nil
}

// Replicas is the buffer's replica count: the larger of spec.replicas and
// spec.percentage of the workload's replicas (rounded up, at least one when
// the percentage and the workload are not zero; workloadReplicas < 0 for a
// PodTemplate), capped by how many replicas' requests fit spec.limits; with
// neither replicas nor percentage, the limits alone decide.
func Replicas(spec v1beta1.CapacityBufferSpec, perReplica corev1.ResourceList, workloadReplicas int32) int32 {
	var candidates []int32
	if spec.Replicas != nil {
		candidates = append(candidates, *spec.Replicas)
	}
	if spec.Percentage != nil && workloadReplicas > 0 {
		p := int32(math.Ceil(float64(workloadReplicas) * float64(*spec.Percentage) / 100))
		if p < 1 && *spec.Percentage > 0 {
			p = 1
		}
		candidates = append(candidates, p)
	}
	desired := int32(0)
	for _, c := range candidates {
		desired = max(desired, c)
	}
	if len(spec.Limits) == 0 {
		return desired
	}
	capped, ok := int32(math.MaxInt32), false
	for name, limit := range spec.Limits {
		req, has := perReplica[name]
		if !has || req.IsZero() {
			continue
		}
		ok = true
		capped = min(capped, int32(limit.MilliValue()/req.MilliValue()))
	}
	switch {
	case !ok:
		return desired
	case len(candidates) == 0:
		return capped
	}
	return min(desired, capped)
}

// requests are one replica's requests: the sum over its containers.
func requests(t *corev1.PodTemplateSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range t.Spec.Containers {
		for name, q := range c.Resources.Requests {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// VirtualPods are n pods of the template, marked as the buffer's, with the
// lowest priority: pods that do not exist, for provisioning to keep room
// for.
func VirtualPods(cb *v1beta1.CapacityBuffer, template *corev1.PodTemplateSpec, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	priority := v1beta1.VirtualPodPriority
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s-buffer-%d", cb.Name, i),
				Namespace: cb.Namespace,
				UID:       types.UID(fmt.Sprintf("%s-buffer-%d", cb.UID, i)),
				Labels:    template.Labels,
				Annotations: map[string]string{
					v1beta1.FakePodAnnotationKey:      v1beta1.FakePodAnnotationValue,
					v1beta1.BufferNameAnnotation:      cb.Name,
					v1beta1.BufferNamespaceAnnotation: cb.Namespace,
				},
				CreationTimestamp: cb.CreationTimestamp,
			},
			Spec:   *template.Spec.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		p.Spec.NodeName = ""
		p.Spec.Priority = &priority
		p.Spec.PriorityClassName = ""
		out = append(out, p)
	}
	return out
}
