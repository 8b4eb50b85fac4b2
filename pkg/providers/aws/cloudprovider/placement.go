package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Placement groups (placementGroupSelector): the class's group is resolved
// at launch, its instance types carry the group's labels as requirements
// (karpenter.k8s.aws/placement-group-id, and the partitions of a partition
// group as karpenter.k8s.aws/placement-group-partition), the launch
// template places the instance in the group (and in the partition the
// NodeClaim pins, else EC2 chooses), the NodeClaim gets the group's labels
// with the partition EC2 reports, and drift follows the group the selector
// resolves to.

// PlacementGroups resolves a class's placementGroupSelector
// (placementgroup.Provider): nil without a group of that name or id.
type PlacementGroups interface {
	Get(ctx context.Context, sel *awsv1.PlacementGroupSelectorTerm) (*placementgroup.PlacementGroup, error)
	// ZoneUnavailable is whether the group refused a launch in the zone
	// lately (a spread group's seven instances there, a cluster group in
	// another zone).
	ZoneUnavailable(groupID, zone string) bool
}

// PlacementGroupDrift is upstream's reason for an instance outside the
// group its class selects now.
const PlacementGroupDrift cloudprovider.DriftReason = "PlacementGroupDrift"

// errNoPlacementGroups: a class names a group and nothing resolves it.
var errNoPlacementGroups = errors.New("placement group resolution is not configured")

// placementGroup is the class's group, nil for a class without a selector.
// A selector EC2 does not resolve fails the launch: launching outside the
// group is the silent failure the selector exists to prevent.
func (c *CloudProvider) placementGroup(ctx context.Context, nodeClass *awsv1.EC2NodeClass) (*placementgroup.PlacementGroup, error) {
	sel := nodeClass.Spec.PlacementGroupSelector
	if sel == nil {
		return nil, nil
	}
	if c.opts.PlacementGroups == nil {
		return nil, cloudprovider.NewCreateError(errNoPlacementGroups, "PlacementGroupNotFound", errNoPlacementGroups.Error())
	}
	pg, err := c.opts.PlacementGroups.Get(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("resolving the placement group of %s: %w", nodeClass.Name, err)
	}
	if pg == nil {
		err := fmt.Errorf("placement group %s of %s not found", selectorString(sel), nodeClass.Name)
		return nil, cloudprovider.NewCreateError(err, "PlacementGroupNotFound", err.Error())
	}
	return pg, nil
}

func selectorString(sel *awsv1.PlacementGroupSelectorTerm) string {
	if sel.ID != "" {
		return sel.ID
	}
	return sel.Name
}

// placementStrategies is implemented by an InstanceTypes that knows the
// placement strategies EC2 lists for each type (instancetypes.Provider).
type placementStrategies interface {
	PlacementStrategies(name string) ([]string, bool)
}

// withPlacementGroup returns the types with the group's requirements: its
// id, and a partition group's partitions; as upstream, a type EC2 does not
// list the group's strategy for has no available offering, nor does a zone
// the group refused a launch in lately (a spread group's limit); a cluster
// group, which lives in one zone, offers only that zone (clusterZone). The
// types are copies; the listed ones are shared.
func (c *CloudProvider) withPlacementGroup(ctx context.Context, its []*scheduling.InstanceType, pg *placementgroup.PlacementGroup, nodeClass *awsv1.EC2NodeClass) []*scheduling.InstanceType {
	if pg == nil {
		return its
	}
	known, _ := c.opts.InstanceTypes.(placementStrategies)
	zone := ""
	if pg.Strategy == placementgroup.StrategyCluster {
		zone = c.clusterZone(ctx, pg, nodeClass)
	}
	refused := map[string]bool{}
	for _, it := range its {
		for _, o := range it.Offerings {
			if _, seen := refused[o.Zone]; !seen {
				refused[o.Zone] = c.opts.PlacementGroups.ZoneUnavailable(pg.ID, o.Zone)
			}
		}
	}
	anyRefused := slices.Contains(slices.Collect(maps.Values(refused)), true)
	out := make([]*scheduling.InstanceType, 0, len(its))
	for _, it := range its {
		cp := *it
		unsupported := false
		if known != nil {
			strategies, ok := known.PlacementStrategies(it.Name)
			unsupported = ok && !slices.Contains(strategies, pg.Strategy)
		}
		if unsupported || zone != "" || anyRefused {
			cp.Offerings = make([]scheduling.Offering, len(it.Offerings))
			for i, o := range it.Offerings {
				if unsupported || (zone != "" && o.Zone != zone) || refused[o.Zone] {
					o.Available = false
				}
				cp.Offerings[i] = o
			}
		}
		cp.Requirements = it.Requirements.Copy()
		cp.Requirements.Add(scheduling.NewRequirement(awsv1.LabelPlacementGroupID, scheduling.OpIn, pg.ID))
		if parts := pg.Partitions(); len(parts) > 0 {
			cp.Requirements.Add(scheduling.NewRequirement(awsv1.LabelPlacementGroupPartition, scheduling.OpIn, parts...))
		}
		out = append(out, &cp)
	}
	return out
}

