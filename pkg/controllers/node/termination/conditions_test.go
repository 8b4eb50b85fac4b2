package termination_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/termination"
)

// TestDrainedAndVolumesDetachedInOneWrite: the pass that finds the Node
// drained writes Drained and VolumesDetached in one NodeClaim status
// patch, whether the volumes are detached already or still awaited; with
// them detached it terminates the instance and InstanceTerminating goes in
// that same write.
func TestDrainedAndVolumesDetachedInOneWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attached bool
		detached metav1.ConditionStatus
	}{
		{name: "no volume attached", detached: metav1.ConditionTrue},
		{name: "a volume still attached", attached: true, detached: metav1.ConditionUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var statusWrites []string
			base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
			require.NoError(t, err)
			kube := interceptor.NewClient(base, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if _, ok := obj.(*v1.NodeClaim); ok {
						statusWrites = append(statusWrites, obj.GetName())
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			ctrl := termination.NewController(kube, e.cloud, termination.Options{Clock: e.clock, Recorder: e.events, Config: cp.Config})
			nc, node := e.managedNode(nil)
			if tc.attached {
				pv := "pv-" + node.Name
				require.NoError(t, cp.Client.Create(e.ctx, &storagev1.VolumeAttachment{
					ObjectMeta: metav1.ObjectMeta{Name: "va-" + node.Name},
					Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node.Name,
						Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
				}))
			}
			require.NoError(t, cp.Client.Delete(e.ctx, node))

			// No pods: the first pass finds the Node drained.
			_, err = ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
			require.NoError(t, err)
			got := e.nodeClaim(nc.Name)
			require.True(t, got.IsTrue(v1.ConditionTypeDrained))
			detached := got.Condition(v1.ConditionTypeVolumesDetached)
			require.NotNil(t, detached)
			require.Equal(t, tc.detached, detached.Status)
			terminating := got.Condition(v1.ConditionTypeInstanceTerminating)
			require.Equal(t, !tc.attached, terminating != nil && terminating.Status == metav1.ConditionTrue, "InstanceTerminating once the volumes are detached")
			require.Len(t, statusWrites, 1, "NodeClaim status writes")
		})
	}
}

// TestInstanceGoneAtDelete: a Ready Node whose instance is already gone
// (reclaimed, or terminated by hand) when the drained pass deletes it loses
// its finalizer in that pass, and its NodeClaim records
// InstanceTerminating=True first, as upstream's.
func TestInstanceGoneAtDelete(t *testing.T) {
	e := newEnv(t)
	nc, node := e.managedNode(nil)
	e.cloud.Lock()
	delete(e.cloud.Instances, nc.Status.ProviderID)
	e.cloud.Unlock()
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
	require.NoError(t, err)
	require.Zero(t, res.RequeueAfter)
	require.True(t, e.nodeGone(node), "finalizer removed once the instance is found gone")
	got := e.nodeClaim(nc.Name)
	for _, ct := range []string{v1.ConditionTypeDrained, v1.ConditionTypeVolumesDetached, v1.ConditionTypeInstanceTerminating} {
		require.True(t, got.IsTrue(ct), "%s should be True", ct)
	}
}
