package capacitybuffer_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	"github.com/karpenter-go/karpenter/pkg/controllers/capacitybuffer"
	"github.com/karpenter-go/karpenter/pkg/state"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

type triggers struct{ n int }

func (t *triggers) Trigger(string) { t.n++ }

func podSpec(cpu string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
	}}}}
}

// TestController resolves buffers on the local API server: a missing
// PodTemplate gives PodTemplateNotFound and no virtual pods; once it
// exists, Resolved with the template's name and generation and 3 virtual
// pods, and a provisioning round is asked for; a Deployment's buffer takes
// a percentage of its replicas; a deleted buffer's pods are dropped.
func TestController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buffers, trig := state.NewBuffers(), &triggers{}
	c := capacitybuffer.NewController(cp.Client, buffers, trig)
	three := int32(3)
	cb := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "default"},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "chunk"}, Replicas: &three}}
	require.NoError(t, cp.Client.Create(ctx, cb))
	reconcileOnce := func(b *v1beta1.CapacityBuffer) *v1beta1.CapacityBuffer {
		t.Helper()
		_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		require.NoError(t, err)
		got := &v1beta1.CapacityBuffer{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(b), got))
		return got
	}
	got := reconcileOnce(cb)
	ready := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ReadyForProvisioningCondition)
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Equal(t, capacitybuffer.ReasonPodTemplateNotFound, ready.Reason)
	require.Empty(t, buffers.Pods())
	require.Equal(t, v1beta1.ActiveProvisioningStrategy, *got.Status.ProvisioningStrategy, "the default strategy, reported in status")

	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "default"}, Template: corev1.PodTemplateSpec{Spec: podSpec("2")}}
	require.NoError(t, cp.Client.Create(ctx, pt))
	got = reconcileOnce(cb)
	ready = meta.FindStatusCondition(got.Status.Conditions, v1beta1.ReadyForProvisioningCondition)
	require.Equal(t, metav1.ConditionTrue, ready.Status)
	require.Equal(t, capacitybuffer.ReasonResolved, ready.Reason)
	require.Equal(t, int32(3), *got.Status.Replicas)
	require.Equal(t, "chunk", got.Status.PodTemplateRef.Name)
	require.NotNil(t, got.Status.PodTemplateGeneration)
	require.Len(t, buffers.Pods(), 3)
	require.Positive(t, trig.n, "a provisioning round is asked for")

	replicas, pct := int32(10), int32(25)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: podSpec("1")},
	}}
	require.NoError(t, cp.Client.Create(ctx, d))
	web := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}, Percentage: &pct}}
	require.NoError(t, cp.Client.Create(ctx, web))
	got = reconcileOnce(web)
	require.Equal(t, int32(3), *got.Status.Replicas, "a quarter of 10, rounded up")
	require.Nil(t, got.Status.PodTemplateRef)
	require.Len(t, buffers.Pods(), 6)

	missing := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: "default"},
		Spec: v1beta1.CapacityBufferSpec{ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "StatefulSet", Name: "db"}}}
	require.NoError(t, cp.Client.Create(ctx, missing))
	got = reconcileOnce(missing)
	require.Equal(t, capacitybuffer.ReasonScalableRefNotFound, meta.FindStatusCondition(got.Status.Conditions, v1beta1.ReadyForProvisioningCondition).Reason)

	require.NoError(t, cp.Client.Delete(ctx, cb))
	_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cb)})
	require.NoError(t, err)
	require.Len(t, buffers.Pods(), 3, "the deleted buffer's virtual pods are dropped")
}