// pinnedPartition is the one partition the requirements allow, 0 when
// they allow several (EC2 then chooses).
func pinnedPartition(reqs scheduling.Requirements, pg *placementgroup.PlacementGroup) int32 {
	if pg == nil || pg.Strategy != placementgroup.StrategyPartition {
		return 0
	}
	r := reqs.Get(awsv1.LabelPlacementGroupPartition)
	if r.IsComplement() || r.Len() != 1 {
		return 0
	}
	n, err := strconv.Atoi(r.Values()[0])
	if err != nil || n < 1 || n > pg.PartitionCount {
		return 0
	}
	return int32(n)
}

// partitionPolls and partitionPollInterval bound how long Create waits
// for DescribeInstances to report the partition EC2 chose.
var (
	partitionPolls        = 5
	partitionPollInterval = 200 * time.Millisecond
)

// placementLabels are the NodeClaim's placement group labels: the group,
// and the partition (pinned, or as EC2 reports it once the instance is
// described; left out while EC2 does not say).
func (c *CloudProvider) placementLabels(ctx context.Context, pg *placementgroup.PlacementGroup, pinned int32, inst *instance.Instance) map[string]string {
	if pg == nil {
		return nil
	}
	out := map[string]string{awsv1.LabelPlacementGroupID: pg.ID}
	if pg.Strategy != placementgroup.StrategyPartition {
		return out
	}
	partition := pinned
	if partition == 0 {
		partition = inst.PartitionNumber
	}
	for i := 0; partition == 0 && i < partitionPolls; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return out
			case <-time.After(partitionPollInterval):
			}
		}
		if got, err := c.opts.Instances.Get(ctx, inst.ID); err == nil {
			partition = got.PartitionNumber
		}
	}
	if partition > 0 {
		out[awsv1.LabelPlacementGroupPartition] = strconv.Itoa(int(partition))
	}
	return out
}

// placementGroupDrift: the instance is not in the group the class's
// selector resolves to now (a group deleted and made again under the same
// name has a new id; a class that gained a selector wants its nodes in
// the group). A selector EC2 cannot resolve now is not judged.
func (c *CloudProvider) placementGroupDrift(ctx context.Context, nc *v1.NodeClaim, inst *instance.Instance, nodeClass *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error) {
	have := nc.Labels[awsv1.LabelPlacementGroupID]
	if have == "" {
		have = inst.PlacementGroupID
	}
	sel := nodeClass.Spec.PlacementGroupSelector
	if sel == nil {
		if have != "" {
			return PlacementGroupDrift, nil
		}
		return "", nil
	}
	if c.opts.PlacementGroups == nil {
		return "", nil
	}
	pg, err := c.opts.PlacementGroups.Get(ctx, sel)
	if err != nil || pg == nil {
		return "", err
	}
	if have != pg.ID {
		return PlacementGroupDrift, nil
	}
	return "", nil
}

// clusterZone is the one zone a cluster group's instances may launch in:
// the zone of the group's NodeClaims when it has some, else the zone of
// the class's first resolved subnet (most free addresses), so a group's
// first launches do not start it in several zones at once. "" when
// neither is known.
func (c *CloudProvider) clusterZone(ctx context.Context, pg *placementgroup.PlacementGroup, nodeClass *awsv1.EC2NodeClass) string {
	var claims v1.NodeClaimList
	if err := c.opts.Kube.List(ctx, &claims, client.MatchingLabels{awsv1.LabelPlacementGroupID: pg.ID}); err == nil {
		count := map[string]int{}
		best := ""
		for _, nc := range claims.Items {
			z := nc.Labels[scheduling.LabelZone]
			if z == "" || !nc.DeletionTimestamp.IsZero() {
				continue
			}
			count[z]++
			if best == "" || count[z] > count[best] || (count[z] == count[best] && z < best) {
				best = z
			}
		}
		if best != "" {
			return best
		}
	}
	if len(nodeClass.Status.Subnets) > 0 {
		return nodeClass.Status.Subnets[0].Zone
	}
	return ""
}
