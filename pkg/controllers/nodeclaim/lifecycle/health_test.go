package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/lifecycle"
	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
)

// unparsable serves NodeClaims whose first requirement has an operator the
// label algebra does not know (the API server's enum would refuse it, so
// the corruption happens on read).
type unparsable struct{ client.Client }

func (u unparsable) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := u.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	corrupt(obj)
	return nil
}

// Patch corrupts the object the API server returns, too.
func (u unparsable) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := u.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	corrupt(obj)
	return nil
}

func corrupt(obj client.Object) {
	if nc, ok := obj.(*v1.NodeClaim); ok && len(nc.Spec.Requirements) > 0 {
		nc.Spec.Requirements[0].Operator = "Bogus"
	}
}

// TestInvalidRequirementsNotLaunched: a NodeClaim whose requirements do not
// parse is not launched unconstrained: Launched=False with a reason, one
// log line and one transition event however often it is reconciled, and
// the launch timeout deletes it, counting a failure for its NodePool.
func TestInvalidRequirementsNotLaunched(t *testing.T) {
	e := newEnv(t)
	health := nodepoolhealth.NewTracker()
	e.kube = unparsable{cp.Client}
	e.ctrl = lifecycle.NewController(e.kube, e.cloud, lifecycle.Options{Clock: e.clock, Recorder: e.events, Health: health})
	nc := e.nodeClaim()

	for range 3 {
		e.reconcile(nc.Name)
	}
	require.Zero(t, e.cloud.CreateCalls)
	got := e.get(nc.Name)
	requireCondition(t, got, v1.ConditionTypeLaunched, metav1.ConditionFalse, "InvalidRequirements")
	require.Contains(t, nodeclaimCond(got, v1.ConditionTypeLaunched).Message, "Bogus")
	require.Len(t, e.logs.Matching("failed launching nodeclaim"), 1)
	require.Len(t, e.events.Events(v1.ConditionTypeLaunched), 1, "the transition to False is published once")
	requireCondition(t, got, v1.ConditionTypeReady, metav1.ConditionFalse, "UnhealthyDependents")

	e.clock.Step(lifecycle.DefaultLaunchTimeout)
	e.reconcile(nc.Name)
	require.False(t, e.get(nc.Name).DeletionTimestamp.IsZero(), "deleted at the launch timeout")
	st := health.Status("default")
	require.True(t, st.Known)
	require.Equal(t, 1, st.Failures)
	require.Equal(t, "InvalidRequirements", st.Reason)
	e.reconcile(nc.Name) // finalize: nothing was bought
	require.True(t, e.gone(nc.Name))
}

// TestHealthOutcomes: registration is a success for the pool, the
// registration timeout a RegistrationFailed failure.
func TestHealthOutcomes(t *testing.T) {
	e := newEnv(t)
	health := nodepoolhealth.NewTracker()
	e.ctrl = lifecycle.NewController(cp.Client, e.cloud, lifecycle.Options{Clock: e.clock, Recorder: e.events, Health: health})
	pool := func(nc *v1.NodeClaim) { nc.Labels[v1.NodePoolLabelKey] = "health-pool" }

	ok := e.nodeClaim(pool)
	e.reconcile(ok.Name)
	e.kubeletNode(e.get(ok.Name))
	e.reconcile(ok.Name)
	requireCondition(t, e.get(ok.Name), v1.ConditionTypeRegistered, metav1.ConditionTrue, v1.ConditionTypeRegistered)
	require.Equal(t, nodepoolhealth.Status{Known: true, Healthy: true, Observed: 1}, health.Status("health-pool"))

	lost := e.nodeClaim(pool)
	e.reconcile(lost.Name)
	e.clock.Step(lifecycle.DefaultRegistrationTTL + time.Second)
	e.reconcile(lost.Name)
	require.Equal(t, nodepoolhealth.Status{Known: true, Healthy: false, Reason: nodepoolhealth.ReasonRegistrationFailed, Failures: 1, Observed: 2},
		health.Status("health-pool"), "one failure of two is half: unhealthy")
}
