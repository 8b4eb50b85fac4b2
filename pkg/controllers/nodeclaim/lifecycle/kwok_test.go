package lifecycle_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/lifecycle"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

// TestWithKwokProvider runs the lifecycle against the simulated provider,
// which creates the Node itself the way a kubelet would.
func TestWithKwokProvider(t *testing.T) {
	e := newEnv(t)
	provider, err := kwok.New(e.ctx, cp.Client, kwok.Options{Clock: e.clock, Pick: func(int) int { return 0 }})
	require.NoError(t, err)
	e.ctrl = lifecycle.NewController(cp.Client, provider, lifecycle.Options{Clock: e.clock, Recorder: e.events})
	class := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("kwok")}}
	require.NoError(t, cp.Client.Create(e.ctx, class))

	nc := e.nodeClaim(func(nc *v1.NodeClaim) {
		nc.Spec.NodeClassRef.Name = class.Name
		nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
	})
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched")
	requireCondition(t, nc, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
	requireCondition(t, nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotReady")
	require.Equal(t, "amd64", nc.Labels[corev1.LabelArchStable])
	require.NotEmpty(t, nc.Labels[corev1.LabelInstanceTypeStable])

	node := &corev1.Node{}
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
	require.Equal(t, nc.Status.ProviderID, node.Spec.ProviderID)
	require.NotContains(t, taintKeys(node), v1.UnregisteredTaintKey)
	e.setNodeReady(node)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Spec.Taints = removeTaint(node.Spec.Taints, "example.com/startup")
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.reconcile(nc.Name)
	requireCondition(t, e.get(nc.Name), v1.ConditionTypeReady, metav1.ConditionTrue, "Ready")

	require.NoError(t, cp.Client.Delete(e.ctx, nc))
	e.reconcile(nc.Name)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.False(t, node.DeletionTimestamp.IsZero())
	controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer) // node termination's job
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.reconcile(nc.Name)
	require.True(t, e.gone(nc.Name))
}
