package disruption_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/disruption"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// cloud is the fake provider with a settable instance type list and
// provider drift, which fakecloud does not offer.
type cloud struct {
	*fakecloud.Provider
	mu            sync.Mutex
	instanceTypes []*cloudprovider.InstanceType
	drifted       cloudprovider.DriftReason
	typesCalls    int
}

func (c *cloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.typesCalls++
	return c.instanceTypes, nil
}

func (c *cloud) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drifted, nil
}

func (c *cloud) setDrifted(reason cloudprovider.DriftReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drifted = reason
}

const (
	instanceType = "fake.large"
	zone         = "test-zone-a"
)

func offering(zone, capacityType string) cloudprovider.Offering {
	return cloudprovider.Offering{Zone: zone, CapacityType: capacityType, Price: 1, Available: true}
}

func defaultInstanceTypes() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{{Name: instanceType, Offerings: []cloudprovider.Offering{
		offering(zone, v1.CapacityTypeOnDemand), offering(zone, v1.CapacityTypeSpot),
	}}}
}

type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clocktesting.FakeClock
	cloud *cloud
	logs  *testutil.Logs
	ctrl  *disruption.Controller
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, clock: clocktesting.NewFakeClock(time.Now()), logs: &testutil.Logs{}}
	e.ctx = e.logs.Context(ctx)
	e.cloud = &cloud{Provider: fakecloud.New(e.clock), instanceTypes: defaultInstanceTypes()}
	e.ctrl = disruption.NewController(cp.Client, e.cloud, disruption.Options{Clock: e.clock})
	return e
}

// nodePool creates a dynamic NodePool (amd64 only, consolidateAfter 5m)
// stamped with a hash as the hash controller would.
func (e *env) nodePool(mutate ...func(*v1.NodePool)) *v1.NodePool {
	e.t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{
		Name:        testutil.UniqueName("pool"),
		Annotations: map[string]string{v1.NodePoolHashAnnotationKey: "1111", v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion},
	}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("5m")
	for _, m := range mutate {
		m(np)
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, np))
	e.t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), np) })
	return np
}

// nodeClaim creates a launched NodeClaim of pool np that matches it: same
// hash, labels inside its requirements, an instance type the provider
// offers. conditions are set on the status after creation.
func (e *env) nodeClaim(np *v1.NodePool, mutate func(*v1.NodeClaim), conditions ...v1.Condition) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: testutil.UniqueName("claim"),
		Labels: map[string]string{
			v1.NodePoolLabelKey:            np.Name,
			corev1.LabelArchStable:         "amd64",
			corev1.LabelInstanceTypeStable: instanceType,
			corev1.LabelTopologyZone:       zone,
			v1.CapacityTypeLabelKey:        v1.CapacityTypeOnDemand,
		},
		Annotations: map[string]string{
			v1.NodePoolHashAnnotationKey:        np.Annotations[v1.NodePoolHashAnnotationKey],
			v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
		},
	}}
	nc.Spec.NodeClassRef = np.Spec.Template.Spec.NodeClassRef
	nc.Spec.Requirements = np.Spec.Template.Spec.Requirements
	if mutate != nil {
		mutate(nc)
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, nc))
	e.t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })
	if len(conditions) > 0 {
		nc.Status.Conditions = conditions
		require.NoError(e.t, cp.Client.Status().Update(e.ctx, nc))
	}
	return nc
}

func (e *env) reconcile(name string) reconcile.Result {
	e.t.Helper()
	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(e.t, err)
	return res
}

func (e *env) get(name string) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{}
	require.NoError(e.t, cp.Client.Get(e.ctx, types.NamespacedName{Name: name}, nc))
	return nc
}

