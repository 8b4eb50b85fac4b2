package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestCleanUp scales inflate up, then to 0, and deletes its NodePool. The
// kube-controller-manager's garbage collector deletes the NodeClaims the
// NodePool owns; our termination finalizers then taint and drain each node,
// delete its instance and let the objects go. Nothing may remain: no
// NodeClaim, no Node, and no instance that registers later.
func TestCleanUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml", "03-nodepool-lab.yaml", "04-inflate.yaml")
	startController(t, cp, "controller")

	scale(t, ctx, cp, "inflate", 8)
	require.Eventually(t, func() bool {
		return runningOnOurNodes(ctx, t, cp, "app=inflate") == 8
	}, 2*time.Minute, time.Second, "8 inflate pods should run on lab-general nodes")

	// Every object the cascade has to go through is in place.
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	require.NotEmpty(t, claims.Items)
	claimNames, nodeNames := sets.New[string](), sets.New[string]()
	for _, nc := range claims.Items {
		claimNames.Insert(nc.Name)
		nodeNames.Insert(nc.Status.NodeName)
		require.Contains(t, nc.Finalizers, v1.TerminationFinalizer, nc.Name)
		require.Len(t, nc.OwnerReferences, 1, nc.Name)
		require.Equal(t, "NodePool", nc.OwnerReferences[0].Kind, nc.Name)
		require.Equal(t, "lab-general", nc.OwnerReferences[0].Name, nc.Name)
		require.NotEmpty(t, nc.Status.NodeName, nc.Name)

		node := &corev1.Node{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
		require.Contains(t, node.Finalizers, v1.TerminationFinalizer, node.Name)
		require.Equal(t, nc.Status.ProviderID, node.Spec.ProviderID, node.Name)
	}
	t.Logf("%d nodeclaims on nodes %v", claimNames.Len(), sets.List(nodeNames))

	scale(t, ctx, cp, "inflate", 0)
	pool := &v1.NodePool{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "lab-general"}, pool))
	require.NoError(t, cp.Client.Delete(ctx, pool))

	start := time.Now()
	require.Eventually(t, func() bool {
		err := cp.Client.Get(ctx, client.ObjectKey{Name: "lab-general"}, &v1.NodePool{})
		var claims v1.NodeClaimList
		var nodes corev1.NodeList
		return apierrors.IsNotFound(err) &&
			cp.Client.List(ctx, &claims) == nil && len(claims.Items) == 0 &&
			cp.Client.List(ctx, &nodes) == nil && len(nodes.Items) == 0
	}, 2*time.Minute, time.Second, "the NodePool, its NodeClaims and their Nodes should all be gone")
	t.Logf("cleaned up in %s", time.Since(start).Round(100*time.Millisecond))

	// Each node went through our termination, not just an API delete: it was
	// tainted before its finalizer came off, and each NodeClaim's finalizer
	// came off after its instance was gone.
	tainted, deletedNodes, deletedClaims := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, e := range controllerLogEntries(t, cp) {
		switch e.Message {
		case "tainted node":
			tainted.Insert(e.Node.Name)
		case "deleted node":
			deletedNodes.Insert(e.Node.Name)
		case "deleted nodeclaim":
			deletedClaims.Insert(e.NodeClaim.Name)
		}
	}
	require.Equal(t, sets.List(nodeNames), sets.List(tainted), "every node is tainted karpenter.sh/disrupted")
	require.Equal(t, sets.List(nodeNames), sets.List(deletedNodes), "every node's finalizer is removed by termination")
	require.Equal(t, sets.List(claimNames), sets.List(deletedClaims), "every nodeclaim's finalizer is removed after its instance")

	// No instance outlives its NodeClaim: one still registering when its
	// claim went would appear as a Node after the class's registration delay
	// (2s in examples/02-kwoknodeclass.yaml).
	require.Never(t, func() bool {
		var nodes corev1.NodeList
		var claims v1.NodeClaimList
		return cp.Client.List(ctx, &nodes) == nil && len(nodes.Items) > 0 ||
			cp.Client.List(ctx, &claims) == nil && len(claims.Items) > 0
	}, 5*time.Second, 500*time.Millisecond, "no node or nodeclaim may reappear")

	var pods corev1.PodList
	require.NoError(t, cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "inflate"}))
	require.Empty(t, pods.Items)
}

func scale(t testing.TB, ctx context.Context, cp *controlplane.ControlPlane, name string, replicas int32) {
	t.Helper()
	// A merge patch carries no resourceVersion, so the deployment
	// controller's status writes cannot make it conflict.
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	require.NoError(t, cp.Client.Patch(ctx, deploy, client.RawPatch(types.MergePatchType, []byte(patch))))
}

// logEntry is the part of a controller JSON log line the tests read.
type logEntry struct {
	Message string `json:"message"`
	Node    struct {
		Name string `json:"name"`
	} `json:"Node"`
	NodeClaim struct {
		Name string `json:"name"`
	} `json:"NodeClaim"`
}

func controllerLogEntries(t *testing.T, cp *controlplane.ControlPlane) []logEntry {
	t.Helper()
	var out []logEntry
	for _, line := range strings.Split(controllerLog(t, cp), "\n") {
		var e logEntry
		if json.Unmarshal([]byte(line), &e) == nil && e.Message != "" {
			out = append(out, e)
		}
	}
	return out
}
