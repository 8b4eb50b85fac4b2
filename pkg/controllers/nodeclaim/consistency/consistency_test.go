package consistency_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/consistency"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func TestConsistencyController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	events := &testutil.Recorder{}
	name := testutil.UniqueName("nc")
	providerID := "fake:///" + name
	nc := testutil.SpotNodeClaim(name)
	nc.Spec.Resources = v1.ResourceRequirements{Requests: testutil.ResourceList("cpu", "1", "memory", "1Gi")}
	require.NoError(t, cp.Client.Create(ctx, nc))
	nc.Status.ProviderID = providerID
	nc.Status.Capacity = testutil.ResourceList("cpu", "4", "memory", "16Gi")
	nc.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	require.NoError(t, cp.Client.Create(ctx, node))
	node.Status.Capacity = testutil.ResourceList("cpu", "4", "memory", "8Gi")
	require.NoError(t, cp.Client.Status().Update(ctx, node))

	c := consistency.NewController(cp.Client, clk, events)
	run := func() (reconcile.Result, *v1.Condition) {
		t.Helper()
		res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.NoError(t, err)
		got := &v1.NodeClaim{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, got))
		return res, got.Condition(v1.ConditionTypeConsistentStateFound)
	}

	res, cond := run()
	require.Equal(t, consistency.ScanPeriod, res.RequeueAfter)
	require.NotNil(t, cond)
	require.Equal(t, metav1.ConditionFalse, cond.Status)
	require.Equal(t, consistency.ReasonFailed, cond.Reason)
	failed := events.Events(consistency.EventReason)
	require.Len(t, failed, 1)
	require.Equal(t, "expected 16Gi of resource memory, but found 8Gi (50.0% of expected)", failed[0].Message)
	require.Equal(t, corev1.EventTypeWarning, failed[0].Type)

	// Not due again for 10 minutes.
	clk.Step(time.Minute)
	res, _ = run()
	require.Equal(t, consistency.ScanPeriod-time.Minute, res.RequeueAfter)
	require.Len(t, events.Events(consistency.EventReason), 1)

	// Fixed node: True at the next scan.
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(node), node))
	node.Status.Capacity = testutil.ResourceList("cpu", "4", "memory", "16Gi")
	require.NoError(t, cp.Client.Status().Update(ctx, node))
	clk.Step(consistency.ScanPeriod)
	_, cond = run()
	require.Equal(t, metav1.ConditionTrue, cond.Status)
	require.Len(t, events.Events(consistency.EventReason), 1)
}
