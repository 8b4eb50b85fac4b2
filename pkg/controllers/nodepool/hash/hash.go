// Package hash owns the karpenter.sh/nodepool-hash annotation: how a
// NodePool template is hashed, and the controller that stamps the hash on
// NodePools (and re-stamps NodeClaims when the hash version changes).
//
// The value is numerically equal to upstream Karpenter's (hash version v3),
// so a cluster that moves from upstream to this controller does not see its
// NodeClaims as drifted. Upstream feeds its API struct for spec.template to
// github.com/mitchellh/hashstructure/v2. That library hashes Go type names,
// field names and values, so equality needs a struct of exactly upstream's
// shape; ours differs in places (template labels are a named value type,
// NillableDuration keeps a Raw field without a hash tag), so the template is
// copied into private mirror types below before hashing.
package hash

import (
	"strconv"
	"time"

	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
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
// hashes like an absent field; the conversion below keeps that.
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

// NodePool returns the hash of np's template as a decimal string, the form
// of the annotation value.
func NodePool(np *v1.NodePool) string {
	h, err := hashstructure.Hash(mirror(&np.Spec.Template), hashstructure.FormatV2, options())
	if err != nil {
		// The mirror holds only strings, maps, slices, pointers and integers,
		// which hashstructure always accepts.
		panic(err)
	}
	return strconv.FormatUint(h, 10)
}

func mirror(t *v1.NodeClaimTemplate) NodeClaimTemplate {
	out := NodeClaimTemplate{
		ObjectMeta: ObjectMeta{Labels: t.LabelMap(), Annotations: t.Annotations},
		Spec: NodeClaimTemplateSpec{
			Taints:                 t.Spec.Taints,
			StartupTaints:          t.Spec.StartupTaints,
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
		},
	}
	if ref := t.Spec.NodeClassRef; ref != nil {
		out.Spec.NodeClassRef = &NodeClassReference{Kind: ref.Kind, Name: ref.Name, Group: ref.Group}
	}
	if d := t.Spec.ExpireAfter.Duration; d != nil {
		v := *d
		out.Spec.ExpireAfter.Duration = &v
	}
	return out
}
