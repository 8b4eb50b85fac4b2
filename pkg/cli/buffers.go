package cli

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	"github.com/karpenter-go/karpenter/pkg/controllers/capacitybuffer"
)

// loadBuffers lists the CapacityBuffers, when the cluster serves them, and
// the pod template each resolves to (the PodTemplate its status names, or
// its scalableRef workload's template), kept as a PodTemplate named as the
// buffer. A template the user may not read, or that is gone, leaves the
// buffer without virtual pods in the answers.
func (o *Objects) loadBuffers(ctx context.Context, kube client.Reader) {
	list := &v1beta1.CapacityBufferList{}
	if err := kube.List(ctx, list); err != nil {
		return
	}
	o.CapacityBuffers = list.Items
	for i := range o.CapacityBuffers {
		cb := &o.CapacityBuffers[i]
		if template, ok := bufferTemplate(ctx, kube, cb); ok {
			o.BufferTemplates = append(o.BufferTemplates, corev1.PodTemplate{
				ObjectMeta: metav1.ObjectMeta{Namespace: cb.Namespace, Name: cb.Name}, Template: *template})
		}
	}
}

func bufferTemplate(ctx context.Context, kube client.Reader, cb *v1beta1.CapacityBuffer) (*corev1.PodTemplateSpec, bool) {
	switch {
	case cb.Status.PodTemplateRef != nil:
		pt := &corev1.PodTemplate{}
		if kube.Get(ctx, client.ObjectKey{Namespace: cb.Namespace, Name: cb.Status.PodTemplateRef.Name}, pt) != nil {
			return nil, false
		}
		return &pt.Template, true
	case cb.Spec.ScalableRef != nil:
		key := client.ObjectKey{Namespace: cb.Namespace, Name: cb.Spec.ScalableRef.Name}
		switch cb.Spec.ScalableRef.Kind {
		case v1beta1.KindDeployment:
			w := &appsv1.Deployment{}
			if kube.Get(ctx, key, w) == nil {
				return &w.Spec.Template, true
			}
		case v1beta1.KindStatefulSet:
			w := &appsv1.StatefulSet{}
			if kube.Get(ctx, key, w) == nil {
				return &w.Spec.Template, true
			}
		case v1beta1.KindReplicaSet:
			w := &appsv1.ReplicaSet{}
			if kube.Get(ctx, key, w) == nil {
				return &w.Spec.Template, true
			}
		}
	}
	return nil, false
}

// virtualPods are the CapacityBuffers' virtual pods as the controller
// publishes them: for each buffer the controller resolved
// (ReadyForProvisioning, which it writes only with the CapacityBuffer gate
// on) with the active strategy, status.replicas pods of its template.
func (o *Objects) virtualPods() []*corev1.Pod {
	templates := map[client.ObjectKey]*corev1.PodTemplateSpec{}
	for i := range o.BufferTemplates {
		templates[client.ObjectKeyFromObject(&o.BufferTemplates[i])] = &o.BufferTemplates[i].Template
	}
	var out []*corev1.Pod
	for i := range o.CapacityBuffers {
		cb := &o.CapacityBuffers[i]
		template := templates[client.ObjectKeyFromObject(cb)]
		active := cb.Spec.ProvisioningStrategy == nil || *cb.Spec.ProvisioningStrategy == v1beta1.ActiveProvisioningStrategy
		if template == nil || !active || cb.Status.Replicas == nil ||
			!meta.IsStatusConditionTrue(cb.Status.Conditions, v1beta1.ReadyForProvisioningCondition) {
			continue
		}
		out = append(out, capacitybuffer.VirtualPods(cb, template, int(*cb.Status.Replicas))...)
	}
	return out
}
