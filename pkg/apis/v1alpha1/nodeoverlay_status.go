package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// Reasons of Ready when ValidationSucceeded is not True, as upstream's
// status library writes them.
const (
	ReasonUnhealthyDependents   = "UnhealthyDependents"
	ReasonReconcilingDependents = "ReconcilingDependents"
)

// SetValidation sets ValidationSucceeded (a True condition's reason is its
// type) and Ready from it, and reports whether anything changed, so callers
// can skip a no-op status write.
func (in *NodeOverlay) SetValidation(status metav1.ConditionStatus, reason, message string) bool {
	if status == metav1.ConditionTrue {
		reason, message = ConditionTypeValidationSucceeded, ""
	}
	changed := in.setCondition(metav1.Condition{Type: ConditionTypeValidationSucceeded, Status: status, Reason: reason, Message: message})
	ready := metav1.Condition{Type: ConditionTypeReady, Status: metav1.ConditionTrue, Reason: ConditionTypeReady}
	switch status {
	case metav1.ConditionFalse:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonUnhealthyDependents, ConditionTypeValidationSucceeded+"=False"
	case metav1.ConditionUnknown:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, ReasonReconcilingDependents, ConditionTypeValidationSucceeded+"=Unknown"
	}
	return in.setCondition(ready) || changed
}

// IsReady reports whether the overlay's Ready condition is True: the
// controller evaluated it and it is in effect.
func (in *NodeOverlay) IsReady() bool {
	return meta.IsStatusConditionTrue(in.Status.Conditions, ConditionTypeReady)
}

// setCondition applies c, keeping the transition time when the status is
// unchanged.
func (in *NodeOverlay) setCondition(c metav1.Condition) bool {
	c.ObservedGeneration = in.Generation
	old := meta.FindStatusCondition(in.Status.Conditions, c.Type)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message &&
		old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(&in.Status.Conditions, c)
	return true
}
