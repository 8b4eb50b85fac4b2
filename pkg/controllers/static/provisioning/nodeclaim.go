package provisioning

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/hash"
)

// NodeClaimFor is the NodeClaim a static pool launches: its template's
// labels, annotations, taints and requirements, stamped like the dynamic
// provisioner's NodeClaims (nodepool and nodeclass labels, hash
// annotations for drift, an owner reference so that deleting the pool
// cascades). It carries no resource requests: no pods size a static node,
// so the provider launches the cheapest type the requirements allow.
func NodeClaimFor(np *v1.NodePool) *v1.NodeClaim {
	t := np.Spec.Template
	labels := map[string]string{}
	for k, v := range t.LabelMap() {
		labels[k] = v
	}
	labels[v1.NodePoolLabelKey] = np.Name
	if ref := t.Spec.NodeClassRef; ref != nil {
		labels[v1.NodeClassLabelKey(ref.GroupKind())] = ref.Name
	}
	annotations := map[string]string{}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	annotations[v1.NodePoolHashAnnotationKey] = hash.NodePool(np)
	annotations[v1.NodePoolHashVersionAnnotationKey] = v1.NodePoolHashVersion
	blockOwnerDeletion := true
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1.GroupVersion.String(),
				Kind:               "NodePool",
				Name:               np.Name,
				UID:                np.UID,
				BlockOwnerDeletion: &blockOwnerDeletion,
			}},
		},
		Spec: v1.NodeClaimSpec{
			Taints:                 t.Spec.Taints,
			StartupTaints:          t.Spec.StartupTaints,
			Requirements:           t.Spec.Requirements,
			NodeClassRef:           t.Spec.NodeClassRef,
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
			ExpireAfter:            t.Spec.ExpireAfter,
		},
	}
	return nc.DeepCopy() // share nothing with the pool's template
}
