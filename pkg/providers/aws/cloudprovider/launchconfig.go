package cloudprovider

// What a launch offers EC2: the compatible instance types, the capacity
// type, the subnet of each zone, and the launch templates (one per image
// and capacity reservation) the CreateFleet overrides point at.

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// compatibleTypes are the types the NodeClaim allows, that fit its requests
// and have an available unreserved offering it allows.
func compatibleTypes(its []*scheduling.InstanceType, reqs scheduling.Requirements, requests corev1.ResourceList) []*scheduling.InstanceType {
	var out []*scheduling.InstanceType
	for _, it := range its {
		if reqs.Intersects(it.Requirements) != nil || !scheduling.Fits(requests, cloudprovider.Allocatable(it)) {
			continue
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.Available && o.ReservationID == "" && scheduling.OfferingCompatible(o, reqs) {
				out = append(out, it)
				break
			}
		}
	}
	return out
}

// chooseCapacityType is spot when the NodeClaim allows it and a type has an
// available spot offering, else on-demand (upstream's order, without
// reserved capacity).
func chooseCapacityType(its []*scheduling.InstanceType, reqs scheduling.Requirements) string {
	if reqs.Get(scheduling.LabelCapacityType).Has(instance.CapacityTypeSpot) {
		for _, it := range its {
			for i := range it.Offerings {
				o := &it.Offerings[i]
				if o.CapacityType == instance.CapacityTypeSpot && o.Available && scheduling.OfferingCompatible(o, reqs) {
					return instance.CapacityTypeSpot
				}
			}
		}
	}
	return instance.CapacityTypeOnDemand
}

// zonalSubnets maps each zone to the subnet this launch uses there.
func (c *CloudProvider) zonalSubnets(ctx context.Context, nodeClass *awsv1.EC2NodeClass) (map[string]string, error) {
	if c.opts.Subnets != nil {
		subnetOf, err := c.opts.Subnets.ZonalSubnetsForLaunch(ctx, nodeClass)
		if err != nil {
			return nil, fmt.Errorf("choosing subnets of %s: %w", nodeClass.Name, err)
		}
		return subnetOf, nil
	}
	subnetOf := map[string]string{}
	for _, s := range nodeClass.Status.Subnets {
		if _, ok := subnetOf[s.Zone]; !ok {
			subnetOf[s.Zone] = s.ID
		}
	}
	return subnetOf, nil
}

// zoneIDs maps the class's zones to their ids, from its resolved subnets.
func zoneIDs(nodeClass *awsv1.EC2NodeClass) map[string]string {
	out := map[string]string{}
	for _, s := range nodeClass.Status.Subnets {
		if s.ZoneID != "" {
			out[s.Zone] = s.ZoneID
		}
	}
	return out
}

// launchConfigs groups the types by image and pod capacity (one launch
// template each, since both are in the user data), ensures the templates
// (with the capacity reservation preference, "" for none), and lists each
// type's unreserved offerings of capacityType as overrides in the zone's
// subnet (subnetOf).
func (c *CloudProvider) launchConfigs(ctx context.Context, nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass, reqs scheduling.Requirements, its []*scheduling.InstanceType, capacityType string, subnetOf map[string]string, preference string, pg *placementgroup.PlacementGroup) ([]instance.LaunchConfig, error) {
	order, groups := templateGroupsOf(nc, nodeClass, its)
	if len(order) == 0 {
		return nil, cloudprovider.NewCreateError(errNoImage(nodeClass), "NoCompatibleImage", "No AMI of the EC2NodeClass matches the instance types")
	}
	var launches []launchtemplate.Launch
	for _, k := range order {
		l := c.launch(nc, nodeClass, reqs, k.image, k.pods, nil, launchtemplate.CapacityReservation{Preference: preference}, pg)
		l.EFACount = k.efa
		launches = append(launches, l)
	}
	lts, err := c.ensureTemplates(ctx, nodeClass, launches)
	if err != nil {
		return nil, err
	}
	zoneIDOf := zoneIDs(nodeClass)
	var configs []instance.LaunchConfig
	for i, k := range order {
		cfg := instance.LaunchConfig{LaunchTemplateName: lts[i].Name, ImageID: k.image, SecurityGroupIDs: lts[i].SecurityGroupIDs}
		for _, it := range groups[k] {
			for j := range it.Offerings {
				o := &it.Offerings[j]
				subnet, ok := subnetOf[o.Zone]
				if !ok || !o.Available || o.CapacityType != capacityType || o.ReservationID != "" || !scheduling.OfferingCompatible(o, reqs) {
					continue
				}
				cfg.Overrides = append(cfg.Overrides, instance.Override{InstanceType: it.Name, Zone: o.Zone, ZoneID: zoneIDOf[o.Zone], SubnetID: subnet, Price: o.Price, PriceOverlaid: o.PriceOverlaid})
			}
		}
		sort.SliceStable(cfg.Overrides, func(a, b int) bool { return cfg.Overrides[a].Price < cfg.Overrides[b].Price })
		if len(cfg.Overrides) > 0 {
			configs = append(configs, cfg)
		}
	}
	return configs, nil
}

// groupKey is what sets one launch template apart from another of the
// same launch: the image and the pod capacity (both in the user data),
// and the EFA interfaces.
type groupKey struct {
	image string
	pods  int64
	efa   int
}

