package disruption_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// ignoringDRA rebuilds the controller with IGNORE_DRA_REQUESTS as given,
// on the controller and on its simulator's request, as controllers.go
// wires both.
func (e *consolidationEnv) ignoringDRA(ignore bool) {
	launcher := provisioning.NewProvisioner(cp.Client, e.cloud, e.cluster, e.events, provisioning.Options{Clock: e.clock, IgnoreDRARequests: ignore})
	sim := disruption.SimulateOver(snapshot.Live{Reader: cp.Client, Cloud: e.cloud, Cluster: e.cluster},
		snapshot.Request{Options: snapshot.Options{IgnoreDRARequests: ignore}})
	e.ctrl = disruption.NewController(cp.Client, e.cluster, launcher, sim, disruption.Options{
		Clock: e.clock, Recorder: e.events, InstanceTypes: e.cloud, Strategy: e.strategy, IgnoreDRARequests: ignore,
	})
}

// TestDRAPodsHoldNoRoom: a pending pod with ResourceClaims stays Pending
// under IGNORE_DRA_REQUESTS=true (provisioning never plans for it), so
// disruption does not count it as pending room either: the light node is
// consolidated into the heavy node's free room the claiming pod would
// otherwise have taken. With false the planner plans it like any pod, and
// it holds that room, as TestPlannerLeavesRoomForPendingPods shows for a
// plain pod.
func TestDRAPodsHoldNoRoom(t *testing.T) {
	for _, tc := range []struct {
		planner, ignore bool
		consolidated    bool
	}{
		{planner: true, ignore: true, consolidated: true},
		{planner: true, ignore: false, consolidated: false},
		// Upstream's methods read no pending pods but through the
		// simulator: without the claiming pod there, the light node goes.
		{planner: false, ignore: true, consolidated: true},
	} {
		t.Run(fmt.Sprintf("planner=%t,ignore=%t", tc.planner, tc.ignore), func(t *testing.T) {
			e := newConsolidationEnv(t, tc.planner)
			e.ignoringDRA(tc.ignore)
			light, lightNode := e.typedNode(itype(2))
			e.busyPod(lightNode, "small", "1500m")
			_, heavyNode := e.typedNode(itype(8))
			e.busyPod(heavyNode, "big-1", "3")
			e.busyPod(heavyNode, "big-2", "3")
			claims := e.pendingPodWith("claims-a-gpu", "1", func(p *corev1.Pod) {
				p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("gpu-template")}}
				p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
			})
			require.NotEmpty(t, claims.Spec.ResourceClaims, "the API server kept the claims")

			if !tc.consolidated {
				acted, err := e.ctrl.Reconcile(e.ctx)
				require.NoError(t, err)
				assert.False(t, acted, "the heavy node's free room is the claiming pod's")
				assert.False(t, hasTaint(e.node(light.Name)))
				return
			}
			require.True(t, e.reconcileThroughValidation(nil), "the claiming pod holds no room: the light node goes")
			assert.Equal(t, "Underutilized", disruptionReason(e.nodeClaim(light.Name)))
		})
	}
}

func ptr[T any](v T) *T { return &v }
