package nodeclass

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// Condition reasons, upstream's strings.
const (
	ReasonSubnetsNotFound        = "SubnetsNotFound"
	ReasonSecurityGroupsNotFound = "SecurityGroupsNotFound"
	ReasonAMINotFound            = "AMINotFound"
	ReasonUnsupportedAlias       = "UnsupportedAlias"
	ReasonPlacementGroupNotFound = "PlacementGroupNotFound"
	ReasonResolutionFailed       = "ResolutionFailed"
	ReasonDependenciesNotReady   = awsv1.ReasonDependenciesNotReady
	ReasonTagValidationFailed    = "TagValidationFailed"
	ReasonDryRunDisabled         = "DryRunDisabled"
	ReasonUnhealthyDependents    = "UnhealthyDependents"
	ReasonAwaitingReconciliation = "AwaitingReconciliation"
)

// ReasonInstanceProfilePropagating is ours: InstanceProfileReady stays
// False for instanceprofile.PropagationDelay after the controller set the
// profile's role (upstream goes True at once and lets launches be refused
// until IAM has propagated it).
const ReasonInstanceProfilePropagating = awsv1.ReasonInstanceProfilePropagating

// readyDependents are the conditions Ready is the conjunction of without
// the ReservedCapacity gate; dependents adds CapacityReservationsReady when
// the gate is on.
var readyDependents = []string{
	awsv1.ConditionTypeAMIsReady,
	awsv1.ConditionTypeSubnetsReady,
	awsv1.ConditionTypeSecurityGroupsReady,
	awsv1.ConditionTypeInstanceProfileReady,
	awsv1.ConditionTypeValidationSucceeded,
	awsv1.ConditionTypePlacementGroupReady,
}

// dependents are the conditions Ready waits for: readyDependents, plus
// CapacityReservationsReady when reservations are resolved (the
// ReservedCapacity gate).
func dependents(reservations bool) []string {
	out := append([]string(nil), readyDependents...)
	if reservations {
		out = append(out, awsv1.ConditionTypeCapacityReservationsReady)
	}
	return out
}

// setTrue marks condType True with its own type as reason, as upstream's
// status library does.
func setTrue(nc *awsv1.EC2NodeClass, condType string) {
	setCondition(nc, condType, metav1.ConditionTrue, condType, "")
}

func setTrueWithReason(nc *awsv1.EC2NodeClass, condType, reason, message string) {
	setCondition(nc, condType, metav1.ConditionTrue, reason, message)
}

func setFalse(nc *awsv1.EC2NodeClass, condType, reason, message string) {
	setCondition(nc, condType, metav1.ConditionFalse, reason, message)
}

func setUnknown(nc *awsv1.EC2NodeClass, condType, reason, message string) {
	setCondition(nc, condType, metav1.ConditionUnknown, reason, message)
}

// setCondition keeps the transition time when the status is unchanged
// (meta.SetStatusCondition does that) and stamps the generation observed.
func setCondition(nc *awsv1.EC2NodeClass, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: nc.Generation,
	})
}

func conditionStatus(nc *awsv1.EC2NodeClass, condType string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(nc.Status.Conditions, condType); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

// initConditions adds every dependent still missing as Unknown, so a fresh
// object shows what it waits for.
func initConditions(nc *awsv1.EC2NodeClass, deps []string) {
	for _, dep := range deps {
		if meta.FindStatusCondition(nc.Status.Conditions, dep) == nil {
			setUnknown(nc, dep, ReasonAwaitingReconciliation, "object is awaiting reconciliation")
		}
	}
}

// recomputeReady sets Ready: True when every dependent is True, False when
// any is False, Unknown otherwise; a non-True Ready lists the dependents
// holding it back.
func recomputeReady(nc *awsv1.EC2NodeClass, deps []string) {
	var falses, unknowns []string
	for _, dep := range deps {
		switch conditionStatus(nc, dep) {
		case metav1.ConditionFalse:
			falses = append(falses, dep+"=False")
		case metav1.ConditionUnknown:
			unknowns = append(unknowns, dep+"=Unknown")
		}
	}
	switch {
	case len(falses) > 0:
		setFalse(nc, awsv1.ConditionTypeReady, ReasonUnhealthyDependents, strings.Join(append(falses, unknowns...), ", "))
	case len(unknowns) > 0:
		setUnknown(nc, awsv1.ConditionTypeReady, ReasonUnhealthyDependents, strings.Join(unknowns, ", "))
	default:
		setTrue(nc, awsv1.ConditionTypeReady)
	}
}