func cond(condType string, status metav1.ConditionStatus, at time.Time) v1.Condition {
	reason := condType
	if status != metav1.ConditionTrue {
		reason = "NotYet"
	}
	return v1.Condition{Type: condType, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func launched(at time.Time) v1.Condition {
	return cond(v1.ConditionTypeLaunched, metav1.ConditionTrue, at)
}

func TestDrifted(t *testing.T) {
	tests := []struct {
		name string
		// age moves the clock past the NodeClaim's creation.
		age        time.Duration
		pool       func(*v1.NodePool)
		claim      func(*v1.NodeClaim)
		cloud      func(*cloud)
		notLaunch  bool
		preDrifted bool
		want       string // "" = no Drifted condition
	}{
		{name: "matching nodeclaim is not drifted", want: ""},
		{name: "previously drifted, no longer drifted: condition removed", preDrifted: true, want: ""},
		{name: "not launched: condition removed even when drifted", notLaunch: true, preDrifted: true,
			claim: func(nc *v1.NodeClaim) { nc.Annotations[v1.NodePoolHashAnnotationKey] = "2222" }, want: ""},
		{name: "hash differs, same version", claim: func(nc *v1.NodeClaim) { nc.Annotations[v1.NodePoolHashAnnotationKey] = "2222" },
			want: string(disruption.NodePoolDrifted)},
		{name: "hash differs, versions differ: not compared", claim: func(nc *v1.NodeClaim) {
			nc.Annotations[v1.NodePoolHashAnnotationKey] = "2222"
			nc.Annotations[v1.NodePoolHashVersionAnnotationKey] = "v2"
		}, want: ""},
		{name: "nodeclaim without hash", claim: func(nc *v1.NodeClaim) { delete(nc.Annotations, v1.NodePoolHashAnnotationKey) }, want: ""},
		{name: "nodepool without hash", pool: func(np *v1.NodePool) { delete(np.Annotations, v1.NodePoolHashAnnotationKey) },
			claim: func(nc *v1.NodeClaim) { nc.Annotations[v1.NodePoolHashAnnotationKey] = "2222" }, want: ""},
		{name: "requirement value no longer allowed", pool: func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{"arm64"}
		}, want: string(disruption.RequirementsDrifted)},
		{name: "requirement widened: still fits", pool: func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements[0].Values = []string{"amd64", "arm64"}
		}, want: ""},
		{name: "new requirement on a label the nodeclaim lacks", pool: func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				v1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}})
		}, want: string(disruption.RequirementsDrifted)},
		{name: "new NotIn requirement on a label the nodeclaim lacks", pool: func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				v1.NodeSelectorRequirementWithMinValues{Key: "example.com/team", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}})
		}, want: ""},
		{name: "capacity type requirement excludes the nodeclaim", pool: func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
				v1.NodeSelectorRequirementWithMinValues{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}})
		}, want: string(disruption.RequirementsDrifted)},
		{name: "static hash drift wins over requirements and provider", cloud: func(c *cloud) { c.drifted = "ImageDrifted" },
			pool:  func(np *v1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"arm64"} },
			claim: func(nc *v1.NodeClaim) { nc.Annotations[v1.NodePoolHashAnnotationKey] = "2222" },
			want:  string(disruption.NodePoolDrifted)},
		{name: "requirements drift wins over the provider", cloud: func(c *cloud) { c.drifted = "ImageDrifted" },
			pool: func(np *v1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"arm64"} },
			want: string(disruption.RequirementsDrifted)},
		{name: "instance type gone, older than 1h", age: 2 * time.Hour, cloud: func(c *cloud) { c.instanceTypes = nil },
			want: string(disruption.InstanceTypeNotFound)},
		{name: "instance type gone, younger than 1h: not checked", age: 30 * time.Minute, cloud: func(c *cloud) { c.instanceTypes = nil },
			want: ""},
		{name: "instance type label missing, older than 1h", age: 2 * time.Hour,
			claim: func(nc *v1.NodeClaim) { delete(nc.Labels, corev1.LabelInstanceTypeStable) },
			want:  string(disruption.InstanceTypeNotFound)},
		{name: "no offering in the nodeclaim's zone", age: 2 * time.Hour, cloud: func(c *cloud) {
			c.instanceTypes[0].Offerings = []cloudprovider.Offering{offering("test-zone-b", v1.CapacityTypeOnDemand)}
		}, want: string(disruption.InstanceTypeNotFound)},
		{name: "unavailable offering is not drift", age: 2 * time.Hour, cloud: func(c *cloud) {
			c.instanceTypes[0].Offerings[0].Available = false
		}, want: ""},
		{name: "reserved nodeclaim with only on-demand offerings left", age: 2 * time.Hour,
			claim: func(nc *v1.NodeClaim) {
				nc.Labels[v1.CapacityTypeLabelKey] = v1.CapacityTypeReserved
				nc.Labels["karpenter.sh/reservation-id"] = "r-1"
			}, want: ""},
		{name: "reserved nodeclaim with only spot offerings left", age: 2 * time.Hour,
			claim: func(nc *v1.NodeClaim) {
				nc.Labels[v1.CapacityTypeLabelKey] = v1.CapacityTypeReserved
				nc.Labels["karpenter.sh/reservation-id"] = "r-1"
			},
			cloud: func(c *cloud) {
				c.instanceTypes[0].Offerings = []cloudprovider.Offering{offering(zone, v1.CapacityTypeSpot)}
			},
			want: string(disruption.InstanceTypeNotFound)},
		{name: "instance type check wins over the provider", age: 2 * time.Hour,
			cloud: func(c *cloud) { c.instanceTypes, c.drifted = nil, "ImageDrifted" },
			want:  string(disruption.InstanceTypeNotFound)},
		{name: "provider drift", cloud: func(c *cloud) { c.drifted = "ImageDrifted" }, want: "ImageDrifted"},
		{name: "static nodepool drifts too", pool: func(np *v1.NodePool) {
			np.Spec.Replicas = ptr.To[int64](2)
			np.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{}
		}, claim: func(nc *v1.NodeClaim) { nc.Annotations[v1.NodePoolHashAnnotationKey] = "2222" },
			want: string(disruption.NodePoolDrifted)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.cloud != nil {
				tt.cloud(e.cloud)
			}
			np := e.nodePool(func(np *v1.NodePool) {
				if tt.pool != nil {
					tt.pool(np)
				}
			})
			var conds []v1.Condition
			if !tt.notLaunch {
				conds = append(conds, launched(e.clock.Now()))
			} else {
				conds = append(conds, cond(v1.ConditionTypeLaunched, metav1.ConditionUnknown, e.clock.Now()))
			}
			if tt.preDrifted {
				conds = append(conds, cond(v1.ConditionTypeDrifted, metav1.ConditionTrue, e.clock.Now()))
			}
			// The claim must match the pool as created, before tt.pool's
			// drift-inducing edits: build it from a pristine copy.
			nc := e.nodeClaim(np, func(nc *v1.NodeClaim) {
				nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
				nc.Annotations[v1.NodePoolHashAnnotationKey] = "1111"
				if tt.claim != nil {
					tt.claim(nc)
				}
			}, conds...)
			e.clock.SetTime(nc.CreationTimestamp.Add(tt.age + time.Second))

			res := e.reconcile(nc.Name)
			got := e.get(nc.Name).Condition(v1.ConditionTypeDrifted)
			if tt.want == "" {
				assert.Nil(t, got, "no Drifted condition")
			} else {
				require.NotNil(t, got, "Drifted condition")
				assert.Equal(t, metav1.ConditionTrue, got.Status)
				assert.Equal(t, tt.want, got.Reason)
				assert.Equal(t, tt.want, got.Message)
			}
			if !tt.notLaunch {
				assert.Equal(t, 5*time.Minute, res.RequeueAfter, "drift is re-evaluated every 5 minutes")
			}
		})
	}
}

