package disruption_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/disruption"
)

// TestNodePoolChangeReevaluates runs the controller in a manager: editing a
// NodePool's requirements marks its NodeClaim Drifted within seconds (not
// at the 5-minute requeue), and reverting the edit clears it again.
func TestNodePoolChangeReevaluates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 cp.Client.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
	})
	require.NoError(t, err)
	e := newEnv(t)
	c := disruption.NewController(mgr.GetClient(), &cloud{Provider: fakecloud.New(clock.RealClock{}), instanceTypes: defaultInstanceTypes()},
		disruption.Options{Clock: clock.RealClock{}})
	require.NoError(t, c.Register(ctx, mgr))
	go func() { _ = mgr.Start(ctx) }()

	np := e.nodePool()
	nc := e.nodeClaim(np, nil, launched(time.Now()))
	drifted := func() bool { return e.get(nc.Name).IsTrue(v1.ConditionTypeDrifted) }
	// Give the controller its first pass, which must find nothing.
	time.Sleep(2 * time.Second)
	require.False(t, drifted())

	setArch := func(arch string) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
				return err
			}
			np.Spec.Template.Spec.Requirements[0].Values = []string{arch}
			return cp.Client.Update(ctx, np)
		}))
	}
	setArch("arm64")
	require.Eventually(t, drifted, 20*time.Second, 100*time.Millisecond, "a NodePool edit re-evaluates its NodeClaims")
	setArch("amd64")
	require.Eventually(t, func() bool { return !drifted() }, 20*time.Second, 100*time.Millisecond)
}
