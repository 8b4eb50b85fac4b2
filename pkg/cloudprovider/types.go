package cloudprovider

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// InstanceType and Offering are the solver's types. Aliases (not copies) so
// that GetInstanceTypes' result feeds scheduling.Input directly.
type (
	InstanceType = scheduling.InstanceType
	Offering     = scheduling.Offering
	OfferingKey  = scheduling.OfferingKey
)

// CloudProvider launches and terminates the machines behind NodeClaims.
// Implementations must be safe for concurrent use: every controller shares
// one instance.
type CloudProvider interface {
	// Create launches a machine for the NodeClaim and returns a copy of it
	// with what the launch resolved: status.providerID, capacity and
	// allocatable, and labels for the chosen instance type, zone and
	// capacity type. It does not wait for the machine to register as a Node.
	// Failures should be one of the typed errors in this package so the
	// lifecycle knows whether to delete the NodeClaim or retry.
	//
	// Create must be idempotent for a NodeClaim: called again for a
	// NodeClaim it already launched an instance for (the controller
	// restarted after the launch, or the status write that records the
	// provider ID was lost), it returns that instance, found by something
	// derived from the NodeClaim (its name, or a tag of it), and does not
	// launch a second one. The lifecycle remembers launches only in memory,
	// so this is what keeps a restart from leaking an instance.
	Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error)
	// Delete terminates the NodeClaim's machine. Callers repeat it until it
	// returns a NodeClaimNotFoundError, which is the only proof the machine
	// is gone.
	Delete(ctx context.Context, nodeClaim *v1.NodeClaim) error
	// Get returns the NodeClaim view of the machine with this provider ID, or
	// a NodeClaimNotFoundError.
	Get(ctx context.Context, providerID string) (*v1.NodeClaim, error)
	// List returns every machine the provider manages, as NodeClaims, so
	// garbage collection can find machines without a NodeClaim. Each should
	// carry the instance's creation time (CreationTimestamp) and the name
	// of the NodeClaim it was launched for; an instance without a creation
	// time is aged from when garbage collection first sees it.
	List(ctx context.Context) ([]*v1.NodeClaim, error)
	// GetInstanceTypes returns every instance type the NodePool may use,
	// including offerings that are currently unavailable (Available=false),
	// so callers can explain why nothing fits. Callers must not modify the
	// returned values.
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*InstanceType, error)
	// IsDrifted reports provider-side drift (e.g. a new image); "" means none.
	IsDrifted(ctx context.Context, nodeClaim *v1.NodeClaim) (DriftReason, error)
	// RepairPolicies lists the node conditions that make a node unhealthy
	// and how long each is tolerated before the node is replaced.
	RepairPolicies() []RepairPolicy
	// Name identifies the provider in metrics and logs.
	Name() string
	// GetSupportedNodeClasses lists the NodeClass kinds the provider accepts;
	// the first is the default.
	GetSupportedNodeClasses() []NodeClass
}

// DriftReason names why a NodeClaim no longer matches its NodeClass.
type DriftReason string

// RepairPolicy says a node whose ConditionType has had ConditionStatus for
// longer than TolerationDuration is unhealthy and should be replaced.
type RepairPolicy struct {
	ConditionType      corev1.NodeConditionType
	ConditionStatus    corev1.ConditionStatus
	TolerationDuration time.Duration
}

// NodeClass is what a provider-specific NodeClass object must offer the core
// controllers: it is an API object and reports readiness conditions.
type NodeClass interface {
	client.Object
	GetConditions() []metav1.Condition
}

// Allocatable is what pods can use on a node of this type: capacity minus
// overhead, never below zero.
func Allocatable(it *InstanceType) corev1.ResourceList {
	out := make(corev1.ResourceList, len(it.Capacity))
	for name, qty := range it.Capacity {
		q := qty.DeepCopy()
		if o, ok := it.Overhead[name]; ok {
			q.Sub(o)
			if q.Sign() < 0 {
				q = *resource.NewQuantity(0, q.Format)
			}
		}
		out[name] = q
	}
	return out
}

// Key names the offering in the insufficient-capacity cache.
func Key(it *InstanceType, o *Offering) OfferingKey {
	return OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
}

// NodeClaimRequirements parses a NodeClaim's spec.requirements into the
// solver's label algebra.
func NodeClaimRequirements(nc *v1.NodeClaim) (scheduling.Requirements, error) {
	in := make([]scheduling.RequirementWithMinValues, 0, len(nc.Spec.Requirements))
	for _, r := range nc.Spec.Requirements {
		in = append(in, scheduling.RequirementWithMinValues{
			Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues,
		})
	}
	reqs, err := scheduling.RequirementsFromMinValues(in)
	if err != nil {
		return nil, fmt.Errorf("parsing requirements of nodeclaim %s: %w", nc.Name, err)
	}
	return reqs, nil
}

// ClassDrifter is a provider that can tell, from a NodeClaim and a NodeClass
// object alone (no cloud call), the drift the class causes: the static
// fields a class hash covers. `karpenter simulate` judges proposed class
// edits with it, before they are applied.
type ClassDrifter interface {
	StaticDrift(nodeClaim *v1.NodeClaim, nodeClass NodeClass) DriftReason
}