// TestDriftClearsWhenFixed drifts a NodeClaim by editing its NodePool and
// then reverts the edit: the condition comes and goes, and its transition
// time stays put while it is True.
func TestDriftClearsWhenFixed(t *testing.T) {
	e := newEnv(t)
	np := e.nodePool()
	nc := e.nodeClaim(np, nil, launched(e.clock.Now()))
	e.reconcile(nc.Name)
	assert.Nil(t, e.get(nc.Name).Condition(v1.ConditionTypeDrifted))

	np.Spec.Template.Spec.Requirements[0].Values = []string{"arm64"}
	require.NoError(t, cp.Client.Update(e.ctx, np))
	e.reconcile(nc.Name)
	first := e.get(nc.Name).Condition(v1.ConditionTypeDrifted)
	require.NotNil(t, first)
	assert.Equal(t, string(disruption.RequirementsDrifted), first.Reason)
	assert.Len(t, e.logs.Matching("marking drifted"), 1)

	e.clock.Step(time.Minute)
	e.reconcile(nc.Name)
	again := e.get(nc.Name).Condition(v1.ConditionTypeDrifted)
	require.NotNil(t, again)
	assert.True(t, first.LastTransitionTime.Equal(&again.LastTransitionTime), "unchanged condition keeps its transition time")
	assert.Len(t, e.logs.Matching("marking drifted"), 1, "logged once per transition")

	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(np), np))
	np.Spec.Template.Spec.Requirements[0].Values = []string{"amd64"}
	require.NoError(t, cp.Client.Update(e.ctx, np))
	e.reconcile(nc.Name)
	assert.Nil(t, e.get(nc.Name).Condition(v1.ConditionTypeDrifted))
	assert.Len(t, e.logs.Matching("removing drifted status condition, not drifted"), 1)
}

