package state_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// TestInformers drives the cache through a running manager: objects created,
// launched, bound and deleted in the API server show up in the cache, and
// Synced turns true.
func TestInformers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := manager.New(cp.Config, manager.Options{
		Scheme:                 cp.Client.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	// Synced reads the manager's informers' stores, as in the controller.
	cluster := state.NewCluster(clock.RealClock{}, mgr.GetClient(), state.Options{BatchMaxDuration: 10 * time.Second, Informers: mgr.GetCache()})
	require.NoError(t, state.Register(ctx, mgr, cluster))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "informers"}}
	require.NoError(t, cp.Client.Create(ctx, ns))
	np := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "informers"},
		Spec: v1.NodePoolSpec{
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{},
			}},
			Limits: v1.Limits(rl("100", "1Ti")),
		},
	}
	require.NoError(t, cp.Client.Create(ctx, np))
	eventually(t, func() bool {
		m := &dto.Metric{}
		_ = metrics.NodePoolLimit.WithLabelValues("informers", "cpu").(prometheus.Metric).Write(m)
		return m.GetGauge().GetValue() == 100
	})

	nc := nodeClaim("informers-nc", "informers", "")
	require.NoError(t, cp.Client.Create(ctx, nc))
	eventually(t, func() bool { _, ok := cluster.Node("informers-nc"); return ok })

	nc.Status.ProviderID = "kwok://informers-node"
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	n := node("informers-node", "informers", "kwok://informers-node", true)
	require.NoError(t, cp.Client.Create(ctx, n))
	eventually(t, func() bool {
		sn, ok := cluster.Node("informers-node")
		return ok && sn.NodeClaim != nil && sn.NodeClaim.Name == "informers-nc"
	})

	p := pod("informers", "p", "informers-node", "1")
	require.NoError(t, cp.Client.Create(ctx, p))
	eventually(t, func() bool { sn, _ := cluster.Node("informers-node"); return len(sn.Pods) == 1 })

	ds := daemonSet("informers", "ds")
	require.NoError(t, cp.Client.Create(ctx, ds))
	eventually(t, func() bool { return len(cluster.DaemonSets()) == 1 })

	eventually(t, func() bool { return cluster.Synced(ctx) })
	assert.Equal(t, 1, cluster.NodePoolUsage("informers").Nodes)

	require.NoError(t, cp.Client.Delete(ctx, p, client.GracePeriodSeconds(0)))
	eventually(t, func() bool { sn, _ := cluster.Node("informers-node"); return len(sn.Pods) == 0 })
	require.NoError(t, cp.Client.Delete(ctx, ds))
	eventually(t, func() bool { return len(cluster.DaemonSets()) == 0 })
	require.NoError(t, cp.Client.Delete(ctx, n))
	require.NoError(t, cp.Client.Delete(ctx, nc))
	eventually(t, func() bool { _, ok := cluster.Node("informers-nc"); return !ok })
	eventually(t, func() bool { return cluster.Synced(ctx) })
	require.NoError(t, cp.Client.Delete(ctx, np))
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 20*time.Millisecond)
}

// TestInformersKeepTheCachesObjects checks that the cluster state holds the
// informer cache's objects, not copies of them: a copy would hold every pod,
// Node and NodeClaim twice. Sharing is seen as the same backing array of a
// slice the object carries.
func TestInformersKeepTheCachesObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mgr, err := manager.New(cp.Config, manager.Options{
		Scheme:                 cp.Client.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	cluster := state.NewCluster(clock.RealClock{}, mgr.GetClient(), state.Options{BatchMaxDuration: 10 * time.Second})
	require.NoError(t, state.Register(ctx, mgr, cluster))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}))
	require.NoError(t, cp.Client.Create(ctx, nodeClaim("shared-nc", "shared", "")))
	require.NoError(t, cp.Client.Create(ctx, node("shared-node", "shared", "kwok://shared-node", true)))
	require.NoError(t, cp.Client.Create(ctx, pod("shared", "p", "shared-node", "1")))
	require.NoError(t, cp.Client.Create(ctx, daemonSetPod("shared", "ds-p", "shared-node", "ds", "1", time.Now())))
	require.NoError(t, cp.Client.Create(ctx, daemonSet("shared", "ds")))

	// cached reads the informer cache's own object (a shallow copy of it:
	// its slices are the cache's).
	cached := func(obj client.Object, key client.ObjectKey) bool {
		return mgr.GetCache().Get(ctx, key, obj, client.UnsafeDisableDeepCopy) == nil
	}
	same := func(a, b any) bool {
		va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
		return va.Len() > 0 && vb.Len() > 0 && va.Pointer() == vb.Pointer()
	}
	tests := []struct {
		name   string
		shared func() bool
	}{
		{"node", func() bool {
			sn, ok := cluster.Node("shared-node")
			n := &corev1.Node{}
			return ok && sn.Node != nil && cached(n, client.ObjectKey{Name: "shared-node"}) && same(sn.Node.Spec.Taints, n.Spec.Taints)
		}},
		{"nodeclaim", func() bool {
			sn, ok := cluster.Node("shared-nc")
			nc := &v1.NodeClaim{}
			return ok && sn.NodeClaim != nil && cached(nc, client.ObjectKey{Name: "shared-nc"}) && same(sn.NodeClaim.Spec.Taints, nc.Spec.Taints)
		}},
		{"pod", func() bool {
			sn, ok := cluster.Node("shared-node")
			p := &corev1.Pod{}
			key := client.ObjectKey{Namespace: "shared", Name: "p"}
			return ok && sn.Pods[key] != nil && cached(p, key) && same(sn.Pods[key].Spec.Containers, p.Spec.Containers)
		}},
		{"daemonset", func() bool {
			ds := &appsv1.DaemonSet{}
			if !cached(ds, client.ObjectKey{Namespace: "shared", Name: "ds"}) {
				return false
			}
			for _, got := range cluster.DaemonSets() {
				if got.Name == "ds" && same(got.Spec.Template.Spec.Containers, ds.Spec.Template.Spec.Containers) {
					return true
				}
			}
			return false
		}},
		{"daemonset pod", func() bool {
			ds := daemonSet("shared", "ds")
			p := &corev1.Pod{}
			got := cluster.DaemonSetPod(ds)
			return got != nil && cached(p, client.ObjectKey{Namespace: "shared", Name: "ds-p"}) && same(got.Spec.Containers, p.Spec.Containers)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { eventually(t, tt.shared) })
	}

	// Synced reads only names and provider IDs: it must not copy the
	// cache's objects on each check (every provisioning round and
	// disruption simulation calls it). A copied Node or NodeClaim costs
	// a dozen allocations or more.
	const extra = 40
	for i := range extra {
		name := "shared-node-" + strconv.Itoa(i)
		require.NoError(t, cp.Client.Create(ctx, node(name, "shared", "kwok://"+name, true)))
	}
	eventually(t, func() bool {
		_, ok := cluster.Node("shared-node-" + strconv.Itoa(extra-1))
		return ok && cluster.Synced(ctx)
	})
	allocs := testing.AllocsPerRun(10, func() { cluster.Synced(ctx) })
	assert.Less(t, allocs, float64(extra), "allocations of one Synced over %d nodes", extra+1)
}
