package provisioning_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

// replicaSet creates a ReplicaSet wanting replicas pods and, owned by it,
// the first `created` of them, pending. This control plane runs no
// controller-manager, so the rest never come: exactly the moment, during a
// scale-up, when the ReplicaSet controller is still creating them.
func replicaSet(t *testing.T, name string, replicas int32, created int, mutate func(*appsv1.ReplicaSet)) (*appsv1.ReplicaSet, []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "pause"}}},
			},
		},
	}
	if mutate != nil {
		mutate(rs)
	}
	conds := rs.Status.Conditions // Create returns the object without status
	require.NoError(t, cp.Client.Create(ctx, rs))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), rs) })
	if len(conds) > 0 {
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs))
		rs.Status.Conditions = conds
		rs.Status.Replicas = int32(created)
		require.NoError(t, cp.Client.Status().Update(ctx, rs))
	}
	var pods []*corev1.Pod
	for i := 0; i < created; i++ {
		pods = append(pods, pendingPod(t, fmt.Sprintf("%s-%d", name, i), "1", func(p *corev1.Pod) {
			p.Labels = labels
			p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "lab-general"}
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
		}))
	}
	return rs, pods
}

func TestProvisionAnticipatesReplicaSets(t *testing.T) {
	tests := []struct {
		name         string
		anticipate   bool
		failure      bool
		wantExpected int
	}{
		{"plans for the pods the ReplicaSet has yet to create", true, false, 7},
		{"gate off: only the pods that exist", false, false, 0},
		{"a ReplicaSet that fails to create pods is not anticipated", true, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanup(t)
			logs := &logLines{}
			ctx := logs.ctx()
			nodePool(t, "lab-general", nil)
			_, pods := replicaSet(t, "web", 10, 3, func(rs *appsv1.ReplicaSet) {
				if tt.failure {
					rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure,
						Status: corev1.ConditionTrue, Reason: "FailedCreate", LastTransitionTime: metav1.Now()}}
				}
			})
			cloud, err := kwok.New(ctx, cp.Client, kwok.Options{})
			require.NoError(t, err)
			rec := &fakeRecorder{}
			p := provisioning.NewProvisioner(cp.Client, cloud, &fakeCluster{kube: cp.Client}, rec,
				provisioning.Options{AnticipateReplicaSets: tt.anticipate})

			round, err := p.Provision(ctx)
			require.NoError(t, err)
			require.NotNil(t, round)
			expected := 0
			last := ""
			for _, pod := range pods {
				last = max(last, pod.Name)
			}
			for _, pl := range round.Result.Placements {
				require.True(t, pl.Scheduled(), pl.Why())
				if provisioning.IsExpected(pl.Pod) {
					expected++
					assert.Equal(t, pods[0].Labels, pl.Pod.Labels, "a copy of its pending sibling")
					assert.Empty(t, rec.forObject(pl.Pod.Name), "no events on pods that do not exist")
					assert.Greater(t, pl.Pod.Name, last, "copies sort after the real pods, which are placed first")
				}
			}
			assert.Equal(t, tt.wantExpected, expected)
			assert.Len(t, round.Result.Placements, 3+tt.wantExpected)

			// The NodeClaims hold every planned pod: 1 cpu each.
			cpu := resource.Quantity{}
			for _, nc := range nodeClaims(t) {
				cpu.Add(nc.Spec.Resources.Requests[corev1.ResourceCPU])
			}
			assert.GreaterOrEqual(t, cpu.Value(), int64(3+tt.wantExpected))
			found := logs.find("found provisionable pod(s)")
			require.Len(t, found, 1)
			assert.Equal(t, tt.wantExpected > 0, strings.Contains(found[0], fmt.Sprintf(`"expected"=%d`, tt.wantExpected)), found[0])
		})
	}
}

func TestTriggerPodCountsAReplicaSetOnce(t *testing.T) {
	cleanup(t)
	nodePool(t, "lab-general", nil)
	_, pods := replicaSet(t, "burst", 50, 3, nil)
	cloud, err := kwok.New(context.Background(), cp.Client, kwok.Options{})
	require.NoError(t, err)
	for _, anticipate := range []bool{true, false} {
		p := provisioning.NewProvisioner(cp.Client, cloud, &fakeCluster{kube: cp.Client}, &fakeRecorder{},
			provisioning.Options{AnticipateReplicaSets: anticipate})
		keys := map[string]bool{}
		for _, pod := range pods {
			keys[provisioning.TriggerKey(p, pod)] = true
		}
		if anticipate {
			assert.Len(t, keys, 1, "siblings are one trigger: the window is not kept open by each new pod")
		} else {
			assert.Len(t, keys, 3)
		}
	}
}
