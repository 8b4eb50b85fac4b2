package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool condition types. Ready is the conjunction of ValidationSucceeded
// and NodeClassReady; NodeRegistrationHealthy is informational and does not
// gate Ready.
const (
	// ConditionTypeValidationSucceeded is False when the NodePool fails checks
	// that CEL cannot express (run by the NodePool validation controller).
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	// ConditionTypeNodeClassReady mirrors the Ready condition of the
	// referenced NodeClass.
	ConditionTypeNodeClassReady = "NodeClassReady"
	// ConditionTypeNodeRegistrationHealthy turns False when nodes launched
	// from this pool keep failing to register, which usually means a
	// misconfiguration a human must fix.
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
)

// NodePoolStatus is what Karpenter observed about a NodePool.
type NodePoolStatus struct {
	// Resources is the summed capacity of the pool's nodes.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// Nodes counts the pool's nodes. It is the scale subresource's status
	// replica count.
	// +kubebuilder:default:=0
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`

	// NodeClassObservedGeneration is the NodeClass generation last seen;
	// when the NodeClass changes, NodeRegistrationHealthy is reset to
	// Unknown so that the new configuration gets a fresh verdict.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`

	// Conditions report the pool's readiness.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePoolReadyDependents are the conditions whose conjunction is the
// NodePool's Ready condition.
var NodePoolReadyDependents = []string{ConditionTypeValidationSucceeded, ConditionTypeNodeClassReady}

// GetConditions returns the NodePool's conditions.
func (in *NodePool) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the NodePool's conditions.
func (in *NodePool) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}
