package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NodeOverlay condition types and reasons. Ready is ValidationSucceeded.
const (
	ConditionTypeReady = "Ready"
	// ConditionTypeValidationSucceeded is False when the overlay fails
	// runtime checks or conflicts with another overlay.
	ConditionTypeValidationSucceeded = "ValidationSucceeded"

	// ConditionReasonRuntimeValidation: the overlay failed a check CEL
	// cannot express.
	ConditionReasonRuntimeValidation = "RuntimeValidation"
	// ConditionReasonConflict: another overlay of the same weight sets the
	// same price or capacity on the same offering.
	ConditionReasonConflict = "Conflict"
)

// NodeOverlayStatus is what Karpenter observed about a NodeOverlay.
type NodeOverlayStatus struct {
	// Conditions report whether the overlay is in effect.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GetConditions returns the overlay's conditions.
func (in *NodeOverlay) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the overlay's conditions.
func (in *NodeOverlay) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}
