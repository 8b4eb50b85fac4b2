package cloudprovider

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Drift reasons, upstream's names: they become the reason of the
// NodeClaim's Drifted condition and the label of the drift metrics.
const (
	NodeClassDrift           cloudprovider.DriftReason = "NodeClassDrift"
	AMIDrift                 cloudprovider.DriftReason = "AMIDrift"
	SubnetDrift              cloudprovider.DriftReason = "SubnetDrift"
	SecurityGroupDrift       cloudprovider.DriftReason = "SecurityGroupDrift"
	CapacityReservationDrift cloudprovider.DriftReason = "CapacityReservationDrift"
	// RebalanceDrift (ours) is a NodeClaim the interruption controller
	// marked on a rebalance recommendation (INTERRUPTION_REPLACE_ON_REBALANCE).
	RebalanceDrift cloudprovider.DriftReason = "RebalanceRecommendation"
)

// IsDrifted implements cloudprovider.CloudProvider: whether the NodeClaim's
// instance no longer matches its EC2NodeClass, and the first reason found,
// in upstream's order: the static hash (no EC2 call), the image (the
// NodeClaim's status names it), then, from DescribeInstances, security
// groups, subnet and capacity reservation. A NodeClaim not launched yet, or
// whose class is gone, is not drifted: there is nothing to compare.
func (c *CloudProvider) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	if nc.Status.ProviderID == "" || nc.Spec.NodeClassRef == nil {
		return "", nil
	}
	// EC2 expects the instance to be interrupted soon: replace it first,
	// whatever else is true of it.
	if _, ok := nc.Annotations[awsv1.AnnotationRebalanceRecommendation]; ok {
		return RebalanceDrift, nil
	}
	nodeClass, err := c.nodeClass(ctx, nc.Spec.NodeClassRef)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("resolving node class %s: %w", nc.Spec.NodeClassRef.Name, err)
	}
	if reason := StaticDrift(nc, nodeClass); reason != "" {
		return reason, nil
	}
	var inst *instance.Instance
	image := nc.Status.ImageID
	if image == "" {
		// Launch records the image; a NodeClaim written by something else
		// may lack it, so ask EC2.
		if inst, err = c.launchedInstance(ctx, nc); err != nil {
			return "", err
		}
		image = inst.ImageID
	}
	reason, err := c.amiDrift(ctx, nc, nodeClass, image)
	if err != nil || reason != "" {
		return reason, err
	}
	if inst == nil {
		if inst, err = c.launchedInstance(ctx, nc); err != nil {
			return "", err
		}
	}
	for _, check := range []func(*v1.NodeClaim, *instance.Instance, *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error){
		securityGroupDrift, subnetDrift, capacityReservationDrift,
		func(nc *v1.NodeClaim, inst *instance.Instance, nodeClass *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error) {
			return c.placementGroupDrift(ctx, nc, inst, nodeClass)
		},
	} {
		if reason, err := check(nc, inst, nodeClass); err != nil || reason != "" {
			return reason, err
		}
	}
	return "", nil
}

// driftInstanceMaxAge is how old a view of an instance drift judges by:
// garbage collection's List refreshes every instance every two minutes and
// a launch records its own, so drift makes no call of its own per
// NodeClaim; a group or subnet changed behind Karpenter's back is seen
// within this long.
const driftInstanceMaxAge = 10 * time.Minute

func (c *CloudProvider) launchedInstance(ctx context.Context, nc *v1.NodeClaim) (*instance.Instance, error) {
	id, err := instance.ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: %w", nc.Name, err)
	}
	inst, err := c.opts.Instances.Cached(ctx, id, driftInstanceMaxAge)
	if err != nil {
		return nil, fmt.Errorf("getting instance of nodeclaim %s: %w", nc.Name, err)
	}
	return inst, nil
}

