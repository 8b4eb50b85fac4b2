package state_test

import (
	"fmt"
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
	"k8s.io/utils/ptr"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// podStates scrapes karpenter_pods_state: each series' labels by pod name.
func podStates(t *testing.T) map[string]map[string]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.PodState))
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]map[string]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			require.Equal(t, dto.MetricType_GAUGE, f.GetType())
			require.Equal(t, 1.0, m.GetGauge().GetValue())
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			out[labels["name"]] = labels
		}
	}
	return out
}

// TestPodStateSeries checks karpenter_pods_state as a scrape sees it: one
// series per pod the cluster state knows, with upstream's labels, the
// node's labels as the node has them at the scrape (also when the node was
// labelled after the pod's last update), and no series for a deleted pod.
func TestPodStateSeries(t *testing.T) {
	labelled := func() *corev1.Node {
		n := node("ps-node", "pool-a", "kwok://ps-node", true)
		n.Labels[corev1.LabelTopologyZone] = "zone-b"
		n.Labels[corev1.LabelArchStable] = "arm64"
		n.Labels[v1.CapacityTypeLabelKey] = "spot"
		n.Labels[corev1.LabelInstanceTypeStable] = "c-4x"
		return n
	}
	running := func() *corev1.Pod {
		p := pod("ps", "web", "ps-node", "1")
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "rs", Controller: ptr.To(true)}}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	onNode := map[string]string{
		"name": "web", "namespace": "ps", "owner": "/apis/apps/v1/namespaces/ps/replicasets/web-abc", "node": "ps-node",
		"scheduled": "true", "nodepool": "pool-a", "zone": "zone-b", "arch": "arm64", "capacity_type": "spot",
		"instance_type": "c-4x", "phase": "Running", "ready": "true", "managed": "true",
	}
	tests := []struct {
		name  string
		steps func(c *state.Cluster)
		want  map[string]map[string]string
	}{
		{"a bound pod carries its node's labels",
			func(c *state.Cluster) { c.UpdateNode(labelled()); c.UpdatePod(running()) },
			map[string]map[string]string{"web": onNode}},
		{"a node labelled after the pod's last update",
			func(c *state.Cluster) {
				c.UpdatePod(running())
				c.UpdateNode(node("ps-node", "", "kwok://ps-node", false))
				c.UpdateNode(labelled())
			},
			map[string]map[string]string{"web": onNode}},
		{"a pending pod",
			func(c *state.Cluster) {
				p := pod("ps", "pending", "", "1")
				p.Status.Phase = corev1.PodPending
				c.UpdatePod(p)
			},
			map[string]map[string]string{"pending": {
				"name": "pending", "namespace": "ps", "owner": "", "node": "", "scheduled": "false", "nodepool": "",
				"zone": "", "arch": "", "capacity_type": "", "instance_type": "", "phase": "Pending", "ready": "false", "managed": "false",
			}}},
		{"a deleted pod's series goes",
			func(c *state.Cluster) {
				c.UpdateNode(labelled())
				c.UpdatePod(running())
				c.UpdatePod(pod("ps", "gone", "ps-node", "1"))
				c.DeletePod(types.NamespacedName{Namespace: "ps", Name: "gone"})
			},
			map[string]map[string]string{"web": onNode}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(clocktesting.NewFakeClock(time.Now()))
			tt.steps(c)
			assert.Equal(t, tt.want, podStates(t))
		})
	}
}

// TestPodStateSeriesFollowChanges scrapes between changes: a series kept
// from an earlier scrape follows the node's labels, the pod's readiness and
// phase, and goes with the pod.
func TestPodStateSeriesFollowChanges(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	p := pod("ps", "web", "ps-node", "1")
	p.Status.Phase = corev1.PodPending
	c.UpdateNode(node("ps-node", "pool-a", "kwok://ps-node", true))
	c.UpdatePod(p)
	c.UpdatePod(pod("ps", "other", "ps-node", "1"))
	steps := []struct {
		name   string
		change func()
		want   map[string]string // labels of "web" that differ from the first scrape's
	}{
		{"first scrape", func() {}, nil},
		{"scraped again", func() {}, nil},
		{"the node is labelled", func() {
			n := node("ps-node", "pool-a", "kwok://ps-node", true)
			n.Labels[corev1.LabelTopologyZone] = "zone-c"
			c.UpdateNode(n)
		}, map[string]string{"zone": "zone-c"}},
		{"the pod runs and is Ready", func() {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			c.UpdatePod(p)
		}, map[string]string{"zone": "zone-c", "phase": "Running", "ready": "true"}},
	}
	first := podStates(t)["web"]
	require.NotNil(t, first)
	for _, step := range steps {
		step.change()
		want := map[string]string{}
		for k, v := range first {
			want[k] = v
		}
		for k, v := range step.want {
			want[k] = v
		}
		got := podStates(t)
		assert.Equal(t, want, got["web"], step.name)
		assert.Contains(t, got, "other", step.name)
	}
	c.DeletePod(types.NamespacedName{Namespace: "ps", Name: "web"})
	got := podStates(t)
	assert.NotContains(t, got, "web", "a deleted pod's kept series goes")
	assert.Len(t, got, 1)
}

// BenchmarkPodStateScrape scrapes karpenter_pods_state for 10,000 pods on
// 1,000 nodes through a registry, 1% of the pods changing between scrapes.
//
//	go test -run '^$' -bench PodStateScrape -benchmem ./pkg/state/
func BenchmarkPodStateScrape(b *testing.B) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	var pods []*corev1.Pod
	for i := range 1000 {
		n := node(fmt.Sprintf("bench-node-%d", i), "pool-a", fmt.Sprintf("kwok://bench-node-%d", i), true)
		n.Labels[corev1.LabelTopologyZone] = fmt.Sprintf("zone-%d", i%3)
		c.UpdateNode(n)
		for j := range 10 {
			p := pod("bench", fmt.Sprintf("web-%d-%d", i, j), n.Name, "1")
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("web-%d", j), UID: "rs", Controller: ptr.To(true)}}
			p.Status.Phase = corev1.PodRunning
			c.UpdatePod(p)
			pods = append(pods, p)
		}
	}
	reg := prometheus.NewRegistry()
	require.NoError(b, reg.Register(metrics.PodState))
	round := 0
	for b.Loop() {
		for i := round % 100; i < len(pods); i += 100 {
			p := pods[i].DeepCopy()
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionStatus([]string{"True", "False"}[round%2])}}
			c.UpdatePod(p)
		}
		round++
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
