package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types on an EC2NodeClass. Ready is the conjunction of the others;
// the provider refuses to launch from a class that is not Ready, so each one
// names a reason a launch would fail.
const (
	ConditionTypeReady                     = "Ready"
	ConditionTypeSubnetsReady              = "SubnetsReady"
	ConditionTypeSecurityGroupsReady       = "SecurityGroupsReady"
	ConditionTypeAMIsReady                 = "AMIsReady"
	ConditionTypeInstanceProfileReady      = "InstanceProfileReady"
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	ConditionTypePlacementGroupReady       = "PlacementGroupReady"
	ConditionTypeValidationSucceeded       = "ValidationSucceeded"
)

// Condition reasons the provider reads back.
const (
	// ReasonInstanceProfilePropagating (ours) keeps InstanceProfileReady
	// False while IAM propagates a profile the controller has just given
	// its role: EC2 would refuse a launch naming it.
	ReasonInstanceProfilePropagating = "InstanceProfilePropagating"
	// ReasonDependenciesNotReady (upstream's) is ValidationSucceeded's
	// reason while it waits for the images, subnets, security groups and
	// instance profile.
	ReasonDependenciesNotReady = "DependenciesNotReady"
)

// EC2NodeClassStatus is what the selectors resolved to. Launches read these
// ids rather than re-querying EC2, and drift compares against them.
type EC2NodeClassStatus struct {
	// Subnets resolved from subnetSelectorTerms.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups resolved from securityGroupSelectorTerms.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// CapacityReservations resolved from capacityReservationSelectorTerms.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// AMIs resolved from amiSelectorTerms, each with the node requirements
	// (architecture, accelerators) it is valid for.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile is the profile instances launch with: the one
	// created for spec.role, or spec.instanceProfile.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions report readiness of each resolved part.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// ID of the subnet.
	// +required
	ID string `json:"id"`
	// Zone is the subnet's availability zone name.
	// +required
	Zone string `json:"zone"`
	// ZoneID is the availability zone id (stable across accounts).
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID of the security group.
	// +required
	ID string `json:"id"`
	// Name of the security group.
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationType distinguishes ordinary reservations from
// time-boxed Capacity Blocks.
type CapacityReservationType string

const (
	CapacityReservationTypeDefault       CapacityReservationType = "default"
	CapacityReservationTypeCapacityBlock CapacityReservationType = "capacity-block"
)

// CapacityReservationState is active, or expiring when a capacity block is
// about to be reclaimed.
type CapacityReservationState string

const (
	CapacityReservationStateActive   CapacityReservationState = "active"
	CapacityReservationStateExpiring CapacityReservationState = "expiring"
)

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	// AvailabilityZone the reservation is in.
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// EndTime is when the reservation ends; unset means open-ended.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// ID of the reservation.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceMatchCriteria of the reservation.
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// InstanceType the reservation holds.
	// +required
	InstanceType string `json:"instanceType"`
	// Interruptible reservations may be reclaimed by their owner.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
	// OwnerID is the owning account.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// ReservationType of the reservation.
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType CapacityReservationType `json:"reservationType,omitempty"`
	// State of the reservation.
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State CapacityReservationState `json:"state,omitempty"`
}

// AMI is a resolved image.
type AMI struct {
	// ID of the image.
	// +required
	ID string `json:"id"`
	// Name of the image.
	// +optional
	Name string `json:"name,omitempty"`
	// Deprecated images are only used when nothing newer matches.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Requirements an instance type must meet to run this image.
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// ResolvedButProfilePropagating is whether all that keeps the class from
// Ready is IAM propagating its instance profile (and validation waiting
// for that): its images, subnets, security groups and profile name are
// resolved, so what a launch template holds is known, though no launch
// may use the profile yet.
func (in *EC2NodeClass) ResolvedButProfilePropagating() bool {
	if !in.DeletionTimestamp.IsZero() || in.Status.InstanceProfile == "" || len(in.Status.AMIs) == 0 ||
		len(in.Status.Subnets) == 0 || len(in.Status.SecurityGroups) == 0 {
		return false
	}
	propagating := false
	for _, c := range in.Status.Conditions {
		switch {
		case c.Type == ConditionTypeReady:
		case c.Type == ConditionTypeInstanceProfileReady:
			if c.Status != metav1.ConditionFalse || c.Reason != ReasonInstanceProfilePropagating {
				return false
			}
			propagating = true
		case c.Type == ConditionTypeValidationSucceeded && c.Reason == ReasonDependenciesNotReady:
		case c.Status != metav1.ConditionTrue:
			return false
		}
	}
	return propagating
}

// GetConditions returns the status conditions.
func (in *EC2NodeClass) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *EC2NodeClass) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}
