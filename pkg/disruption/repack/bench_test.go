package repack_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption/benchmark"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

// BenchmarkPlannerPass times one planner pass over 1,000 nodes after a
// scale-in, with every other owner's pods under a zone spread: a spread
// pod's moves are solved against a full view of the cluster (every pool's
// nodes), which is how the soak's Deployments make the planner solve.
func BenchmarkPlannerPass(b *testing.B) {
	c, err := benchmark.NewCluster(1000, 0.3, 7)
	if err != nil {
		b.Fatal(err)
	}
	spread := 0
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			if app := p.Labels["app"]; len(app)%2 == 0 {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
					WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
				spread++
			}
		}
	}
	if spread == 0 {
		b.Fatal("no pod under a spread")
	}
	opts := repack.Options{SpotToSpot: true}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := repack.Explain(c.Snap, repack.History{}, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Commands) == 0 {
			b.Fatal("the pass found no command")
		}
	}
}
