package lifecycle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/consistency"
)

// TestInitializationChecksConsistency: the write that initializes a
// NodeClaim carries the consistency check's first result when the Node has
// the capacity promised, so the consistency controller's first scan then
// has nothing to write. A Node short of it is left to that controller,
// which reports it (ConsistentStateFound=False and its event).
func TestInitializationChecksConsistency(t *testing.T) {
	for _, tc := range []struct {
		name string
		// memory is the Node's memory capacity; "" keeps the promised one.
		memory      string
		initialized *metav1.ConditionStatus
		scanned     metav1.ConditionStatus
		scanWrites  int
	}{
		{name: "as promised", initialized: ptr.To(metav1.ConditionTrue), scanned: metav1.ConditionTrue},
		{name: "short of memory", memory: "1Mi", scanned: metav1.ConditionFalse, scanWrites: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			nc := e.nodeClaim(func(nc *v1.NodeClaim) {
				nc.Spec.StartupTaints = nil
				nc.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
			})
			e.reconcile(nc.Name) // launch
			node := e.kubeletNode(e.get(nc.Name))
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node); err != nil {
					return err
				}
				if tc.memory != "" {
					node.Status.Capacity[corev1.ResourceMemory] = resource.MustParse(tc.memory)
				}
				return cp.Client.Status().Update(e.ctx, node)
			}))
			e.setNodeReady(node)
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node); err != nil {
					return err
				}
				node.Spec.Taints = removeTaint(node.Spec.Taints, "example.com/startup")
				return cp.Client.Update(e.ctx, node)
			}))
			e.reconcile(nc.Name)
			got := e.get(nc.Name)
			requireCondition(t, got, v1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized")
			if tc.initialized == nil {
				require.Nil(t, got.Condition(v1.ConditionTypeConsistentStateFound), "left to the consistency controller")
			} else {
				requireCondition(t, got, v1.ConditionTypeConsistentStateFound, *tc.initialized, v1.ConditionTypeConsistentStateFound)
			}

			var scanWrites tally
			base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
			require.NoError(t, err)
			kube := interceptor.NewClient(base, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					return scanWrites.add(c.SubResource(sub).Patch(ctx, obj, patch, opts...))
				},
			})
			_, err = consistency.NewController(kube, e.clock, e.events).Reconcile(e.ctx, req(nc.Name))
			require.NoError(t, err)
			writes, _, _ := scanWrites.counts()
			require.Equal(t, tc.scanWrites, writes, "the consistency controller's first scan")
			cond := e.get(nc.Name).Condition(v1.ConditionTypeConsistentStateFound)
			require.NotNil(t, cond)
			require.Equal(t, tc.scanned, cond.Status)
			if tc.scanned == metav1.ConditionFalse {
				require.NotEmpty(t, e.events.Events(consistency.EventReason))
			}
		})
	}
}
