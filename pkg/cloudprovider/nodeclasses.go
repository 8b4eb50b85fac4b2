package cloudprovider

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// SupportedKinds maps each NodeClass kind of classes (a provider's
// GetSupportedNodeClasses) to a constructor of an empty object of that
// kind, so that core controllers can read any provider's NodeClass without
// naming its type. A kind scheme does not know is left out.
func SupportedKinds(scheme *runtime.Scheme, classes []NodeClass) map[schema.GroupKind]func() NodeClass {
	out := map[schema.GroupKind]func() NodeClass{}
	for _, nc := range classes {
		gvk, err := apiutil.GVKForObject(nc, scheme)
		if err != nil {
			continue
		}
		typ := reflect.TypeOf(nc).Elem()
		out[gvk.GroupKind()] = func() NodeClass { return reflect.New(typ).Interface().(NodeClass) }
	}
	return out
}

// ManagedBy returns a predicate telling whether a NodeClaim's NodeClass is
// one the cloud provider supports, so that two providers' controllers could
// share a cluster without fighting over each other's NodeClaims. A provider
// that names no NodeClass kinds manages everything, and so does one whose
// kinds the scheme does not know.
func ManagedBy(scheme *runtime.Scheme, cloud CloudProvider) func(*v1.NodeClaim) bool {
	kinds := map[schema.GroupKind]bool{}
	for _, nc := range cloud.GetSupportedNodeClasses() {
		gvk, err := apiutil.GVKForObject(nc, scheme)
		if err != nil {
			return func(*v1.NodeClaim) bool { return true }
		}
		kinds[gvk.GroupKind()] = true
	}
	return func(nc *v1.NodeClaim) bool {
		if len(kinds) == 0 || nc.Spec.NodeClassRef == nil {
			return true
		}
		return kinds[nc.Spec.NodeClassRef.GroupKind()]
	}
}
