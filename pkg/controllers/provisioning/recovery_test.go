package provisioning_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// panickyCloud panics in GetInstanceTypes the first `panics` times.
type panickyCloud struct {
	cloudprovider.CloudProvider
	panics atomic.Int32
}

func (c *panickyCloud) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if c.panics.Add(-1) >= 0 {
		panic("catalog exploded")
	}
	return c.CloudProvider.GetInstanceTypes(ctx, np)
}

// panickyCreates panics on the first NodeClaim create.
type panickyCreates struct {
	client.Client
	panicked atomic.Bool
}

func (c *panickyCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1.NodeClaim); ok && c.panicked.CompareAndSwap(false, true) {
		panic("create exploded")
	}
	return c.Client.Create(ctx, obj, opts...)
}

func TestLoopSurvivesAPanickingRound(t *testing.T) {
	cleanup(t)
	logs := &logLines{}
	ctx, cancel := context.WithCancel(logs.ctx())
	defer cancel()
	nodePool(t, "lab-general", nil)
	pendingPod(t, "inflate-0", "1", nil)
	kw, err := kwok.New(context.Background(), cp.Client, kwok.Options{})
	require.NoError(t, err)
	cloud := &panickyCloud{CloudProvider: kw}
	cloud.panics.Store(1)
	p := provisioning.NewProvisioner(cp.Client, cloud, &fakeCluster{kube: cp.Client}, &fakeRecorder{},
		provisioning.Options{BatchIdleDuration: 10 * time.Millisecond, BatchMaxDuration: 50 * time.Millisecond})

	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	// The pod controller re-triggers pending pods; here the test does.
	require.Eventually(t, func() bool {
		p.Trigger("inflate-0")
		return len(nodeClaims(t)) == 1
	}, 15*time.Second, 200*time.Millisecond, "the round after the panic provisions")
	assert.LessOrEqual(t, cloud.panics.Load(), int32(-1), "the first round panicked")
	panics := logs.find("Observed a panic")
	require.NotEmpty(t, panics)
	assert.Contains(t, panics[0], "catalog exploded")
	assert.Contains(t, panics[0], "stacktrace")
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop with its context")
	}
}

func TestPanickingCreateFailsOnlyItsNodeClaim(t *testing.T) {
	cleanup(t)
	logs := &logLines{}
	ctx := logs.ctx()
	np := nodePool(t, "lab-general", nil)
	kw, err := kwok.New(context.Background(), cp.Client, kwok.Options{})
	require.NoError(t, err)
	kube := &panickyCreates{Client: cp.Client}
	p := provisioning.NewProvisioner(kube, kw, &fakeCluster{kube: cp.Client}, &fakeRecorder{}, provisioning.Options{})
	reqs := scheduling.NewRequirements(scheduling.NewRequirement(scheduling.LabelArch, scheduling.OpIn, "amd64"))
	planned := []*scheduling.NewNodeClaim{{NodePool: np.Name, Requirements: reqs}, {NodePool: np.Name, Requirements: reqs}}

	created, err := p.CreateNodeClaims(ctx, planned, map[string]*v1.NodePool{np.Name: np})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "create exploded")
	ok := 0
	for _, nc := range created {
		if nc != nil {
			ok++
		}
	}
	assert.Equal(t, 1, ok, "the other NodeClaim is created")
	assert.Len(t, nodeClaims(t), 1)
	require.NotEmpty(t, logs.find("Observed a panic"))
	assert.True(t, strings.Contains(logs.find("Observed a panic")[0], "creating nodeclaim"))

	// The limits lock was not left held: the next call goes through.
	created, err = p.CreateNodeClaims(ctx, planned[:1], map[string]*v1.NodePool{np.Name: np})
	require.NoError(t, err)
	require.NotNil(t, created[0])
}

// barrierCreates holds every NodeClaim create until `want` are in flight
// (or the wait times out) and records how many were in flight at most.
type barrierCreates struct {
	client.Client
	want     int32
	inFlight atomic.Int32
	most     atomic.Int32
}

func (c *barrierCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1.NodeClaim); ok {
		n := c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		deadline := time.Now().Add(3 * time.Second)
		for c.most.Load() < c.want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return c.Client.Create(ctx, obj, opts...)
}

// TestRoundCreatesItsNodeClaimsTogether: every NodeClaim of a round is
// created at once, however many, so they reach the provider's launch
// together (and AWS batches them into one CreateFleet) instead of the ones
// past a bound waiting for a create's round trip.
func TestRoundCreatesItsNodeClaimsTogether(t *testing.T) {
	cases := []struct {
		name string
		n    int
	}{
		{"a few", 3},
		{"more than ten", 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cleanup(t)
			np := nodePool(t, "lab-general", nil)
			kw, err := kwok.New(context.Background(), cp.Client, kwok.Options{})
			require.NoError(t, err)
			kube := &barrierCreates{Client: cp.Client, want: int32(tc.n)}
			p := provisioning.NewProvisioner(kube, kw, &fakeCluster{kube: cp.Client}, &fakeRecorder{}, provisioning.Options{})
			reqs := scheduling.NewRequirements(scheduling.NewRequirement(scheduling.LabelArch, scheduling.OpIn, "amd64"))
			planned := make([]*scheduling.NewNodeClaim, tc.n)
			for i := range planned {
				planned[i] = &scheduling.NewNodeClaim{NodePool: np.Name, Requirements: reqs}
			}
			created, err := p.CreateNodeClaims(context.Background(), planned, map[string]*v1.NodePool{np.Name: np})
			require.NoError(t, err)
			assert.Len(t, created, tc.n)
			assert.Equal(t, int32(tc.n), kube.most.Load(), "NodeClaim creates in flight at once")
			assert.Len(t, nodeClaims(t), tc.n)
		})
	}
}
