package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
)

// nodeOverlay selects typ in pool (by the pool's template label) with a
// priceAdjustment and/or extended capacity; weight 0 leaves it unset.
func nodeOverlay(name, pool, typ string, weight int32, priceAdjustment string, capacity corev1.ResourceList) *v1alpha1.NodeOverlay {
	o := &v1alpha1.NodeOverlay{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeOverlay"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	o.Spec.Requirements = []v1alpha1.NodeSelectorRequirement{
		{Key: e2ePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{pool}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{typ}},
	}
	if weight != 0 {
		o.Spec.Weight = &weight
	}
	if priceAdjustment != "" {
		o.Spec.PriceAdjustment = &priceAdjustment
	}
	o.Spec.Capacity = capacity
	return o
}

// extendedResource makes the container request (and limit) n of name.
func extendedResource(name corev1.ResourceName, n string) deploymentOpt {
	return func(d *appsv1.Deployment) {
		r := &d.Spec.Template.Spec.Containers[0].Resources
		r.Requests[name] = resource.MustParse(n)
		r.Limits = corev1.ResourceList{name: resource.MustParse(n)}
	}
}

func overlayCondition(ctx context.Context, cp client.Reader, name, condType string) *metav1.Condition {
	o := &v1alpha1.NodeOverlay{}
	if err := cp.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
		return nil
	}
	return meta.FindStatusCondition(o.Status.Conditions, condType)
}

func claimTypes(claims []v1.NodeClaim) map[string]int {
	out := map[string]int{}
	for _, nc := range claims {
		out[nc.Labels[corev1.LabelInstanceTypeStable]]++
	}
	return out
}

// TestNodeOverlay runs the controller with --feature-gates=NodeOverlay=true
// on two on-demand pools:
//
//   - ov-price (c7a.large, m7a.large): a 1-CPU pod launches a c7a.large,
//     the cheaper type. An overlay then halves m7a.large's price in this
//     pool: a 1.5-CPU pod (no room beside the first) launches an
//     m7a.large, and consolidation replaces the c7a.large with an
//     m7a.large, now the cheaper;
//   - ov-device (c7a.large): an overlay adds example.com/device: 4 to
//     c7a.large; a pod requesting 2 of them is provisioned for and runs
//     on a node that advertises them.
//
// Two overlays of one weight pricing the same offering leave the later
// name Ready and the other ValidationSucceeded=False, reason Conflict.
func TestNodeOverlay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const price, device = "ov-price", "ov-device"
	deviceName := corev1.ResourceName("example.com/device")
	applyAll(t, ctx, cp,
		consolidationPool{name: price, instanceTypes: []string{"c7a.large", "m7a.large"}}.yaml(),
		consolidationPool{name: device, policy: string(v1.ConsolidationPolicyWhenEmpty), instanceTypes: []string{"c7a.large"}}.yaml(),
		consolidationWorkload{name: price + "-a", pool: price, replicas: 1, cpu: "1"}.yaml(),
	)
	startMetricsController(t, cp, "controller", nil, "--feature-gates=NodeOverlay=true")

	require.Eventually(t, func() bool { return settled(ctx, cp, price, 1, price+"-a", 1) }, 2*time.Minute, time.Second,
		"one 1-CPU pod should run on one node of %s", price)
	require.Equal(t, map[string]int{"c7a.large": 1}, claimTypes(liveClaims(ctx, cp, price)), "without an overlay c7a.large is the cheaper type")

	applyAll(t, ctx, cp,
		manifest(nodeOverlay("half-m7a", price, "m7a.large", 0, "-50%", nil)),
		manifest(nodeOverlay("device", device, "c7a.large", 0, "", corev1.ResourceList{deviceName: resource.MustParse("4")})),
		manifest(nodeOverlay("conflict-a", device, "c7a.large", 7, "+10%", nil)),
		manifest(nodeOverlay("conflict-b", device, "c7a.large", 7, "+20%", nil)),
	)
	require.Eventually(t, func() bool {
		for _, name := range []string{"half-m7a", "device", "conflict-b"} {
			if c := overlayCondition(ctx, cp.Client, name, v1alpha1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
				return false
			}
		}
		c := overlayCondition(ctx, cp.Client, "conflict-a", v1alpha1.ConditionTypeValidationSucceeded)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ConditionReasonConflict
	}, time.Minute, time.Second, "three overlays should be Ready and conflict-a in Conflict with conflict-b")

	applyAll(t, ctx, cp,
		consolidationWorkload{name: price + "-b", pool: price, replicas: 1, cpu: "1500m"}.yaml(),
		manifest(pauseDeployment(device, 1, "100m", "128Mi", onPool(device), extendedResource(deviceName, "2"))),
	)
	// Provisioning picks the halved type, and consolidation replaces the
	// c7a.large with it.
	require.Eventually(t, func() bool {
		claims := liveClaims(ctx, cp, price)
		return settled(ctx, cp, price, 2, price+"-a", 1) && settled(ctx, cp, price, 2, price+"-b", 1) &&
			claimTypes(claims)["m7a.large"] == 2
	}, 3*time.Minute, time.Second, "both pods of %s should end on m7a.large nodes", price)
	for _, nc := range liveClaims(ctx, cp, price) {
		require.Equal(t, "true", nc.Annotations[v1.PriceOverlayAppliedAnnotationKey], "NodeClaim %s launched at an overlaid price", nc.Name)
	}

	require.Eventually(t, func() bool { return settled(ctx, cp, device, 1, device, 1) }, 2*time.Minute, time.Second,
		"the pod requesting %s should run on a node of %s", deviceName, device)
	claim := liveClaims(ctx, cp, device)[0]
	node := &corev1.Node{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: claim.Status.NodeName}, node))
	q := node.Status.Allocatable[deviceName]
	require.Equal(t, int64(4), q.Value(), "the node advertises the overlaid capacity")
	require.Equal(t, "true", claim.Annotations[v1.CapacityOverlayAppliedAnnotationKey])
}
