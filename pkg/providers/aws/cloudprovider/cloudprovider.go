// Package cloudprovider is the AWS implementation of
// cloudprovider.CloudProvider, assembled from the AWS parts: it resolves a
// NodeClaim's EC2NodeClass, lists its instance types (instancetypes),
// resolves and ensures launch templates with the family's user data
// (launchtemplate), launches through CreateFleet (instance), maps
// instances back to NodeClaims, and tells whether a launched instance still
// matches its class (drift.go). Launches go into a selected capacity
// reservation first when the NodeClaim allows reserved capacity and one
// has room (reserved.go).
package cloudprovider

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	coreoptions "github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// ProviderName is what Name returns.
const ProviderName = "aws"

// NodeClassKind is the NodeClass kind the provider launches from.
const NodeClassKind = "EC2NodeClass"

// InstanceTypes lists a class's instance types (instancetypes.Provider).
type InstanceTypes interface {
	List(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]*scheduling.InstanceType, error)
}

// LaunchTemplates finds or creates launch templates (launchtemplate.Provider).
type LaunchTemplates interface {
	EnsureAll(ctx context.Context, opts []*launchtemplate.Options) ([]launchtemplate.LaunchTemplate, error)
	// Invalidate forgets a cached template EC2 no longer has.
	Invalidate(name string)
	// Propagating is how long the named templates, if just created, may
	// still be unknown to CreateFleet.
	Propagating(names ...string) time.Duration
}

// Instances launches, finds and terminates instances (instance.Provider).
type Instances interface {
	Create(ctx context.Context, req instance.Request) (*instance.Instance, error)
	Get(ctx context.Context, id string) (*instance.Instance, error)
	// Cached is Get served from what the provider learnt within maxAge.
	Cached(ctx context.Context, id string, maxAge time.Duration) (*instance.Instance, error)
	List(ctx context.Context) ([]*instance.Instance, error)
	// Terminate returns the instance when this call terminated it, nil
	// while it already shuts down, and NodeClaimNotFoundError once gone;
	// launched (when known) keeps a fresh instance EC2 does not list yet
	// from being taken for gone.
	Terminate(ctx context.Context, id string, launched time.Time) (*instance.Instance, error)
}

// Reservations tracks how many more instances each capacity reservation
// can take (the capacity reservation provider). Create launches into a
// reservation only while Available reports room, and reports launches,
// terminations and reservations EC2 found full.
type Reservations interface {
	Available(id string) (int, bool)
	MarkLaunched(id string)
	MarkTerminated(id string)
	MarkUnavailable(id string)
}

// Subnets picks the subnet a launch uses in each zone and tracks the
// addresses launches take (subnet.Provider).
type Subnets interface {
	ZonalSubnetsForLaunch(ctx context.Context, nodeClass *awsv1.EC2NodeClass) (map[string]string, error)
	UpdateInflightIPs(chosen map[string]string, launched string)
}

// Options are the parts the provider is assembled from.
type Options struct {
	// Kube reads EC2NodeClasses (the manager's cache; the CLI's listed
	// objects).
	Kube            client.Reader
	InstanceTypes   InstanceTypes
	LaunchTemplates LaunchTemplates
	Instances       Instances
	// Subnets, when set, picks each zone's subnet by free addresses at
	// launch time; without it the class status's first subnet per zone
	// (most free addresses when the status was resolved) is used.
	Subnets Subnets
	// Cluster is what every node bootstraps with; Cluster.Name names the
	// cluster in tags.
	Cluster launchtemplate.Cluster
	// Reservations, when set (and the ReservedCapacity gate on), lets
	// Create launch into the class's capacity reservations; without it
	// reserved offerings are never launched into.
	Reservations Reservations
	// HashCABundle is the CA bundle the EC2NodeClass hash is computed with
	// (EC2NodeClass.Hash); it must be the hash controller's.
	HashCABundle *string
	// PlacementGroups resolves placementGroupSelector (placement.go);
	// without it a class with a selector cannot launch.
	PlacementGroups PlacementGroups
}

