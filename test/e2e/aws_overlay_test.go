package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestAWSNodeOverlay runs the AWS provider with --feature-gates=NodeOverlay=true
// on the local AWS: an overlay that takes 99% off m6i.xlarge (far from the
// cheapest list price the examples' pool allows for a 1-CPU pod) makes
// provisioning plan it and the launch ask EC2 for it first (CreateFleet
// prioritized by the overlaid prices), so the instance EC2 launches is an
// m6i.xlarge, and the NodeClaim says the price was overlaid; a pod
// requesting an extended resource another overlay adds to c6i.2xlarge gets
// a c6i.2xlarge launched for it.
func TestAWSNodeOverlay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsInflate)))
	cheap := "-99%"
	device := &v1alpha1.NodeOverlay{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeOverlay"},
		ObjectMeta: metav1.ObjectMeta{Name: "device"},
		Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c6i.2xlarge"}}},
			Capacity:     corev1.ResourceList{"example.com/device": resource.MustParse("4")},
		},
	}
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(manifest(device))))
	overlay := &v1alpha1.NodeOverlay{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeOverlay"},
		ObjectMeta: metav1.ObjectMeta{Name: "savings-plan"},
		Spec: v1alpha1.NodeOverlaySpec{
			Requirements:    []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m6i.xlarge"}}},
			PriceAdjustment: &cheap,
		},
	}
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(manifest(overlay))))
	e.startAWSController(t, "controller", "--feature-gates=NodeOverlay=true")
	require.Eventually(t, func() bool {
		c := overlayCondition(ctx, cp.Client, "savings-plan", v1alpha1.ConditionTypeValidationSucceeded)
		return c != nil && c.Status == metav1.ConditionTrue
	}, 2*time.Minute, time.Second, "the overlay should be evaluated")

	scale(t, ctx, cp, "inflate", 1)
	var claims v1.NodeClaimList
	require.Eventually(t, func() bool {
		if cp.Client.List(ctx, &claims) != nil || len(claims.Items) != 1 {
			return false
		}
		return conditionTrue(claims.Items[0].Status.Conditions, v1.ConditionTypeLaunched)
	}, 3*time.Minute, time.Second, "one NodeClaim should launch")
	nc := claims.Items[0]
	require.Equal(t, "m6i.xlarge", nc.Labels[corev1.LabelInstanceTypeStable], "EC2 should launch the overlaid type")
	require.Equal(t, "true", nc.Annotations[v1.PriceOverlayAppliedAnnotationKey])
	_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
	require.Truef(t, ok, "providerID %q", nc.Status.ProviderID)
	inst, found := e.liveInstances(t, ctx)[id]
	require.Truef(t, found, "instance %s of %s is live", id, nc.Name)
	require.Equal(t, "m6i.xlarge", string(inst.InstanceType))

	// A pod requesting the extended resource the other overlay adds: only
	// c6i.2xlarge has it, and EC2 launches one (a device plugin would
	// then advertise it; the local AWS's nodes do not, so the pod is not
	// expected to run).
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsDevicePod)))
	var deviceClaim *v1.NodeClaim
	require.Eventually(t, func() bool {
		if cp.Client.List(ctx, &claims) != nil {
			return false
		}
		for i := range claims.Items {
			if claims.Items[i].Name != nc.Name && conditionTrue(claims.Items[i].Status.Conditions, v1.ConditionTypeLaunched) {
				deviceClaim = &claims.Items[i]
				return true
			}
		}
		return false
	}, 3*time.Minute, time.Second, "a NodeClaim should launch for the pod requesting example.com/device")
	require.Equal(t, "c6i.2xlarge", deviceClaim.Labels[corev1.LabelInstanceTypeStable])
	require.Equal(t, "true", deviceClaim.Annotations[v1.CapacityOverlayAppliedAnnotationKey])
	q := deviceClaim.Status.Capacity["example.com/device"]
	require.Equal(t, int64(4), q.Value(), "the NodeClaim's capacity names the overlaid resource")
}

const awsDevicePod = `
apiVersion: v1
kind: Pod
metadata:
  name: wants-a-device
  namespace: default
spec:
  nodeSelector:
    capacity.example.io/pool: general-purpose
  containers:
    - name: pause
      image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
      resources:
        requests:
          cpu: 100m
          example.com/device: "1"
        limits:
          example.com/device: "1"
`
