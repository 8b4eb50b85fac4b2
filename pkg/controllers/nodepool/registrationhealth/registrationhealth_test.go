package registrationhealth_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/registrationhealth"
	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func TestNodeRegistrationHealthy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	className, poolName := testutil.UniqueName("cls"), testutil.UniqueName("pool")
	class := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: className}}
	require.NoError(t, cp.Client.Create(ctx, class))
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: poolName}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: className}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	require.NoError(t, cp.Client.Create(ctx, np))
	t.Cleanup(func() {
		_ = cp.Client.Delete(context.Background(), np)
		_ = cp.Client.Delete(context.Background(), class)
	})

	tracker := nodepoolhealth.NewTracker()
	ctrl := registrationhealth.NewController(cp.Client, fakecloud.New(clocktesting.NewFakeClock(time.Now())), tracker)
	check := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		t.Helper()
		_, err := ctrl.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: poolName}})
		require.NoError(t, err)
		got := &v1.NodePool{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: poolName}, got))
		c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeNodeRegistrationHealthy)
		require.NotNil(t, c)
		require.Equal(t, status, c.Status, "%+v", c)
		require.Equal(t, reason, c.Reason, "%+v", c)
		require.Equal(t, got.Generation, c.ObservedGeneration)
		return *c
	}

	check(metav1.ConditionUnknown, "AwaitingReconciliation")
	tracker.Observe(poolName, true, "")
	check(metav1.ConditionTrue, v1.ConditionTypeNodeRegistrationHealthy)
	tracker.Observe(poolName, false, nodepoolhealth.ReasonRegistrationFailed)
	c := check(metav1.ConditionFalse, nodepoolhealth.ReasonRegistrationFailed)
	require.Equal(t, "1 of the last 2 NodeClaims failed to launch or register", c.Message)
	tracker.Observe(poolName, true, "")
	check(metav1.ConditionTrue, v1.ConditionTypeNodeRegistrationHealthy)
	tracker.Observe(poolName, false, "InjectedCreateError")
	check(metav1.ConditionFalse, "InjectedCreateError")

	// Editing the NodePool starts afresh.
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(np), np))
	np.Spec.Template.SetLabelMap(map[string]string{"team": "fixed"})
	require.NoError(t, cp.Client.Update(ctx, np))
	check(metav1.ConditionUnknown, "AwaitingReconciliation")
	tracker.Observe(poolName, false, nodepoolhealth.ReasonRegistrationFailed)
	check(metav1.ConditionFalse, nodepoolhealth.ReasonRegistrationFailed)

	// So does editing its NodeClass.
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(class), class))
	class.Spec.NodeRegistrationDelay = metav1.Duration{Duration: 5 * time.Second}
	require.NoError(t, cp.Client.Update(ctx, class))
	check(metav1.ConditionUnknown, "AwaitingReconciliation")
	check(metav1.ConditionUnknown, "AwaitingReconciliation")

	// Deleting the pool forgets its outcomes.
	tracker.Observe(poolName, true, "")
	require.NoError(t, cp.Client.Delete(ctx, np))
	_, err := ctrl.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: poolName}})
	require.NoError(t, err)
	require.False(t, tracker.Status(poolName).Known)
}
