package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/v1/internal/templatehash"
)

// Hash is the karpenter.sh/nodepool-hash value of the pool's template (hash
// version NodePoolHashVersion), equal to upstream Karpenter's for the same
// template. NodeClaims are stamped with it at launch; a NodeClaim whose
// stamp differs from its pool's is NodePoolDrifted.
func (in *NodePool) Hash() string {
	t := &in.Spec.Template
	out := templatehash.NodeClaimTemplate{
		ObjectMeta: templatehash.ObjectMeta{Labels: t.LabelMap(), Annotations: t.Annotations},
		Spec: templatehash.NodeClaimTemplateSpec{
			Taints:        t.Spec.Taints,
			StartupTaints: t.Spec.StartupTaints,
		},
	}
	if tgp := t.Spec.TerminationGracePeriod; tgp != nil {
		out.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tgp.Duration}
	}
	if ref := t.Spec.NodeClassRef; ref != nil {
		out.Spec.NodeClassRef = &templatehash.NodeClassReference{Kind: ref.Kind, Name: ref.Name, Group: ref.Group}
	}
	if d := t.Spec.ExpireAfter.Duration; d != nil {
		v := *d
		out.Spec.ExpireAfter.Duration = &v
	}
	return templatehash.Of(out)
}
