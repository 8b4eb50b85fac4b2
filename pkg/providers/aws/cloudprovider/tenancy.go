package cloudprovider

import (
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Dedicated tenancy: a NodePool that allows only
// karpenter.k8s.aws/instance-tenancy=dedicated launches dedicated
// instances (launchconfig.go), which EC2 bills at the dedicated on-demand
// price; its types' on-demand offerings carry that price, so the solver
// and consolidation compare what the nodes cost. A type whose dedicated
// price is unknown (the static table, an isolated VPC) keeps its shared
// price.

// dedicatedPrices is implemented by an InstanceTypes that knows dedicated
// on-demand prices (instancetypes.Provider).
type dedicatedPrices interface {
	DedicatedPrice(name string) (float64, bool)
}

// dedicatedOnly reports whether the NodePool allows dedicated tenancy and
// nothing else, through its requirements or its template's labels.
func dedicatedOnly(nodePool *v1.NodePool) bool {
	in := make([]scheduling.RequirementWithMinValues, 0, len(nodePool.Spec.Template.Spec.Requirements))
	for _, r := range nodePool.Spec.Template.Spec.Requirements {
		if r.Key == awsv1.LabelInstanceTenancy {
			in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
		}
	}
	reqs, err := scheduling.RequirementsFromMinValues(in)
	if err != nil {
		return false
	}
	if v, ok := nodePool.Spec.Template.Labels[awsv1.LabelInstanceTenancy]; ok {
		reqs.Add(scheduling.NewRequirement(awsv1.LabelInstanceTenancy, scheduling.OpIn, string(v)))
	}
	t := reqs.Get(awsv1.LabelInstanceTenancy)
	return !t.IsComplement() && t.Has(awsv1.InstanceTenancyDedicated) && !t.Has(awsv1.InstanceTenancyDefault)
}

// withTenancy prices the on-demand offerings of a dedicated-only NodePool's
// types at the dedicated price. The types are copies where repriced; the
// listed ones are shared.
func (c *CloudProvider) withTenancy(its []*scheduling.InstanceType, nodePool *v1.NodePool) []*scheduling.InstanceType {
	prices, ok := c.opts.InstanceTypes.(dedicatedPrices)
	if !ok || !dedicatedOnly(nodePool) {
		return its
	}
	out := make([]*scheduling.InstanceType, len(its))
	for i, it := range its {
		out[i] = it
		price, ok := prices.DedicatedPrice(it.Name)
		if !ok {
			continue
		}
		cp := *it
		cp.Offerings = make([]scheduling.Offering, len(it.Offerings))
		for j, o := range it.Offerings {
			if o.CapacityType == scheduling.CapacityTypeOnDemand {
				o.Price = price
			}
			cp.Offerings[j] = o
		}
		out[i] = &cp
	}
	return out
}
