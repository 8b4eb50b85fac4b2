// Package templatehash computes the karpenter.sh/nodepool-hash value of a
// NodePool template. The value is numerically equal to upstream Karpenter's
// (hash version v3), so a cluster that moves from upstream to this
// controller does not see its NodeClaims as drifted.
//
// Upstream feeds its API struct for spec.template to
// github.com/mitchellh/hashstructure/v2. That library hashes Go type names,
// field names and values, so equality needs a struct of exactly upstream's
// shape. Ours differs in places (template labels are a named value type,
// NillableDuration keeps a Raw field without a hash tag), so pkg/apis/v1
// copies the template into the mirror types below before hashing. They live
// in their own package because their names are those of the API types.
package templatehash

import (
	"strconv"
	"time"

	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The mirror types. Their type names, field names, field types and hash
// tags are those of upstream's pkg/apis/v1, because every one of them goes
// into the hash. Fields upstream tags hash:"ignore" (requirements, the raw
// text of a duration) are left out: an ignored field contributes nothing, so
// leaving it out hashes the same. Do not rename anything here.

// NodeClaimTemplate mirrors upstream's v1.NodeClaimTemplate.
type NodeClaimTemplate struct {
	ObjectMeta
	Spec NodeClaimTemplateSpec
}

// ObjectMeta mirrors upstream's v1.ObjectMeta.
type ObjectMeta struct {
	Labels      map[string]string
	Annotations map[string]string
}

// NodeClaimTemplateSpec mirrors upstream's v1.NodeClaimTemplateSpec without
// its hash-ignored Requirements.
type NodeClaimTemplateSpec struct {
	Taints                 []corev1.Taint
	StartupTaints          []corev1.Taint
	NodeClassRef           *NodeClassReference
	TerminationGracePeriod *metav1.Duration
	ExpireAfter            NillableDuration
}

// NodeClassReference mirrors upstream's v1.NodeClassReference.
type NodeClassReference struct {
	Kind  string
	Name  string
	Group string
}

// NillableDuration mirrors upstream's v1.NillableDuration without its
// hash-ignored Raw. Upstream decodes "Never" to the zero value, so Never
// hashes like an absent field; the caller's conversion keeps that.
type NillableDuration struct {
	*time.Duration
}

// options are upstream's: taints are sets, and zero or nil fields are
// skipped so that adding an optional API field does not move every hash.
// They are fresh for each call: Hash stores its hasher in the options it is
// given, so options shared between goroutines would share one hasher and
// mix concurrent hashes.
func options() *hashstructure.HashOptions {
	return &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true}
}

// Of returns the hash of t as a decimal string, the form of the annotation
// value.
func Of(t NodeClaimTemplate) string {
	h, err := hashstructure.Hash(t, hashstructure.FormatV2, options())
	if err != nil {
		// The mirror holds only strings, maps, slices, pointers and integers,
		// which hashstructure always accepts.
		panic(err)
	}
	return strconv.FormatUint(h, 10)
}
