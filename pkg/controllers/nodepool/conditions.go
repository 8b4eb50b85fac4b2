package nodepool

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Reasons used on the Ready condition, as upstream's status library writes
// them: a True condition's reason is its own type, and Ready explains a
// non-True state by listing the dependents that are not True.
const (
	ReasonUnhealthyDependents    = "UnhealthyDependents"
	ReasonAwaitingReconciliation = "AwaitingReconciliation"
)

// SetCondition sets one dependent condition on np (an empty reason on a True
// condition becomes the type, as upstream does) and recomputes Ready. It
// returns whether anything changed, so callers can skip a no-op status
// update.
func SetCondition(np *v1.NodePool, condType string, status metav1.ConditionStatus, reason, message string) bool {
	if reason == "" {
		reason = condType
		if status != metav1.ConditionTrue {
			reason = ReasonAwaitingReconciliation
		}
	}
	changed := set(np, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
	return recomputeReady(np) || changed
}

// set applies c, keeping the transition time when the status is unchanged.
func set(np *v1.NodePool, c metav1.Condition) bool {
	c.ObservedGeneration = np.Generation
	old := meta.FindStatusCondition(np.Status.Conditions, c.Type)
	if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message &&
		old.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	meta.SetStatusCondition(&np.Status.Conditions, c)
	return true
}

// recomputeReady makes Ready True when every dependent is True, False when
// any is False, and Unknown otherwise.
func recomputeReady(np *v1.NodePool) bool {
	var falses, unknowns []string
	for _, dep := range v1.NodePoolReadyDependents {
		c := meta.FindStatusCondition(np.Status.Conditions, dep)
		switch {
		case c == nil || c.Status == metav1.ConditionUnknown:
			unknowns = append(unknowns, dep+"="+string(metav1.ConditionUnknown))
		case c.Status == metav1.ConditionFalse:
			falses = append(falses, dep+"="+string(metav1.ConditionFalse))
		}
	}
	ready := metav1.Condition{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}
	switch {
	case len(falses) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonUnhealthyDependents, strings.Join(append(falses, unknowns...), ", ")
	case len(unknowns) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, ReasonUnhealthyDependents, strings.Join(unknowns, ", ")
	}
	return set(np, ready)
}

// IsReady reports whether np's Ready condition is True.
func IsReady(np *v1.NodePool) bool {
	return meta.IsStatusConditionTrue(np.Status.Conditions, v1.ConditionTypeReady)
}
