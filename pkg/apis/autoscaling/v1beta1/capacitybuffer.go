package v1beta1

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Strategies, condition types, workload kinds and the markers of the
// virtual pods a buffer becomes, as upstream names them.
const (
	// ActiveProvisioningStrategy is the default and the only strategy
	// Karpenter acts on: keep capacity provisioned for the buffer.
	ActiveProvisioningStrategy = "buffer.x-k8s.io/active-capacity"

	// ReadyForProvisioningCondition: the buffer's pod shape and replica
	// count are resolved.
	ReadyForProvisioningCondition = "ReadyForProvisioning"
	// ProvisioningCondition: whether the buffer's room exists.
	ProvisioningCondition = "Provisioning"
	// LimitedByQuotasCondition: spec.limits capped the replicas.
	LimitedByQuotasCondition = "LimitedByQuotas"

	// Kinds spec.scalableRef may name.
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindReplicaSet  = "ReplicaSet"

	// FakePodAnnotationKey marks a virtual pod of a buffer, with value
	// FakePodAnnotationValue; BufferNameAnnotation and
	// BufferNamespaceAnnotation name the buffer.
	FakePodAnnotationKey      = "karpenter.sh/capacity-buffer-fake-pod"
	FakePodAnnotationValue    = "true"
	BufferNameAnnotation      = "karpenter.sh/capacity-buffer-name"
	BufferNamespaceAnnotation = "karpenter.sh/capacity-buffer-namespace"

	// VirtualPodPriority is the priority of virtual pods: any real pod
	// preempts them.
	VirtualPodPriority int32 = math.MinInt32
)

// CapacityBuffer keeps room in the cluster for a number of pods of a given
// shape that do not exist yet, so that they start without waiting for a
// node.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb,categories=autoscaling
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy",description="How the buffer is provisioned."
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name",description="The PodTemplate one buffer replica looks like."
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Replicas the buffer keeps room for."
// +kubebuilder:printcolumn:name="ConditionsType",type="string",JSONPath=".status.conditions[*].type",description="Condition types."
// +kubebuilder:printcolumn:name="ConditionsStatus",type="string",JSONPath=".status.conditions[*].status",description="Condition statuses."
// +kubebuilder:printcolumn:name="ConditionsReason",type="string",JSONPath=".status.conditions[*].reason",description="Condition reasons."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Age of the buffer."
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   CapacityBufferSpec   `json:"spec"`
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// Limits caps the resources the buffer's replicas may request in total.
type Limits corev1.ResourceList

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ScalableRef names a workload in the buffer's namespace (Deployment,
// StatefulSet or ReplicaSet) whose pod template one replica looks like.
type ScalableRef struct {
	// APIGroup of the workload ("apps"); empty means the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the workload.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// CapacityBufferSpec says what one replica looks like and how many to keep
// room for.
//
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="If podTemplateRef is set, replicas or limits must also be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="You must define either PodTemplateRef or ScalableRef, but not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the room is kept; Karpenter acts only
	// on buffer.x-k8s.io/active-capacity.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`

	// PodTemplateRef names a PodTemplate in this namespace: one replica.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`

	// ScalableRef names a workload whose pod template is one replica.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`

	// Replicas is how many replicas to keep room for.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=false
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Percentage of the workload's replicas (scalableRef only) to keep
	// room for, rounded up. With replicas too, the larger count wins.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=false
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`

	// Limits caps the replicas by the total of their requests; alone, it
	// sets the count.
	// +optional
	Limits Limits `json:"limits,omitempty"`
}

// CapacityBufferStatus is what the controller resolved.
type CapacityBufferStatus struct {
	// PodTemplateRef names the PodTemplate the replicas were built from.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`

	// Replicas is the number of replicas room is kept for.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// PodTemplateGeneration is the generation of that PodTemplate.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`

	// Conditions: ReadyForProvisioning, Provisioning, LimitedByQuotas.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ProvisioningStrategy is the strategy in effect.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// SetCondition sets one condition, keeping its transition time when the
// status is unchanged, and reports whether anything changed.
func (in *CapacityBuffer) SetCondition(condType string, status metav1.ConditionStatus, reason, message string) bool {
	c := metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: in.Generation}
	old := meta.FindStatusCondition(in.Status.Conditions, condType)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(&in.Status.Conditions, c)
	return true
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