// CloudProvider is the AWS cloud provider. It is safe for concurrent use.
type CloudProvider struct {
	opts Options
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New assembles the provider.
func New(opts Options) *CloudProvider { return &CloudProvider{opts: opts} }

// Name implements cloudprovider.CloudProvider.
func (c *CloudProvider) Name() string { return ProviderName }

// GetSupportedNodeClasses implements cloudprovider.CloudProvider.
func (c *CloudProvider) GetSupportedNodeClasses() []cloudprovider.NodeClass {
	return []cloudprovider.NodeClass{&awsv1.EC2NodeClass{}}
}

// RepairPolicies implements cloudprovider.CloudProvider with upstream AWS's
// policies: kubelet Ready False or Unknown for 30 minutes, and the node
// monitoring agent's conditions.
func (c *CloudProvider) RepairPolicies() []cloudprovider.RepairPolicy {
	return []cloudprovider.RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
		{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
		{ConditionType: "StorageReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "NetworkingReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: "ContainerRuntimeReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	}
}

// GetInstanceTypes implements cloudprovider.CloudProvider: the instance
// types of the NodePool's EC2NodeClass.
func (c *CloudProvider) GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	ref := nodePool.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return nil, fmt.Errorf("nodepool %s has no nodeClassRef", nodePool.Name)
	}
	nodeClass, err := c.nodeClass(ctx, ref)
	if err != nil {
		// A missing class offers nothing (upstream answers an empty list).
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	its, err := c.opts.InstanceTypes.List(ctx, nodeClass)
	if err != nil {
		return nil, fmt.Errorf("listing instance types of %s: %w", nodeClass.Name, err)
	}
	if nodeClass.Spec.PlacementGroupSelector != nil && c.opts.PlacementGroups != nil {
		// A group EC2 does not resolve leaves the class not Ready, and
		// Create refuses; the types are listed without its labels.
		if pg, err := c.opts.PlacementGroups.Get(ctx, nodeClass.Spec.PlacementGroupSelector); err == nil {
			its = c.withPlacementGroup(ctx, its, pg, nodeClass)
		}
	}
	return c.withTenancy(its, nodePool), nil
}

func (c *CloudProvider) nodeClass(ctx context.Context, ref *v1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if (ref.Group != "" && ref.Group != awsv1.Group) || (ref.Kind != "" && ref.Kind != NodeClassKind) {
		return nil, fmt.Errorf("node class %s/%s is not supported by the aws provider", ref.Group, ref.Kind)
	}
	nc := &awsv1.EC2NodeClass{}
	if err := c.opts.Kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		return nil, err
	}
	return nc, nil
}

// resolveNodeClass is the NodeClaim's EC2NodeClass, refusing one that is
// terminating or not Ready.
func (c *CloudProvider) resolveNodeClass(ctx context.Context, nc *v1.NodeClaim) (*awsv1.EC2NodeClass, error) {
	if nc.Spec.NodeClassRef == nil {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("nodeclaim %s has no nodeClassRef", nc.Name))
	}
	nodeClass, err := c.nodeClass(ctx, nc.Spec.NodeClassRef)
	if apierrors.IsNotFound(err) {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("resolving node class %s: %w", nc.Spec.NodeClassRef.Name, err))
	}
	if err != nil {
		return nil, fmt.Errorf("resolving node class %s: %w", nc.Spec.NodeClassRef.Name, err)
	}
	if !nodeClass.DeletionTimestamp.IsZero() {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("node class %s is terminating", nodeClass.Name))
	}
	ready := metav1Condition(nodeClass.Status.Conditions, awsv1.ConditionTypeReady)
	if ready == nil || ready.Status != metav1.ConditionTrue {
		msg := "no Ready condition"
		if ready != nil {
			msg = ready.Message
		}
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("node class %s is not ready: %s", nodeClass.Name, msg))
	}
	return nodeClass, nil
}

