package disruption_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
)

// TestDisruptionReasonBesideLastPodEventTime: the disruption queue reads
// NodeClaims from the informer's cache, which may not have seen another
// writer's lastPodEventTime yet. Setting or clearing DisruptionReason from
// such a read lands beside that write and keeps it: only a changed
// conditions list may refuse it.
func TestDisruptionReasonBesideLastPodEventTime(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         []nodeOpt
		reason, want string
	}{
		{name: "set", reason: string(v1.DisruptionReasonDrifted), want: string(v1.DisruptionReasonDrifted)},
		{name: "cleared", opts: []nodeOpt{conditionOpt(v1.ConditionTypeDisruptionReason)}, reason: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, "100%")
			nc, _ := e.managedNode(tc.opts...)
			stale := e.nodeClaim(nc.Name)

			// Another writer (pod events) moves the NodeClaim on.
			theirs := stale.DeepCopy()
			theirs.Status.LastPodEventTime = metav1.NewTime(e.clock.Now())
			require.NoError(t, cp.Client.Status().Update(e.ctx, theirs))

			// Our reads still return the version before it, as a
			// lagging cache does.
			base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
			require.NoError(t, err)
			kube := interceptor.NewClient(base, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if out, ok := obj.(*v1.NodeClaim); ok && key.Name == stale.Name {
						stale.DeepCopyInto(out)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			require.NoError(t, disruption.SetDisruptionReason(e.ctx, kube, nc.Name, tc.reason))

			got := e.nodeClaim(nc.Name)
			assert.Equal(t, tc.want, disruptionReason(got))
			assert.False(t, got.Status.LastPodEventTime.IsZero(), "the other writer's lastPodEventTime stays")
		})
	}
}
