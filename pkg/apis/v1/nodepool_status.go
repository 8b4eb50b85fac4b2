package v1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// Reasons on a NodePool's Ready condition, as upstream's status library
// writes them: a True condition's reason is its own type, and Ready
// explains a non-True state by listing the dependents that are not True.
const (
	ReasonUnhealthyDependents    = "UnhealthyDependents"
	ReasonAwaitingReconciliation = "AwaitingReconciliation"
)

// IsReady reports whether the NodePool's Ready condition is True: only
// Ready pools are provisioned from.
func (in *NodePool) IsReady() bool {
	return meta.IsStatusConditionTrue(in.Status.Conditions, ConditionTypeReady)
}

// SetCondition sets one dependent condition (an empty reason on a True
// condition becomes the type, as upstream does) and recomputes Ready. It
// returns whether anything changed, so callers can skip a no-op status
// update.
func (in *NodePool) SetCondition(condType string, status metav1.ConditionStatus, reason, message string) bool {
	if reason == "" {
		reason = condType
		if status != metav1.ConditionTrue {
			reason = ReasonAwaitingReconciliation
		}
	}
	changed := in.setCondition(metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
	return in.recomputeReady() || changed
}

// setCondition applies c, keeping the transition time when the status is
// unchanged.
func (in *NodePool) setCondition(c metav1.Condition) bool {
	c.ObservedGeneration = in.Generation
	old := meta.FindStatusCondition(in.Status.Conditions, c.Type)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message &&
		old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(&in.Status.Conditions, c)
	return true
}

// recomputeReady makes Ready True when every dependent is True, False when
// any is False, and Unknown otherwise.
func (in *NodePool) recomputeReady() bool {
	var falses, unknowns []string
	for _, dep := range NodePoolReadyDependents {
		c := meta.FindStatusCondition(in.Status.Conditions, dep)
		switch {
		case c == nil || c.Status == metav1.ConditionUnknown:
			unknowns = append(unknowns, dep+"="+string(metav1.ConditionUnknown))
		case c.Status == metav1.ConditionFalse:
			falses = append(falses, dep+"="+string(metav1.ConditionFalse))
		}
	}
	ready := metav1.Condition{Type: ConditionTypeReady, Status: metav1.ConditionTrue, Reason: ConditionTypeReady}
	switch {
	case len(falses) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonUnhealthyDependents, strings.Join(append(falses, unknowns...), ", ")
	case len(unknowns) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, ReasonUnhealthyDependents, strings.Join(unknowns, ", ")
	}
	return in.setCondition(ready)
}
