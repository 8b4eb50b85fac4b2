package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group shared by NodePool, NodeClaim and NodeOverlay. It is
// also the restricted label domain that only Karpenter may write.
const Group = "karpenter.sh"

var (
	// GroupVersion identifies this package's types on the wire.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

	// SchemeBuilder registers NodePool and NodeClaim with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this group-version's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&NodePool{}, &NodePoolList{}, &NodeClaim{}, &NodeClaimList{})
}