func metav1Condition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// Create implements cloudprovider.CloudProvider.
func (c *CloudProvider) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	nodeClass, err := c.resolveNodeClass(ctx, nc)
	if err != nil {
		return nil, err
	}
	reqs, err := cloudprovider.NodeClaimRequirements(nc)
	if err != nil {
		return nil, err
	}
	reqs = plannedReservation(reqs)
	all, err := c.launchTypes(ctx, nodeClass)
	if err != nil {
		return nil, err
	}
	pg, err := c.placementGroup(ctx, nodeClass)
	if err != nil {
		return nil, err
	}
	all = c.withPlacementGroup(ctx, all, pg, nodeClass)
	subnetOf, err := c.zonalSubnets(ctx, nodeClass)
	if err != nil {
		return nil, err
	}
	launched := ""
	if c.opts.Subnets != nil {
		// Hand back the addresses counted in the subnets not launched into.
		defer func() { c.opts.Subnets.UpdateInflightIPs(subnetOf, launched) }()
	}
	req := instance.Request{
		NodeClaimName:    nc.Name,
		NodeClaimCreated: nc.CreationTimestamp.Time,
		NodePoolName:     nc.Labels[v1.NodePoolLabelKey],
		NodeClassName:    nodeClass.Name,
		ClassTags:        nodeClass.Spec.Tags,
	}
	if pg != nil {
		req.PlacementGroupID, req.PlacementGroupStrategy = pg.ID, pg.Strategy
	}
	// As upstream, a NodeClaim whose minValues were relaxed launches
	// without the class's Context.
	if nodeClass.Spec.Context != nil && nc.Annotations[v1.NodeClaimMinValuesRelaxedAnnotationKey] != "true" {
		req.Context = *nodeClass.Spec.Context
	}
	gate := coreoptions.FromContext(ctx).FeatureGates.ReservedCapacity
	var reserved []reservedOffering
	if gate && c.opts.Reservations != nil && reqs.Get(scheduling.LabelCapacityType).Has(scheduling.CapacityTypeReserved) {
		reserved = selectReserved(all, reqs, nc.Spec.Resources.Requests, nodeClass, subnetOf, c.opts.Reservations)
	}
	// configs resolves the launch templates; it runs again when EC2 says a
	// cached template no longer exists.
	configs := func() error {
		if len(reserved) > 0 {
			req.CapacityType = instance.CapacityTypeReserved
			req.ReservationType = reserved[0].reservationType()
			req.Configs, err = c.reservedLaunchConfigs(ctx, nc, nodeClass, reqs, reserved, subnetOf, pg)
			return err
		}
		// With nothing to launch, Instances.Create still runs without
		// configs: it returns the instance an earlier Create launched (a
		// reserved NodeClaim whose reservation that launch filled) before
		// answering insufficient capacity.
		its := filterLaunchTypes(compatibleTypes(all, reqs, nc.Spec.Resources.Requests), reqs)
		req.CapacityType = chooseCapacityType(its, reqs)
		if its, err = truncateTypes(its, reqs, req.CapacityType, instance.MaxInstanceTypes); err != nil {
			return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("truncating instance types for nodeclaim %s: %w", nc.Name, err))
		}
		// With the gate on, an unreserved launch must not land in an open
		// reservation Karpenter does not count.
		preference := ""
		if gate {
			preference = launchtemplate.CapacityReservationPreferenceNone
		}
		if len(its) > 0 {
			req.Configs, err = c.launchConfigs(ctx, nc, nodeClass, reqs, its, req.CapacityType, subnetOf, preference, pg)
			return err
		}
		return nil
	}
	if err := configs(); err != nil {
		return nil, err
	}
	if err := c.awaitTemplates(ctx, req.Configs); err != nil {
		return nil, err
	}
	inst, err := c.opts.Instances.Create(ctx, req)
	if instance.IsLaunchTemplateNotFound(err) {
		// Deleted behind the cache's back: forget the templates, ensure
		// them again (which recreates them) and launch once more.
		for _, cfg := range req.Configs {
			c.opts.LaunchTemplates.Invalidate(cfg.LaunchTemplateName)
		}
		if err := configs(); err != nil {
			return nil, err
		}
		inst, err = c.opts.Instances.Create(ctx, req)
	}
	if err != nil {
		c.markFull(instance.FullReservations(err))
		return nil, err
	}
	c.markFull(inst.FullReservations)
	if c.opts.Reservations != nil && inst.Launched && inst.CapacityReservationID != "" {
		c.opts.Reservations.MarkLaunched(inst.CapacityReservationID)
	}
	launched = inst.SubnetID
	byName := map[string]*scheduling.InstanceType{}
	for _, it := range all {
		byName[it.Name] = it
	}
	out := c.toNodeClaim(inst, byName[inst.Type], reservationOf(nodeClass, inst.CapacityReservationID))
	// Keep what the NodeClaim already says; the launch adds to it.
	res := nc.DeepCopy()
	for k, v := range out.Labels {
		if res.Labels == nil {
			res.Labels = map[string]string{}
		}
		res.Labels[k] = v
	}
	for k, v := range c.placementLabels(ctx, pg, pinnedPartition(reqs, pg), inst) {
		if res.Labels == nil {
			res.Labels = map[string]string{}
		}
		res.Labels[k] = v
	}
	// The class hash the instance was launched with is the baseline of
	// static drift; the profile name protects the profile from garbage
	// collection while the instance uses it.
	if res.Annotations == nil {
		res.Annotations = map[string]string{}
	}
	res.Annotations[awsv1.AnnotationEC2NodeClassHash] = nodeClass.Hash(c.opts.HashCABundle)
	res.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	res.Annotations[awsv1.AnnotationInstanceProfile] = nodeClass.Status.InstanceProfile
	res.Status.ProviderID = out.Status.ProviderID
	res.Status.ImageID = out.Status.ImageID
	res.Status.Capacity = out.Status.Capacity
	res.Status.Allocatable = out.Status.Allocatable
	// EFA interfaces are attached only for a NodeClaim that asks for them
	// (launchConfigs), or by the class's interface layout (whose EFA-only
	// interfaces the types' capacity counts); without them the node has no
	// EFA to offer.
	if _, ok := nc.Spec.Resources.Requests[awsv1.ResourceEFA]; !ok && len(nodeClass.Spec.NetworkInterfaces) == 0 {
		delete(res.Status.Capacity, awsv1.ResourceEFA)
		delete(res.Status.Allocatable, awsv1.ResourceEFA)
	}
	return res, nil
}

