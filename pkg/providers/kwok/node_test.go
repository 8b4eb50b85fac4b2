package kwok

import (
	"context"
	"flag"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/karpenter-go/karpenter/pkg/apis"
	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
)

func TestRepairToleration(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  time.Duration
		want time.Duration
	}{
		{"default is upstream kwok's", 0, 10 * time.Minute},
		{"set", 15 * time.Second, 15 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{RepairToleration: tt.set})
			policies := e.p.RepairPolicies()
			require.Len(t, policies, 2)
			statuses := map[corev1.ConditionStatus]bool{}
			for _, p := range policies {
				assert.Equal(t, corev1.NodeReady, p.ConditionType)
				assert.Equal(t, tt.want, p.TolerationDuration)
				statuses[p.ConditionStatus] = true
			}
			assert.Equal(t, map[corev1.ConditionStatus]bool{corev1.ConditionFalse: true, corev1.ConditionUnknown: true}, statuses)
		})
	}
}

func TestRepairTolerationFlag(t *testing.T) {
	var o Options
	require.NoError(t, o.AddFlags(flag.NewFlagSet("default", flag.ContinueOnError)))
	assert.Equal(t, DefaultRepairToleration, o.RepairToleration)

	t.Setenv(EnvRepairToleration, "20s")
	o = Options{}
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	require.NoError(t, o.AddFlags(fs))
	assert.Equal(t, 20*time.Second, o.RepairToleration)
	require.NoError(t, fs.Parse([]string{"--" + FlagRepairToleration + "=5s"}))
	assert.Equal(t, 5*time.Second, o.RepairToleration, "the flag overrides the environment")

	t.Setenv(EnvRepairToleration, "later")
	assert.Error(t, (&Options{}).AddFlags(flag.NewFlagSet("bad", flag.ContinueOnError)))
}

func TestStopKubelet(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	require.NoError(t, apis.AddToScheme(scheme))
	since := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	ours := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ours", Labels: map[string]string{kwokv1alpha1.KWOKNodeLabelKey: kwokv1alpha1.KWOKNodeLabelValue}},
		Spec:       corev1.NodeSpec{ProviderID: ProviderIDPrefix + "ours"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: since},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: since},
		}},
	}
	foreign := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, Spec: corev1.NodeSpec{ProviderID: "aws:///i-1"}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ours, foreign, nodeClass(nil)).
		WithStatusSubresource(&corev1.Node{}).Build()
	p, err := New(ctx, kube, Options{})
	require.NoError(t, err)

	require.NoError(t, StopKubelet(ctx, kube, "ours", corev1.ConditionFalse))
	got := &corev1.Node{}
	require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: "ours"}, got))
	assert.Equal(t, KubeletStoppedLabelValue, got.Labels[kwokv1alpha1.KWOKNodeLabelKey], "kwok no longer manages it")
	require.Len(t, got.Status.Conditions, 2)
	ready := got.Status.Conditions[0]
	assert.Equal(t, corev1.ConditionFalse, ready.Status)
	assert.True(t, ready.LastTransitionTime.After(since.Time), "the transition is recorded")
	assert.Equal(t, corev1.ConditionFalse, got.Status.Conditions[1].Status, "other conditions are kept")
	listed, err := p.List(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 1, "the provider still owns the instance, or garbage collection would reap it")
	assert.Equal(t, "ours", listed[0].Name)

	// Repeating the same status records no new transition.
	first := ready.LastTransitionTime
	require.NoError(t, StopKubelet(ctx, kube, "ours", corev1.ConditionFalse))
	require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: "ours"}, got))
	assert.Equal(t, first.Unix(), got.Status.Conditions[0].LastTransitionTime.Unix(), "no new transition for the same status")
	require.NoError(t, StopKubelet(ctx, kube, "ours", corev1.ConditionUnknown))
	require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: "ours"}, got))
	assert.Equal(t, corev1.ConditionUnknown, got.Status.Conditions[0].Status)
	assert.Equal(t, "NodeStatusUnknown", got.Status.Conditions[0].Reason)

	assert.Error(t, StopKubelet(ctx, kube, "foreign", corev1.ConditionFalse), "not a kwok instance")
	assert.Error(t, StopKubelet(ctx, kube, "missing", corev1.ConditionFalse))
	assert.Error(t, StopKubelet(ctx, kube, "ours", corev1.ConditionTrue), "only False or Unknown")
}

// TestStopKubeletsOutlastsKwoksLastHeartbeat plays the kwok binary's
// heartbeat that was already scheduled when the nodes were taken away: one
// lands within StopKubelets' settle period, the other after it has
// returned, and each writes Ready=True. Both nodes must end NotReady with
// the transition time StopKubelets gave them, so that node repair's
// toleration runs on unbroken. It runs in a synctest bubble: the
// heartbeats' delays and the guard's settle period are exact.
func TestStopKubeletsOutlastsKwoksLastHeartbeat(t *testing.T) {
	synctest.Test(t, testStopKubeletsOutlastsKwoksLastHeartbeat)
}

func testStopKubeletsOutlastsKwoksLastHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	beat := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
	node := func(name string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kwokv1alpha1.KWOKNodeLabelKey: kwokv1alpha1.KWOKNodeLabelValue}},
			Spec:       corev1.NodeSpec{ProviderID: ProviderIDPrefix + name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: beat, LastTransitionTime: beat},
			}},
		}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node("a"), node("b")).
		WithStatusSubresource(&corev1.Node{}).Build()

	// kwok's late heartbeats: node a's soon after it was taken away, node
	// b's well after StopKubelets' settle period (1 s).
	heartbeats := make(chan time.Time, 2)
	for name, after := range map[string]time.Duration{"a": 200 * time.Millisecond, "b": 2500 * time.Millisecond} {
		go func() {
			for ctx.Err() == nil {
				n := &corev1.Node{}
				if err := kube.Get(ctx, client.ObjectKey{Name: name}, n); err == nil && n.Labels[kwokv1alpha1.KWOKNodeLabelKey] == KubeletStoppedLabelValue {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(after)
			n := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				return
			}
			now := metav1.NewTime(time.Now().Add(time.Second).Truncate(time.Second))
			n.Status.Conditions[0] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: beat}
			if err := kube.Status().Update(ctx, n); err == nil {
				heartbeats <- time.Now()
			}
		}()
	}

	require.NoError(t, StopKubelets(ctx, kube, []string{"a", "b"}, corev1.ConditionFalse))
	since := map[string]metav1.Time{}
	for _, name := range []string{"a", "b"} {
		got := &corev1.Node{}
		require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: name}, got))
		require.Equal(t, corev1.ConditionFalse, got.Status.Conditions[0].Status)
		since[name] = got.Status.Conditions[0].LastTransitionTime
	}
	for range 2 {
		select {
		case <-heartbeats:
		case <-ctx.Done():
			t.Fatal("kwok's late heartbeats never landed")
		}
	}
	time.Sleep(300 * time.Millisecond) // the guard's reaction
	synctest.Wait()
	for _, name := range []string{"a", "b"} {
		got := &corev1.Node{}
		require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: name}, got))
		ready := got.Status.Conditions[0]
		assert.Equal(t, corev1.ConditionFalse, ready.Status, "node %s is put back down", name)
		assert.Equal(t, since[name].Unix(), ready.LastTransitionTime.Unix(), "node %s keeps its transition time", name)
	}
}
