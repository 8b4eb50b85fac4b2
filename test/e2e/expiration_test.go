package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// expiringPoolYAML is a NodePool of the default KWOKNodeClass whose nodes
// live at most expireAfter. Consolidation is off so that only expiration
// removes nodes.
func expiringPoolYAML(name, after string) string {
	return manifest(testPool(name, append(amd64OnDemand(false), expireAfter(after), consolidation("", "Never"))...))
}

// expiringDeploymentYAML is a one-replica pause Deployment on pool.
func expiringDeploymentYAML(name, pool string) string {
	return manifest(pauseDeployment(name, 1, "200m", "64Mi", onPool(pool)))
}

// TestExpiration runs two pools side by side. The node of "expire-short"
// (expireAfter 45s) is deleted when it expires and replaced: a new
// NodeClaim, the old one gone, the Deployment's pod Running again on the
// new node, and karpenter_nodeclaims_disrupted_total{reason="expired"}
// counted. The node of "expire-never" (expireAfter Never) outlives it.
func TestExpiration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	for _, m := range []string{
		expiringPoolYAML("expire-short", "45s"), expiringDeploymentYAML("expire-short", "expire-short"),
		expiringPoolYAML("expire-never", "Never"), expiringDeploymentYAML("expire-never", "expire-never"),
	} {
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(m)), m)
	}
	_, metricsPort := startMetricsController(t, cp, "controller", nil)

	// Both pods run, each on its pool's only NodeClaim.
	first := map[string]string{}
	require.Eventually(t, func() bool {
		for _, pool := range []string{"expire-short", "expire-never"} {
			claims, err := expiringPoolClaims(ctx, cp, pool)
			if err != nil || len(claims) != 1 || runningOnOurNodes(ctx, t, cp, "app="+pool) != 1 {
				return false
			}
			first[pool] = claims[0].Name
		}
		return true
	}, 2*time.Minute, time.Second, "each pool's pod should run on one node")
	never := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: first["expire-never"]}, never))
	require.Nil(t, never.Spec.ExpireAfter.Duration, "expireAfter Never reaches the NodeClaim")

	// The short pool's NodeClaim expires, is deleted and replaced; its pod
	// runs again on the replacement.
	var replacement string
	require.Eventually(t, func() bool {
		claims, err := expiringPoolClaims(ctx, cp, "expire-short")
		if err != nil {
			return false
		}
		replacement = ""
		for _, nc := range claims {
			if nc.Name == first["expire-short"] {
				return false // not gone yet
			}
			if nc.DeletionTimestamp.IsZero() {
				replacement = nc.Name
			}
		}
		return replacement != "" && podRunningOn(ctx, cp, "expire-short", replacement)
	}, 3*time.Minute, time.Second, "the expired NodeClaim %s should be replaced and its pod run again", first["expire-short"])

	samples, err := scrapeMetrics(ctx, metricsPort)
	require.NoError(t, err)
	expired, ok := metricValue(samples, "karpenter_nodeclaims_disrupted_total",
		map[string]string{"reason": "expired", "nodepool": "expire-short", "capacity_type": v1.CapacityTypeOnDemand})
	require.True(t, ok, "karpenter_nodeclaims_disrupted_total{reason=expired,nodepool=expire-short} is exported")
	require.GreaterOrEqual(t, expired, 1.0)
	_, ok = metricValue(samples, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "expired", "nodepool": "expire-never"})
	require.False(t, ok, "nothing of the Never pool expired")

	// By now the Never pool's node is older than the short pool's expiry;
	// it is still there, not deleting, and its pod never moved.
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: first["expire-never"]}, never))
	require.True(t, never.DeletionTimestamp.IsZero(), "the Never pool's NodeClaim is not deleted")
	require.Greater(t, time.Since(never.CreationTimestamp.Time), 45*time.Second)
	require.True(t, podRunningOn(ctx, cp, "expire-never", first["expire-never"]))
}

func expiringPoolClaims(ctx context.Context, cp *controlplane.ControlPlane, pool string) ([]v1.NodeClaim, error) {
	list := &v1.NodeClaimList{}
	if err := cp.Client.List(ctx, list, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// podRunningOn reports whether a Running pod of app runs on the Node of
// the NodeClaim named claim.
func podRunningOn(ctx context.Context, cp *controlplane.ControlPlane, app, claim string) bool {
	nc := &v1.NodeClaim{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: claim}, nc); err != nil || nc.Status.NodeName == "" {
		return false
	}
	pods := &corev1.PodList{}
	if err := cp.Client.List(ctx, pods, client.MatchingLabels{"app": app}); err != nil {
		return false
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == nc.Status.NodeName && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}
