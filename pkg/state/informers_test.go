package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	cluster := state.NewCluster(clock.RealClock{}, mgr.GetClient(), state.Options{BatchMaxDuration: 10 * time.Second})
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
