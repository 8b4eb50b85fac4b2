package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
)

// TestSessionAppliesReadyOverlays: the CLI prices instance types as the
// controller does, with the NodeOverlays it marked Ready; an overlay it has
// not evaluated (the gate off) changes nothing.
func TestSessionAppliesReadyOverlays(t *testing.T) {
	np := v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	half := "-50%"
	o := v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "half"}}
	o.Spec.Requirements = []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m7a.large"}}}
	o.Spec.PriceAdjustment = &half

	price := func(overlays ...v1alpha1.NodeOverlay) float64 {
		t.Helper()
		s, err := NewSession(&Objects{Time: metav1.Now(), NodePools: []v1.NodePool{np}, NodeOverlays: overlays}, Options{})
		require.NoError(t, err)
		its, err := s.types.GetInstanceTypes(context.Background(), &np)
		require.NoError(t, err)
		for _, it := range its {
			if it.Name == "m7a.large" {
				for _, of := range it.Offerings {
					if of.CapacityType == "on-demand" {
						return of.Price
					}
				}
			}
		}
		t.Fatal("no on-demand m7a.large offering")
		return 0
	}
	raw := price()
	require.Equal(t, raw, price(o), "an overlay without Ready (gate off, or not evaluated) is not applied")
	o.SetValidation(metav1.ConditionTrue, "", "")
	require.InDelta(t, raw/2, price(o), 1e-12, "a Ready overlay is applied")
}
