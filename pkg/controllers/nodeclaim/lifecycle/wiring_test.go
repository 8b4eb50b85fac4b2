package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/termination"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/garbagecollection"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/lifecycle"
)

// TestWiredIntoManager registers the three controllers on one manager (so
// their shared field indexes must coexist) and lets watches alone carry a
// NodeClaim from launch to Ready and back out through node termination.
func TestWiredIntoManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Client.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
	})
	require.NoError(t, err)
	cloud := fakecloud.New(nil)
	cloud.Clock = realClock{}
	events := &testutil.Recorder{}
	require.NoError(t, lifecycle.NewController(mgr.GetClient(), cloud, lifecycle.Options{Recorder: events}).Register(ctx, mgr))
	require.NoError(t, termination.NewController(mgr.GetClient(), cloud, termination.Options{Recorder: events}).Register(ctx, mgr))
	require.NoError(t, garbagecollection.NewController(mgr.GetClient(), cloud, garbagecollection.Options{}).Register(ctx, mgr))
	go func() { _ = mgr.Start(ctx) }()

	e := newEnv(t)
	nc := e.nodeClaim(func(nc *v1.NodeClaim) { nc.Spec.StartupTaints = nil })
	var got *v1.NodeClaim
	require.Eventually(t, func() bool {
		got = e.get(nc.Name)
		return got.IsTrue(v1.ConditionTypeLaunched)
	}, 20*time.Second, 50*time.Millisecond)

	node := e.kubeletNode(got)
	e.setNodeReady(node)
	require.Eventually(t, func() bool {
		return e.get(nc.Name).IsTrue(v1.ConditionTypeReady)
	}, 20*time.Second, 50*time.Millisecond)

	require.NoError(t, cp.Client.Delete(ctx, node)) // deleting the Node takes the NodeClaim with it
	require.Eventually(t, func() bool {
		errNode := cp.Client.Get(ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
		return e.gone(nc.Name) && client.IgnoreNotFound(errNode) == nil && errNode != nil
	}, 30*time.Second, 100*time.Millisecond)
	require.False(t, cloud.Has(got.Status.ProviderID))
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
