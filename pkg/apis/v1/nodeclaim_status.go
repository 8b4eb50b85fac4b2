package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim condition types. Ready is the conjunction of Launched, Registered
// and Initialized; the others describe disruption and termination progress.
const (
	ConditionTypeReady                = "Ready"
	ConditionTypeLaunched             = "Launched"
	ConditionTypeRegistered           = "Registered"
	ConditionTypeInitialized          = "Initialized"
	ConditionTypeConsolidatable       = "Consolidatable"
	ConditionTypeDrifted              = "Drifted"
	ConditionTypeDrained              = "Drained"
	ConditionTypeVolumesDetached      = "VolumesDetached"
	ConditionTypeInstanceTerminating  = "InstanceTerminating"
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
	// ConditionTypeDisruptionReason is True while a disruption command for the
	// NodeClaim is in flight; its reason is the DisruptionReason.
	ConditionTypeDisruptionReason = "DisruptionReason"
)

// NodeClaimReadyDependents are the conditions whose conjunction is the
// NodeClaim's Ready condition.
var NodeClaimReadyDependents = []string{ConditionTypeLaunched, ConditionTypeRegistered, ConditionTypeInitialized}

// NodeClaimStatus is what Karpenter and the cloud provider observed about a
// NodeClaim.
type NodeClaimStatus struct {
	// NodeName is the name of the Node that registered for this NodeClaim.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the cloud provider's identifier of the instance.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID identifies the machine image the instance runs.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the cloud provider's estimate of the node's capacity.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is the cloud provider's estimate of the node's allocatable
	// resources.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions report the NodeClaim's lifecycle.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// LastPodEventTime is the last time a pod was bound to the node, or left
	// it (went terminal or started terminating). consolidateAfter counts
	// from here.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitzero"`
}

// Condition has exactly the fields of metav1.Condition and converts to and
// from it with a plain type conversion. It exists because NodeClaim
// conditions are validated more loosely than metav1.Condition: the reason may
// be empty, and only type, status and lastTransitionTime are required.
type Condition struct {
	// Type of the condition, in CamelCase or foo.example.com/CamelCase.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	// +required
	Type string `json:"type"`
	// Status is True, False or Unknown.
	// +kubebuilder:validation:Enum=True;False;Unknown
	// +required
	Status metav1.ConditionStatus `json:"status"`
	// ObservedGeneration is the metadata.generation the condition was
	// computed from.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// Reason is a CamelCase code for the last transition; it may be empty.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$`
	// +optional
	Reason string `json:"reason"`
	// Message is a human-readable explanation of the last transition.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Message string `json:"message"`
}

// GetConditions returns the NodeClaim's conditions as metav1.Conditions, so
// that helpers written for metav1.Condition (such as
// k8s.io/apimachinery/pkg/api/meta.SetStatusCondition) work on them. The
// result is a copy.
func (in *NodeClaim) GetConditions() []metav1.Condition {
	if in.Status.Conditions == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in.Status.Conditions))
	for i, c := range in.Status.Conditions {
		out[i] = metav1.Condition(c)
	}
	return out
}

// SetConditions replaces the NodeClaim's conditions.
func (in *NodeClaim) SetConditions(conditions []metav1.Condition) {
	if conditions == nil {
		in.Status.Conditions = nil
		return
	}
	out := make([]Condition, len(conditions))
	for i, c := range conditions {
		out[i] = Condition(c)
	}
	in.Status.Conditions = out
}
