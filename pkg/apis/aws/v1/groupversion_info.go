package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Group is the API group of the AWS provider's kinds.
const Group = "karpenter.k8s.aws"

var (
	// GroupVersion identifies this package's types on the wire.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

	// SchemeBuilder registers EC2NodeClass with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this group-version's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&EC2NodeClass{}, &EC2NodeClassList{})
}