// launchTypes are the instance types a launch chooses from: those the
// context carries (cloudprovider.WithInstanceTypes: the NodePool's types
// with NodeOverlays applied), else the class's own. Overlaid capacity then
// fits a NodeClaim requesting an extended resource EC2 does not know of
// (and the NodeClaim's capacity names it, as the node's device plugin
// will), and overlaid prices rank the launch.
func (c *CloudProvider) launchTypes(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]*scheduling.InstanceType, error) {
	if its, ok := cloudprovider.InstanceTypesFrom(ctx); ok {
		return its, nil
	}
	its, err := c.opts.InstanceTypes.List(ctx, nodeClass)
	if err != nil {
		return nil, fmt.Errorf("listing instance types of %s: %w", nodeClass.Name, err)
	}
	return its, nil
}

// markFull tells the tracker of the reservations EC2 found full, so the
// next launch (and the next plan) falls back to other capacity.
func (c *CloudProvider) markFull(ids []string) {
	if c.opts.Reservations == nil {
		return
	}
	for _, id := range ids {
		c.opts.Reservations.MarkUnavailable(id)
	}
}

// Get implements cloudprovider.CloudProvider.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	id, err := instance.ParseProviderID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	inst, err := c.opts.Instances.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	it, nodeClass := c.instanceType(ctx, inst)
	return c.toNodeClaim(inst, it, reservationOf(nodeClass, inst.CapacityReservationID)), nil
}

// List implements cloudprovider.CloudProvider.
func (c *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	insts, err := c.opts.Instances.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*v1.NodeClaim, 0, len(insts))
	for _, inst := range insts {
		// Garbage collection needs names and ages, not capacity.
		out = append(out, c.toNodeClaim(inst, nil, nil))
	}
	return out, nil
}

// Delete implements cloudprovider.CloudProvider.
func (c *CloudProvider) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	id, err := instance.ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodeclaim %s: %w", nc.Name, err))
	}
	inst, err := c.opts.Instances.Terminate(ctx, id, launchedAt(nc))
	if err != nil {
		return err
	}
	// Only the call that terminated it gives the reservation's unit back.
	if inst != nil && c.opts.Reservations != nil {
		reservation := inst.CapacityReservationID
		if reservation == "" && nc.Labels[v1.CapacityTypeLabelKey] == v1.CapacityTypeReserved {
			// Not described since a restart: the NodeClaim says.
			reservation = nc.Labels[awsv1.LabelCapacityReservationID]
		}
		if reservation != "" {
			c.opts.Reservations.MarkTerminated(reservation)
		}
	}
	return nil
}