// StaticDrift compares the class hash the NodeClaim was launched with to
// the class's current one. Both come from annotations (the hash controller
// stamps the class); hashes of different versions were computed
// differently, so they are only compared when the versions agree.
func StaticDrift(nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass) cloudprovider.DriftReason {
	classHash, ok1 := nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHash]
	classVersion, ok2 := nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHashVersion]
	claimHash, ok3 := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]
	claimVersion, ok4 := nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion]
	if !ok1 || !ok2 || !ok3 || !ok4 || classVersion != claimVersion {
		return ""
	}
	if classHash != claimHash {
		return NodeClassDrift
	}
	return ""
}

// amiDrift: the image is not the one a launch of the NodeClaim's instance
// type would pick from the class's resolved AMIs now (imageFor, the same
// choice Create makes). Upstream maps each type to its first compatible
// AMI the same way, so an older image that still matches the selector has
// drifted once a newer one is resolved.
func (c *CloudProvider) amiDrift(ctx context.Context, nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass, image string) (cloudprovider.DriftReason, error) {
	if len(nodeClass.Status.AMIs) == 0 {
		return "", fmt.Errorf("no amis resolved for node class %s", nodeClass.Name)
	}
	name := nc.Labels[scheduling.LabelInstanceType]
	its, err := c.opts.InstanceTypes.List(ctx, nodeClass)
	if err != nil {
		return "", fmt.Errorf("listing instance types of %s: %w", nodeClass.Name, err)
	}
	var it *scheduling.InstanceType
	for _, candidate := range its {
		if candidate.Name == name {
			it = candidate
			break
		}
	}
	if it == nil {
		// The class no longer offers the type (e.g. its subnets moved to
		// zones without it). Upstream errors here, which would also hide
		// the subnet drift that explains it; the core check reports the
		// type itself (InstanceTypeNotFound), so skip only the image.
		return "", nil
	}
	if want, ok := imageFor(nodeClass, it); !ok || want != image {
		return AMIDrift, nil
	}
	return "", nil
}

// securityGroupDrift: the instance's groups are not exactly the resolved
// ones (a group added to the selector counts as much as one removed).
func securityGroupDrift(_ *v1.NodeClaim, inst *instance.Instance, nodeClass *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error) {
	want := sets.New[string]()
	for _, sg := range nodeClass.Status.SecurityGroups {
		want.Insert(sg.ID)
	}
	if want.Len() == 0 {
		// An empty status means resolution failed, not that no group is
		// wanted; judging against it would drift every node.
		return "", fmt.Errorf("no security groups resolved for node class %s", nodeClass.Name)
	}
	if !want.Equal(sets.New(inst.SecurityGroupIDs...)) {
		return SecurityGroupDrift, nil
	}
	return "", nil
}

// subnetDrift: the instance's subnet is no longer among the resolved ones.
func subnetDrift(_ *v1.NodeClaim, inst *instance.Instance, nodeClass *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error) {
	if len(nodeClass.Status.Subnets) == 0 {
		return "", fmt.Errorf("no subnets resolved for node class %s", nodeClass.Name)
	}
	for _, s := range nodeClass.Status.Subnets {
		if s.ID == inst.SubnetID {
			return "", nil
		}
	}
	return SubnetDrift, nil
}

// capacityReservationDrift: a reserved NodeClaim whose instance runs in a
// reservation the class no longer selects (deselected, or dropped from the
// status as it expires). Only NodeClaims launched as reserved are judged:
// EC2 may place an on-demand launch in an open reservation, and losing a
// reservation nobody asked for is not a reason to replace the node (it
// would be replaced into the same open reservation again).
func capacityReservationDrift(nc *v1.NodeClaim, inst *instance.Instance, nodeClass *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error) {
	if nc.Labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeReserved || inst.CapacityReservationID == "" {
		return "", nil
	}
	for _, cr := range nodeClass.Status.CapacityReservations {
		if cr.ID == inst.CapacityReservationID {
			return "", nil
		}
	}
	return CapacityReservationDrift, nil
}
