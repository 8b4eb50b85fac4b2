package disruption

import (
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Drift reasons the NodeClaim's own NodePool decides, as upstream names
// them.
const (
	NodePoolDrifted     = "NodePoolDrifted"
	RequirementsDrifted = "RequirementsDrifted"
)

// TemplateDrift is the drift a NodePool's template alone decides for one
// of its NodeClaims ("" when none): NodePoolDrifted when the template hash
// the NodeClaim was stamped with differs from the pool's, else
// RequirementsDrifted when its labels fail the pool's requirements. The
// drift controller checks it first; the CLI's simulate calls it on
// proposed NodePools.
func TemplateDrift(np *v1.NodePool, nc *v1.NodeClaim) string {
	if reason := staticFieldsDrifted(np, nc); reason != "" {
		return reason
	}
	return requirementsDrifted(np, nc)
}

// staticFieldsDrifted compares the template hash the NodeClaim was created
// with against the NodePool's current one. Hashes of different versions
// were computed differently, so they are not compared at all (the hash
// controller re-stamps NodeClaims on a version change).
func staticFieldsDrifted(np *v1.NodePool, nc *v1.NodeClaim) string {
	poolHash, ok1 := np.Annotations[v1.NodePoolHashAnnotationKey]
	poolVersion, ok2 := np.Annotations[v1.NodePoolHashVersionAnnotationKey]
	claimHash, ok3 := nc.Annotations[v1.NodePoolHashAnnotationKey]
	claimVersion, ok4 := nc.Annotations[v1.NodePoolHashVersionAnnotationKey]
	if !ok1 || !ok2 || !ok3 || !ok4 || poolVersion != claimVersion {
		return ""
	}
	if poolHash != claimHash {
		return NodePoolDrifted
	}
	return ""
}

// requirementsDrifted reports whether the NodeClaim's labels no longer
// satisfy every requirement of the NodePool. Requirements are not hashed
// because widening them (adding a zone) must not replace nodes that still
// fit; only a node outside the new bounds has drifted. A label the NodeClaim
// lacks fails every requirement except NotIn and DoesNotExist.
func requirementsDrifted(np *v1.NodePool, nc *v1.NodeClaim) string {
	in := make([]scheduling.RequirementWithMinValues, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues})
	}
	poolReqs, err := scheduling.RequirementsFromMinValues(in)
	if err != nil {
		// The NodePool's validation controller reports malformed
		// requirements; they say nothing about this node.
		return ""
	}
	if scheduling.RequirementsFromLabels(nc.Labels).Compatible(poolReqs, "NodeClaim", false) != nil {
		return RequirementsDrifted
	}
	return ""
}
