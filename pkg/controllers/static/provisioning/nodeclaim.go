package provisioning

import (
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// NodeClaimFor is the NodeClaim a static pool launches: its template's
// labels, annotations, taints and requirements, stamped like the dynamic
// provisioner's NodeClaims (nodepool and nodeclass labels, hash
// annotations for drift, an owner reference so that deleting the pool
// cascades). It carries no resource requests: no pods size a static node,
// so the provider launches the cheapest type the requirements allow.
func NodeClaimFor(np *v1.NodePool) *v1.NodeClaim {
	return np.NodeClaimFromTemplate(nil).DeepCopy() // share nothing with the pool's template
}
