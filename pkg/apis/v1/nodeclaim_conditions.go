package v1

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MessageAwaitingReconciliation is the message of a condition nobody has
// evaluated yet (reason ReasonAwaitingReconciliation).
const MessageAwaitingReconciliation = "object is awaiting reconciliation"

// Condition returns the NodeClaim's condition of the given type, or nil.
func (in *NodeClaim) Condition(conditionType string) *Condition {
	for i := range in.Status.Conditions {
		if in.Status.Conditions[i].Type == conditionType {
			return &in.Status.Conditions[i]
		}
	}
	return nil
}

// IsTrue reports whether the NodeClaim's condition is present and True.
func (in *NodeClaim) IsTrue(conditionType string) bool {
	c := in.Condition(conditionType)
	return c != nil && c.Status == metav1.ConditionTrue
}

// SetCondition sets a condition, moving its transition time to now only
// when the status changes (so "how long has it been Unknown" stays
// answerable). An empty reason for True defaults to the condition type, as
// upstream shows in `kubectl describe`. It reports whether anything
// changed.
func (in *NodeClaim) SetCondition(now time.Time, conditionType string, status metav1.ConditionStatus, reason, message string) bool {
	if reason == "" && status == metav1.ConditionTrue {
		reason = conditionType
	}
	if c := in.Condition(conditionType); c != nil {
		changed := c.Status != status || c.Reason != reason || c.Message != message || c.ObservedGeneration != in.Generation
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, message, in.Generation
		return changed
	}
	in.Status.Conditions = append(in.Status.Conditions, Condition{
		Type: conditionType, Status: status, Reason: reason, Message: message,
		ObservedGeneration: in.Generation, LastTransitionTime: metav1.NewTime(now),
	})
	return true
}

// RemoveCondition drops the NodeClaim's condition of the given type
// (upstream removes Drifted and Consolidatable rather than setting them
// False). It reports whether the condition was there.
func (in *NodeClaim) RemoveCondition(conditionType string) bool {
	for i := range in.Status.Conditions {
		if in.Status.Conditions[i].Type == conditionType {
			in.Status.Conditions = append(in.Status.Conditions[:i], in.Status.Conditions[i+1:]...)
			return true
		}
	}
	return false
}

// InitializeConditions adds the lifecycle conditions (Launched, Registered,
// Initialized and Ready) as Unknown where missing, so their first real
// transition reads "Unknown -> True" and liveness can time from them.
func (in *NodeClaim) InitializeConditions(now time.Time) {
	for _, t := range append(append([]string(nil), NodeClaimReadyDependents...), ConditionTypeReady) {
		if in.Condition(t) == nil {
			in.SetCondition(now, t, metav1.ConditionUnknown, ReasonAwaitingReconciliation, MessageAwaitingReconciliation)
		}
	}
}

// UpdateReady recomputes Ready from Launched, Registered and Initialized:
// True when all are True, False when any is False, Unknown otherwise.
func (in *NodeClaim) UpdateReady(now time.Time) {
	var unhealthy []string
	status := metav1.ConditionTrue
	for _, t := range NodeClaimReadyDependents {
		c := in.Condition(t)
		switch {
		case c == nil || c.Status == metav1.ConditionUnknown:
			unhealthy = append(unhealthy, t+"=Unknown")
			if status == metav1.ConditionTrue {
				status = metav1.ConditionUnknown
			}
		case c.Status == metav1.ConditionFalse:
			unhealthy = append(unhealthy, t+"=False")
			status = metav1.ConditionFalse
		}
	}
	if status == metav1.ConditionTrue {
		in.SetCondition(now, ConditionTypeReady, status, ConditionTypeReady, "")
		return
	}
	in.SetCondition(now, ConditionTypeReady, status, ReasonUnhealthyDependents, strings.Join(unhealthy, ", "))
}