// templateGroups are the launch templates its need, in order of first use.
func templateGroups(nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass, its []*scheduling.InstanceType) []groupKey {
	order, _ := templateGroupsOf(nc, nodeClass, its)
	return order
}

// templateGroupsOf groups its by launch template, in order of first use;
// a type no image of the class fits is left out.
func templateGroupsOf(nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass, its []*scheduling.InstanceType) ([]groupKey, map[groupKey][]*scheduling.InstanceType) {
	// A class laying out its interfaces gets them whatever the NodeClaim
	// asks; otherwise a NodeClaim asking for EFA gets one EFA interface per
	// card of its types.
	_, wantsEFA := nc.Spec.Resources.Requests[awsv1.ResourceEFA]
	wantsEFA = wantsEFA && len(nodeClass.Spec.NetworkInterfaces) == 0
	groups := map[groupKey][]*scheduling.InstanceType{}
	var order []groupKey
	for _, it := range its {
		image, ok := imageFor(nodeClass, it)
		if !ok {
			continue
		}
		pods := it.Capacity[corev1.ResourcePods]
		k := groupKey{image: image, pods: pods.Value()}
		if wantsEFA {
			efa := it.Capacity[awsv1.ResourceEFA]
			k.efa = int(efa.Value())
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	return order, groups
}

// launch is one launch template's launch: the NodeClaim's labels (plus
// extra, a reserved offering's), taints and tags, the image and pods.
func (c *CloudProvider) launch(nc *v1.NodeClaim, nodeClass *awsv1.EC2NodeClass, reqs scheduling.Requirements, image string, pods int64, extra map[string]string, cr launchtemplate.CapacityReservation, pg *placementgroup.PlacementGroup) launchtemplate.Launch {
	labels := reqs.Labels()
	for k, v := range nc.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	taints := registerTaints(nc)
	tags := instance.Tags(c.opts.Cluster.Name, nc.Labels[v1.NodePoolLabelKey], "", nodeClass.Name, nodeClass.Spec.Tags)
	maxPods := int32(pods)
	l := launchtemplate.Launch{ImageID: image, Labels: labels, Taints: taints, MaxPods: &maxPods, Tags: tags, CapacityReservation: cr}
	// As upstream, dedicated only when nothing else is allowed.
	if t := reqs.Get(awsv1.LabelInstanceTenancy); !t.IsComplement() && t.Has(awsv1.InstanceTenancyDedicated) && !t.Has(awsv1.InstanceTenancyDefault) {
		l.Tenancy = awsv1.InstanceTenancyDedicated
	}
	if pg != nil {
		l.PlacementGroupID = pg.ID
		l.PartitionNumber = pinnedPartition(reqs, pg)
	}
	return l
}

// ensureTemplates resolves and ensures one template per launch, in order.
func (c *CloudProvider) ensureTemplates(ctx context.Context, nodeClass *awsv1.EC2NodeClass, launches []launchtemplate.Launch) ([]launchtemplate.LaunchTemplate, error) {
	opts := make([]*launchtemplate.Options, 0, len(launches))
	for _, l := range launches {
		o, err := launchtemplate.Resolve(ctx, nodeClass, c.opts.Cluster, l)
		if err != nil {
			return nil, cloudprovider.NewCreateError(err, "LaunchTemplateResolutionFailed", err.Error())
		}
		opts = append(opts, o)
	}
	lts, err := c.opts.LaunchTemplates.EnsureAll(ctx, opts)
	if err != nil {
		return nil, cloudprovider.NewCreateError(fmt.Errorf("ensuring launch templates: %w", err), "LaunchTemplateCreationFailed", err.Error())
	}
	return lts, nil
}

func errNoImage(nodeClass *awsv1.EC2NodeClass) error {
	return fmt.Errorf("no image of %s is compatible with the requested instance types", nodeClass.Name)
}

// imageFor is the first of the class's images (status order, newest
// first) whose requirements the type meets.
func imageFor(nodeClass *awsv1.EC2NodeClass, it *scheduling.InstanceType) (string, bool) {
	for _, ami := range nodeClass.Status.AMIs {
		if ami.Deprecated {
			continue
		}
		r, err := scheduling.RequirementsFromNodeSelector(ami.Requirements)
		if err != nil {
			continue
		}
		if it.Requirements.Intersects(r) == nil {
			return ami.ID, true
		}
	}
	for _, ami := range nodeClass.Status.AMIs {
		r, err := scheduling.RequirementsFromNodeSelector(ami.Requirements)
		if err == nil && it.Requirements.Intersects(r) == nil {
			return ami.ID, true
		}
	}
	return "", false
}

// registerTaints are the taints the node registers with: the NodeClaim's
// taints and startup taints and, as upstream, the unregistered taint, so
// no pod lands on the node before registration has put the NodeClaim's
// labels and taints on it (registration removes it).
func registerTaints(nc *v1.NodeClaim) []corev1.Taint {
	taints := append(append([]corev1.Taint(nil), nc.Spec.Taints...), nc.Spec.StartupTaints...)
	for i := range taints {
		if taints[i].MatchTaint(&v1.UnregisteredNoExecuteTaint) {
			return taints
		}
	}
	return append(taints, v1.UnregisteredNoExecuteTaint)
}
