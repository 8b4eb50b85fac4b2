package cloudprovider

// Launch templates made ahead of the first NodeClaim: EC2 refuses a
// template in CreateFleet for a moment after creating it
// (launchtemplate.PropagationDelay), which a NodeClaim whose launch
// creates its templates waits out. Made as soon as the class has resolved
// what they hold, while IAM still propagates a new instance profile (the
// several seconds before the class is Ready), they have propagated by the
// time the class is Ready and the pods arrive.

import (
	"context"
	"fmt"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	coreoptions "github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
)

// WarmLaunchTemplates ensures the launch templates a NodeClaim of np would
// launch from when its pods constrain nothing the NodePool leaves open:
// the NodePool's template labels, taints and requirements on its
// EC2NodeClass, one template per image and pod capacity of the instance
// types the NodePool allows (the reserved launches' templates excepted).
// The solver copies exactly these into a NodeClaim's labels and user data
// when the pods add no label of their own, so those NodeClaims find their
// templates made. A template no launch then uses is pruned after the
// launch template TTL like any other. It returns how many templates it
// ensured; a class that is not Ready (or gone) is not an error: it
// returns 0, and the class's next change is the time to try again. A
// class not Ready only while its instance profile propagates
// (EC2NodeClass.ResolvedButProfilePropagating) counts as Ready here:
// CreateLaunchTemplate does not check the profile, only a launch does.
func (c *CloudProvider) WarmLaunchTemplates(ctx context.Context, np *v1.NodePool) (int, error) {
	nc := np.NodeClaimFromTemplate(nil)
	nc.Name = np.Name
	nodeClass, err := c.resolveNodeClass(ctx, nc)
	if cloudprovider.IsNodeClassNotReadyError(err) && nc.Spec.NodeClassRef != nil {
		if class, gerr := c.nodeClass(ctx, nc.Spec.NodeClassRef); gerr == nil && class.ResolvedButProfilePropagating() {
			nodeClass, err = class, nil
		}
	}
	if cloudprovider.IsNodeClassNotReadyError(err) || cloudprovider.IsInsufficientCapacityError(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	reqs, err := cloudprovider.NodeClaimRequirements(nc)
	if err != nil {
		return 0, fmt.Errorf("nodepool %s: %w", np.Name, err)
	}
	all, err := c.launchTypes(ctx, nodeClass)
	if err != nil {
		return 0, err
	}
	pg, err := c.placementGroup(ctx, nodeClass)
	if err != nil {
		return 0, err
	}
	all = c.withPlacementGroup(ctx, all, pg, nodeClass)
	// Every plain type the NodePool allows: which of them a NodeClaim
	// keeps (the cheapest MaxInstanceTypes that fit its pods, spot no
	// dearer than on-demand) depends on its pods. Metal and accelerator
	// types only launch for pods that ask for them (filterExotic).
	its := compatibleTypes(all, reqs, nil)
	if !hasMinValues(reqs) {
		its = filterExotic(its)
	}
	if len(its) == 0 {
		return 0, nil
	}
	preference := ""
	if coreoptions.FromContext(ctx).FeatureGates.ReservedCapacity {
		preference = launchtemplate.CapacityReservationPreferenceNone
	}
	var launches []launchtemplate.Launch
	for _, k := range templateGroups(nc, nodeClass, its) {
		l := c.launch(nc, nodeClass, reqs, k.image, k.pods, nil, launchtemplate.CapacityReservation{Preference: preference}, pg)
		l.EFACount = k.efa
		launches = append(launches, l)
	}
	if len(launches) == 0 {
		return 0, nil
	}
	if _, err := c.ensureTemplates(ctx, nodeClass, launches); err != nil {
		return 0, fmt.Errorf("nodepool %s: %w", np.Name, err)
	}
	return len(launches), nil
}
