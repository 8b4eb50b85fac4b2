package termination_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestDrainOrder evicts one group per pass: workloads, DaemonSet pods,
// critical pods, critical DaemonSet pods; pods tolerating the disrupted
// taint and static pods stay. Then the instance is terminated and the
// finalizer removed.
func TestDrainOrder(t *testing.T) {
	e := newEnv(t)
	nc, node := e.managedNode(nil)
	e.pod(node, "app")
	e.pod(node, "ds", daemon)
	e.pod(node, "crit", critical)
	e.pod(node, "crit-ds", critical, daemon)
	e.pod(node, "tolerant", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
	e.pod(node, "mirror", annotations(corev1.MirrorPodAnnotationKey, "x"))
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	stay := []string{"tolerant", "mirror"}
	e.reconcile(node)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.True(t, node.Spec.Unschedulable, "cordoned")
	require.True(t, hasTaint(node, v1.DisruptedNoScheduleTaint))
	require.Equal(t, "karpenter", node.Labels[corev1.LabelNodeExcludeBalancers])
	require.False(t, e.nodeClaim(nc.Name).DeletionTimestamp.IsZero(), "deleting the node deletes its nodeclaim")
	require.ElementsMatch(t, append([]string{"ds", "crit", "crit-ds"}, stay...), e.podNames(e.ns))
	c := e.nodeClaim(nc.Name).Condition(v1.ConditionTypeDrained)
	require.NotNil(t, c)
	require.Equal(t, metav1.ConditionUnknown, c.Status)
	require.Equal(t, "Draining", c.Reason)

	e.reconcile(node)
	require.ElementsMatch(t, append([]string{"crit", "crit-ds"}, stay...), e.podNames(e.ns))
	e.reconcile(node)
	require.ElementsMatch(t, append([]string{"crit-ds"}, stay...), e.podNames(e.ns))
	e.reconcile(node)
	require.ElementsMatch(t, stay, e.podNames(e.ns))
	require.Len(t, e.events.Events("Evicted"), 4)

	res := e.reconcile(node)
	require.Equal(t, 5*time.Second, res.RequeueAfter)
	got := e.nodeClaim(nc.Name)
	for _, ct := range []string{v1.ConditionTypeDrained, v1.ConditionTypeVolumesDetached, v1.ConditionTypeInstanceTerminating} {
		require.True(t, got.IsTrue(ct), "%s should be True", ct)
	}
	require.False(t, e.nodeGone(node), "finalizer stays until the instance is gone")

	e.reconcile(node)
	require.True(t, e.nodeGone(node))
	require.False(t, e.cloud.Has(nc.Status.ProviderID))
}

// TestBlockedDrainUntilDeadline: a PDB (eviction answers 429) and a
// do-not-disrupt pod block the drain; a pod whose grace period would run
// past the deadline is deleted at once with a grace period that ends at
// the deadline; at the deadline everything left is deleted by force.
func TestBlockedDrainUntilDeadline(t *testing.T) {
	e := newEnv(t)
	// The fake clock starts at the real time and only moves forward by as
	// much as the deadline, so it agrees with the deletion timestamps the
	// API server stamps.
	deadline := e.clock.Now().Add(100 * time.Second)
	nc, node := e.managedNode(&deadline)
	e.pod(node, "free")
	e.pod(node, "guarded", labels("app", "guarded"))
	e.pod(node, "pinned", annotations(v1.DoNotDisruptAnnotationKey, "true"))
	e.pod(node, "slow", annotations(v1.DoNotDisruptAnnotationKey, "true"), grace(120))
	zero := intstr.FromInt32(0)
	require.NoError(t, cp.Client.Create(e.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: e.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}))
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	for range 2 {
		res := e.reconcile(node)
		require.Equal(t, 5*time.Second, res.RequeueAfter)
		require.ElementsMatch(t, []string{"guarded", "pinned", "slow"}, e.podNames(e.ns))
	}
	failed := e.events.Events("FailedDraining")
	require.NotEmpty(t, failed)
	require.Contains(t, failed[0].Message, "Failed to drain node, ")
	require.Contains(t, failed[0].Message, e.ns+"/guarded")
	require.Contains(t, failed[0].Message, e.ns+"/pinned")
	require.NotEmpty(t, e.events.Events("TerminationGracePeriodExpiring"))

	// "slow" needs 120s but only 100s are left: it was deleted with 100s.
	slow := &corev1.Pod{}
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "slow"}, slow))
	require.False(t, slow.DeletionTimestamp.IsZero())
	require.Equal(t, int64(100), *slow.DeletionGracePeriodSeconds)

	// At the deadline nothing protects the pods any more.
	e.clock.Step(100 * time.Second)
	e.reconcile(node)
	require.Empty(t, e.podNames(e.ns))
	require.Len(t, e.events.Events("Disrupted"), 4)

	e.reconcile(node) // drained; instance termination starts
	e.reconcile(node) // instance gone; finalizer removed
	require.True(t, e.nodeGone(node))
	require.True(t, e.nodeClaim(nc.Name).IsTrue(v1.ConditionTypeDrained))
}

// TestInstanceAlreadyGone skips the drain for a NotReady node whose
// instance the provider no longer knows.
func TestInstanceAlreadyGone(t *testing.T) {
	e := newEnv(t)
	nc, node := e.managedNode(nil)
	e.pod(node, "app")
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, node))
	e.cloud.Lock()
	delete(e.cloud.Instances, nc.Status.ProviderID)
	e.cloud.Unlock()
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	e.reconcile(node)
	require.True(t, e.nodeGone(node))
	require.Equal(t, []string{"app"}, e.podNames(e.ns), "no drain for a machine that is gone")
}

// TestWaitsForVolumeAttachments holds instance termination until the
// node's VolumeAttachments are gone.
func TestWaitsForVolumeAttachments(t *testing.T) {
	e := newEnv(t)
	nc, node := e.managedNode(nil)
	pv := "pv-" + node.Name
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-" + node.Name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node.Name,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}
	require.NoError(t, cp.Client.Create(e.ctx, va))
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	e.reconcile(node)
	e.reconcile(node)
	c := e.nodeClaim(nc.Name).Condition(v1.ConditionTypeVolumesDetached)
	require.NotNil(t, c)
	require.Equal(t, "AwaitingVolumeDetachment", c.Reason)
	require.Equal(t, 0, e.cloud.DeleteCalls)
	require.NotEmpty(t, e.events.Events("AwaitingVolumeDetachment"))

	require.NoError(t, cp.Client.Delete(e.ctx, va))
	e.reconcile(node)
	e.reconcile(node)
	require.True(t, e.nodeGone(node))
}

func hasTaint(node *corev1.Node, t corev1.Taint) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}