// TestInstanceTypeCheckIsCached: GetInstanceTypes is asked at most once per
// NodeClaim per 30 minutes.
func TestInstanceTypeCheckIsCached(t *testing.T) {
	e := newEnv(t)
	np := e.nodePool()
	nc := e.nodeClaim(np, nil, launched(e.clock.Now()))
	e.clock.SetTime(nc.CreationTimestamp.Add(2 * time.Hour))
	e.reconcile(nc.Name)
	require.Equal(t, 1, e.cloud.typesCalls)
	e.cloud.mu.Lock()
	e.cloud.instanceTypes = nil
	e.cloud.mu.Unlock()
	e.clock.Step(10 * time.Minute)
	e.reconcile(nc.Name)
	assert.Equal(t, 1, e.cloud.typesCalls, "cached verdict reused")
	assert.Nil(t, e.get(nc.Name).Condition(v1.ConditionTypeDrifted))
	e.clock.Step(25 * time.Minute)
	e.reconcile(nc.Name)
	assert.Equal(t, 2, e.cloud.typesCalls, "verdict expired after 30 minutes")
	got := e.get(nc.Name).Condition(v1.ConditionTypeDrifted)
	require.NotNil(t, got)
	assert.Equal(t, string(disruption.InstanceTypeNotFound), got.Reason)
}

func TestNoNodePool(t *testing.T) {
	e := newEnv(t)
	e.cloud.setDrifted("ImageDrifted")
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("missing")}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	nc := e.nodeClaim(np, nil, launched(e.clock.Now()))
	assert.Equal(t, reconcile.Result{}, e.reconcile(nc.Name))
	assert.Nil(t, e.get(nc.Name).Condition(v1.ConditionTypeDrifted))
}