// launchedAt is when the NodeClaim's instance was launched, as far as the
// NodeClaim says (its Launched condition, else its creation), or zero.
func launchedAt(nc *v1.NodeClaim) time.Time {
	for _, c := range nc.Status.Conditions {
		if c.Type == v1.ConditionTypeLaunched && c.Status == metav1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return nc.CreationTimestamp.Time
}

// instanceType looks up the type of inst in its class's list, for
// capacity, and the class; nil when the class or type is gone.
func (c *CloudProvider) instanceType(ctx context.Context, inst *instance.Instance) (*scheduling.InstanceType, *awsv1.EC2NodeClass) {
	name := inst.Tags[awsv1.NodeClassTagKey]
	if name == "" {
		return nil, nil
	}
	nodeClass := &awsv1.EC2NodeClass{}
	if err := c.opts.Kube.Get(ctx, client.ObjectKey{Name: name}, nodeClass); err != nil {
		return nil, nil
	}
	its, err := c.opts.InstanceTypes.List(ctx, nodeClass)
	if err != nil {
		return nil, nodeClass
	}
	for _, it := range its {
		if it.Name == inst.Type {
			return it, nodeClass
		}
	}
	return nil, nodeClass
}

// reservationLabels are the keys only a reserved instance carries: a
// type's requirements name its reservations whatever the capacity type,
// so they never come from there.
var reservationLabels = map[string]bool{
	scheduling.LabelReservationID:               true,
	awsv1.LabelCapacityReservationID:            true,
	awsv1.LabelCapacityReservationType:          true,
	awsv1.LabelCapacityReservationInterruptible: true,
}

// toNodeClaim is the NodeClaim view of inst: provider ID, image, the
// type's single-valued labels, zone and capacity type, and capacity; for
// an instance in a reservation, the reservation's labels (res, the class
// status's entry, says whether it is interruptible; nil when unknown).
func (c *CloudProvider) toNodeClaim(inst *instance.Instance, it *scheduling.InstanceType, res *awsv1.CapacityReservation) *v1.NodeClaim {
	nc := &v1.NodeClaim{}
	nc.Labels = map[string]string{}
	if it != nil {
		for _, k := range it.Requirements.Keys() {
			if reservationLabels[k] {
				continue
			}
			r := it.Requirements.Get(k)
			if r.Operator() == string(corev1.NodeSelectorOpIn) && r.Len() == 1 {
				nc.Labels[k] = r.Values()[0]
			}
		}
		nc.Status.Capacity = nonZero(it.Capacity)
		nc.Status.Allocatable = nonZero(cloudprovider.Allocatable(it))
	}
	nc.Labels[scheduling.LabelInstanceType] = inst.Type
	nc.Labels[scheduling.LabelZone] = inst.Zone
	nc.Labels[scheduling.LabelCapacityType] = inst.CapacityType
	if inst.CapacityType == instance.CapacityTypeReserved && inst.CapacityReservationID != "" {
		for k, v := range reservedLabels(inst.CapacityReservationID, inst.CapacityReservationType, res) {
			nc.Labels[k] = v
		}
	}
	if inst.PlacementGroupID != "" {
		nc.Labels[awsv1.LabelPlacementGroupID] = inst.PlacementGroupID
		if inst.PartitionNumber > 0 {
			nc.Labels[awsv1.LabelPlacementGroupPartition] = strconv.Itoa(int(inst.PartitionNumber))
		}
	}
	if np, ok := inst.Tags[v1.NodePoolLabelKey]; ok {
		nc.Labels[v1.NodePoolLabelKey] = np
	}
	if name, ok := inst.Tags[awsv1.NodeClaimTagKey]; ok {
		nc.Name = name
	}
	nc.CreationTimestamp = metav1.NewTime(inst.LaunchTime)
	nc.Status.ProviderID = inst.ProviderID()
	nc.Status.ImageID = inst.ImageID
	return nc
}

func nonZero(in corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range in {
		if !v.IsZero() {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// awaitTemplates waits until the launch templates of configs that were
// created moments ago have had time to propagate in EC2, so the first
// launch from a new template is not refused (and retried) for it.
func (c *CloudProvider) awaitTemplates(ctx context.Context, configs []instance.LaunchConfig) error {
	names := make([]string, 0, len(configs))
	for _, cfg := range configs {
		names = append(names, cfg.LaunchTemplateName)
	}
	wait := c.opts.LaunchTemplates.Propagating(names...)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
