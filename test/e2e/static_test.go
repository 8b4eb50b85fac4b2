package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// staticPoolYAML is a static NodePool of the default KWOKNodeClass.
func staticPoolYAML(name string, replicas int, nodeLimit int) string {
	return manifest(kwokPool(name, append(amd64OnDemand(false),
		poolLabel("static.example.io/pool", name), static(int64(replicas), int64(nodeLimit)))...))
}

// kubectl runs the control plane's kubectl against cp.
func kubectl(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, args ...string) string {
	t.Helper()
	dir := os.Getenv("KARPENTER_TOOLS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "tools")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig=" + cp.KubeconfigPath}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %v: %s", args, out)
	return string(out)
}

// staticCounts returns the pool's NodeClaims that are not being deleted
// and how many of those have a Ready Node.
func staticCounts(ctx context.Context, cp *controlplane.ControlPlane, pool string) (active, ready int) {
	claims, err := poolClaims(ctx, cp, pool)
	if err != nil {
		return -1, -1
	}
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		active++
		if nc.Status.NodeName == "" {
			continue
		}
		node := &corev1.Node{}
		if cp.Client.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node) == nil && nodeReady(node) {
			ready++
		}
	}
	return active, ready
}

// requireStaticSize waits until the pool has exactly want NodeClaims, all
// with Ready Nodes and none deleting, then checks it stays there for hold.
func requireStaticSize(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, pool string, want int, hold time.Duration) {
	t.Helper()
	settled := waitUntil(ctx, 2*time.Minute, func() bool {
		claims, err := poolClaims(ctx, cp, pool)
		if err != nil || len(claims) != want {
			return false
		}
		active, ready := staticCounts(ctx, cp, pool)
		return active == want && ready == want
	})
	active, ready := staticCounts(ctx, cp, pool)
	require.True(t, settled, "pool %s should settle at %d ready nodes (active %d, ready %d)", pool, want, active, ready)
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		active, _ := staticCounts(ctx, cp, pool)
		require.LessOrEqual(t, active, want, "pool %s went above %d NodeClaims", pool, want)
		time.Sleep(500 * time.Millisecond)
	}
	active, _ = staticCounts(ctx, cp, pool)
	require.Equal(t, want, active, "pool %s should stay at %d", pool, want)
}

// TestStaticNodePoolScaling scales a static pool with kubectl: 2 → 4
// (capped at limits.nodes 3 until the limit is raised) → 1.
func TestStaticNodePoolScaling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "static"
	applyAll(t, ctx, cp, staticPoolYAML(pool, 2, 3))
	startController(t, cp, "controller", "--feature-gates=StaticCapacity=true")

	requireStaticSize(t, ctx, cp, pool, 2, 5*time.Second)

	kubectl(t, ctx, cp, "scale", "nodepool", pool, "--replicas=4")
	requireStaticSize(t, ctx, cp, pool, 3, 15*time.Second)
	require.Contains(t, controllerLog(t, cp), `"message":"nodepool node limit reached"`)

	patchPool(t, ctx, cp, pool, `{"spec":{"limits":{"nodes":"10"}}}`)
	requireStaticSize(t, ctx, cp, pool, 4, 5*time.Second)

	kubectl(t, ctx, cp, "scale", "nodepool", pool, "--replicas=1")
	requireStaticSize(t, ctx, cp, pool, 1, 10*time.Second)

	out := kubectl(t, ctx, cp, "get", "nodepool", pool, "-o", "jsonpath={.spec.replicas}")
	require.Equal(t, "1", out)
	log := controllerLog(t, cp)
	require.Contains(t, log, `"message":"deprovisioning nodeclaims to satisfy replica count"`)
}

// TestStaticNodePoolDrift changes a template label of a static pool: every
// node drifts and StaticDrift replaces it, keeping the pool at replicas.
// It needs the Drifted condition and the disruption controller.
func TestStaticNodePoolDrift(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "static-drift"
	applyAll(t, ctx, cp, staticPoolYAML(pool, 2, 3))
	startController(t, cp, "controller", "--feature-gates=StaticCapacity=true")
	requireStaticSize(t, ctx, cp, pool, 2, 2*time.Second)
	claims, err := poolClaims(ctx, cp, pool)
	require.NoError(t, err)
	originals := claimNames(claims)

	patchPool(t, ctx, cp, pool, `{"spec":{"template":{"metadata":{"labels":{"static.example.io/pool":"drifted"}}}}}`)
	replaced := waitUntil(ctx, 5*time.Minute, func() bool {
		claims, err := poolClaims(ctx, cp, pool)
		if err != nil || len(claims) != 2 {
			return false
		}
		for _, nc := range claims {
			if originals[nc.Name] || nc.Labels["static.example.io/pool"] != "drifted" {
				return false
			}
		}
		_, ready := staticCounts(ctx, cp, pool)
		return ready == 2
	})
	require.True(t, replaced, "both drifted static nodes should be replaced by nodes with the new label")
}

func patchPool(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, pool, patch string) {
	t.Helper()
	np := &v1.NodePool{}
	np.Name = pool
	require.NoError(t, cp.Client.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(patch))), "patching %s", pool)
}