func TestConsolidatable(t *testing.T) {
	tests := []struct {
		name string
		pool func(*v1.NodePool)
		// initializedAgo < 0 means not initialized.
		initializedAgo time.Duration
		// lastPodEventAgo 0 means no pod event yet.
		lastPodEventAgo time.Duration
		preset          bool
		want            bool
		wantRequeue     time.Duration
	}{
		{name: "elapsed since initialization", initializedAgo: 10 * time.Minute, want: true},
		{name: "not yet elapsed since initialization", initializedAgo: 2 * time.Minute, wantRequeue: 3 * time.Minute},
		{name: "recent pod event resets the wait", initializedAgo: time.Hour, lastPodEventAgo: time.Minute, preset: true,
			wantRequeue: 4 * time.Minute},
		{name: "elapsed since the last pod event", initializedAgo: time.Hour, lastPodEventAgo: 6 * time.Minute, want: true},
		{name: "not initialized", initializedAgo: -1, preset: true},
		{name: "consolidateAfter Never", initializedAgo: time.Hour, preset: true,
			pool: func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("Never") }},
		{name: "consolidateAfter 0s", initializedAgo: time.Second, want: true,
			pool: func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("0s") }},
		{name: "static nodepool never", initializedAgo: time.Hour, preset: true, pool: func(np *v1.NodePool) {
			np.Spec.Replicas = ptr.To[int64](1)
			np.Spec.Disruption.ConsolidateAfter = v1.NillableDuration{}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			now := e.clock.Now()
			np := e.nodePool(func(np *v1.NodePool) {
				if tt.pool != nil {
					tt.pool(np)
				}
			})
			conds := []v1.Condition{launched(now.Add(-2 * time.Hour))}
			if tt.initializedAgo >= 0 {
				conds = append(conds, cond(v1.ConditionTypeInitialized, metav1.ConditionTrue, now.Add(-tt.initializedAgo)))
			} else {
				conds = append(conds, cond(v1.ConditionTypeInitialized, metav1.ConditionUnknown, now.Add(-time.Hour)))
			}
			if tt.preset {
				conds = append(conds, cond(v1.ConditionTypeConsolidatable, metav1.ConditionTrue, now.Add(-time.Hour)))
			}
			nc := e.nodeClaim(np, nil, conds...)
			if tt.lastPodEventAgo > 0 {
				nc = e.get(nc.Name)
				nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-tt.lastPodEventAgo))
				require.NoError(t, cp.Client.Status().Update(e.ctx, nc))
			}

			res := e.reconcile(nc.Name)
			got := e.get(nc.Name).Condition(v1.ConditionTypeConsolidatable)
			if tt.want {
				require.NotNil(t, got, "Consolidatable condition")
				assert.Equal(t, metav1.ConditionTrue, got.Status)
				assert.Equal(t, v1.ConditionTypeConsolidatable, got.Reason)
			} else {
				assert.Nil(t, got, "no Consolidatable condition")
			}
			// The drift part asks for 5 minutes; the result is the minimum.
			want := 5 * time.Minute
			if tt.wantRequeue > 0 && tt.wantRequeue < want {
				want = tt.wantRequeue
			}
			// API server timestamps have second precision.
			assert.InDelta(t, want.Seconds(), res.RequeueAfter.Seconds(), 1.01)
		})
	}
}

// TestConsolidatableAfterWait: a NodeClaim waits out consolidateAfter and
// then turns consolidatable once the clock passes it.
func TestConsolidatableAfterWait(t *testing.T) {
	e := newEnv(t)
	np := e.nodePool()
	now := e.clock.Now()
	nc := e.nodeClaim(np, nil, launched(now), cond(v1.ConditionTypeInitialized, metav1.ConditionTrue, now))
	res := e.reconcile(nc.Name)
	assert.Nil(t, e.get(nc.Name).Condition(v1.ConditionTypeConsolidatable))
	assert.InDelta(t, (5 * time.Minute).Seconds(), res.RequeueAfter.Seconds(), 1.01)
	e.clock.Step(res.RequeueAfter + time.Second)
	e.reconcile(nc.Name)
	assert.True(t, e.get(nc.Name).IsTrue(v1.ConditionTypeConsolidatable))
	assert.Len(t, e.logs.Matching("marking consolidatable"), 1)
}
