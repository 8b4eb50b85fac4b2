package expiration_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/expiration"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// testFinalizer keeps a deleted NodeClaim visible so the test can see the
// deletion and reconcile the deleting object again.
const testFinalizer = "example.com/test"

func newNodeClaim(t *testing.T, ctx context.Context, mutate func(*v1.NodeClaim)) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{
		Name:       testutil.UniqueName("claim"),
		Labels:     map[string]string{v1.NodePoolLabelKey: testutil.UniqueName("pool"), v1.CapacityTypeLabelKey: v1.CapacityTypeSpot},
		Finalizers: []string{testFinalizer},
	}}
	nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	nc.Spec.ExpireAfter = v1.MustParseNillableDuration("30s")
	if mutate != nil {
		mutate(nc)
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() {
		ctx := context.Background()
		stored := &v1.NodeClaim{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), stored); err == nil {
			stored.Finalizers = nil
			_ = cp.Client.Update(ctx, stored)
			_ = cp.Client.Delete(ctx, stored)
		}
	})
	return nc
}

// disrupted reads karpenter_nodeclaims_disrupted_total for the NodeClaim's
// pool (each test uses its own pool, so counts do not mix).
func disrupted(t *testing.T, nc *v1.NodeClaim, mode string) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, metrics.NodeClaimsDisruptedTotal.With(prometheus.Labels{
		metrics.ReasonLabel: "expired", metrics.NodePoolLabel: nc.Labels[v1.NodePoolLabelKey],
		metrics.CapacityTypeLabel: nc.Labels[v1.CapacityTypeLabelKey], metrics.ConsolidationPolicyLabel: "",
		metrics.TerminationModeLabel: mode,
	}).Write(m))
	return m.GetCounter().GetValue()
}

func TestExpiration(t *testing.T) {
	tests := []struct {
		name        string
		expireAfter string
		tgp         *time.Duration
		age         time.Duration
		deleted     bool
		mode        string
		requeue     time.Duration
	}{
		{name: "expired is deleted", expireAfter: "30s", age: time.Minute, deleted: true, mode: "graceful"},
		{name: "expired exactly now is deleted", expireAfter: "30s", age: 30 * time.Second, deleted: true, mode: "graceful"},
		{name: "expired with a grace period drains eventually", expireAfter: "30s", tgp: ptrDuration(time.Hour),
			age: time.Minute, deleted: true, mode: "eventual"},
		{name: "expired with a zero grace period is forceful", expireAfter: "30s", tgp: ptrDuration(0),
			age: time.Minute, deleted: true, mode: "forceful"},
		{name: "not yet expired requeues at expiry", expireAfter: "200s", age: 100 * time.Second, requeue: 100 * time.Second},
		{name: "Never disables expiration", expireAfter: "Never", age: 10000 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			logs := &testutil.Logs{}
			ctx = logs.Context(ctx)
			nc := newNodeClaim(t, ctx, func(nc *v1.NodeClaim) {
				nc.Spec.ExpireAfter = v1.MustParseNillableDuration(tt.expireAfter)
				if tt.tgp != nil {
					nc.Spec.TerminationGracePeriod = &v1.Duration{Duration: *tt.tgp}
				}
			})
			clk := clocktesting.NewFakeClock(nc.CreationTimestamp.Add(tt.age))
			c := expiration.NewController(cp.Client, fakecloud.New(clk), expiration.Options{Clock: clk})
			req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}

			res, err := c.Reconcile(ctx, req)
			require.NoError(t, err)
			got := &v1.NodeClaim{}
			require.NoError(t, cp.Client.Get(ctx, req.NamespacedName, got))
			assert.Equal(t, tt.deleted, !got.DeletionTimestamp.IsZero(), "deletion")
			assert.Equal(t, tt.requeue, res.RequeueAfter)
			if !tt.deleted {
				assert.Empty(t, logs.Matching("deleting expired nodeclaim"))
				return
			}
			assert.Len(t, logs.Matching("deleting expired nodeclaim"), 1)
			assert.Equal(t, 1.0, disrupted(t, nc, tt.mode))

			// A deleting NodeClaim is not deleted (or counted) again.
			clk.Step(time.Hour)
			_, err = c.Reconcile(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, 1.0, disrupted(t, nc, tt.mode))
			assert.Len(t, logs.Matching("deleting expired nodeclaim"), 1)
		})
	}
}

// staleReader serves one snapshot of the NodeClaim, as a lagging informer
// cache would after the deletion.
type staleReader struct {
	client.Client
	snapshot *v1.NodeClaim
}

func (s staleReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.snapshot.DeepCopyInto(obj.(*v1.NodeClaim))
	return nil
}

// TestStaleCacheCountsOnce: a second reconcile that still sees the
// NodeClaim without its deletion timestamp does not delete and count it a
// second time.
func TestStaleCacheCountsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc := newNodeClaim(t, ctx, nil)
	clk := clocktesting.NewFakeClock(nc.CreationTimestamp.Add(time.Minute))
	c := expiration.NewController(staleReader{Client: cp.Client, snapshot: nc.DeepCopy()}, fakecloud.New(clk), expiration.Options{Clock: clk})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}
	for i := 0; i < 3; i++ {
		_, err := c.Reconcile(ctx, req)
		require.NoError(t, err)
	}
	assert.Equal(t, 1.0, disrupted(t, nc, "graceful"))
}

// TestUnmanaged: NodeClaims of a NodeClass kind the provider does not
// support belong to another controller and are left alone.
func TestUnmanaged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc := newNodeClaim(t, ctx, func(nc *v1.NodeClaim) {
		nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: "example.com", Kind: "OtherNodeClass", Name: "x"}
	})
	clk := clocktesting.NewFakeClock(nc.CreationTimestamp.Add(time.Hour))
	c := expiration.NewController(cp.Client, kwokOnly{fakecloud.New(clk)}, expiration.Options{Clock: clk})
	_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	require.NoError(t, err)
	got := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), got))
	assert.True(t, got.DeletionTimestamp.IsZero())
}

func ptrDuration(d time.Duration) *time.Duration { return &d }

// kwokOnly is the fake provider claiming only KWOKNodeClasses.
type kwokOnly struct{ *fakecloud.Provider }

func (kwokOnly) GetSupportedNodeClasses() []cloudprovider.NodeClass {
	return []cloudprovider.NodeClass{&kwokv1alpha1.KWOKNodeClass{}}
}
