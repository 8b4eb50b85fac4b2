package scheduling

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkRounds solves successive snapshots of a 1,000-node cluster (ten
// pods a node, twenty pending), as provisioning rounds do: every round the
// nodes are new copies, 5% of them with their labels in a new map (a Node
// the informer replaced) and 5% with one pod replaced. "fresh" derives
// every node each round; "cache" prepares them through a NodeCache, as the
// provisioner and the disruption simulators do.
//
//	go test -run '^$' -bench Rounds -benchmem ./pkg/scheduling/
func BenchmarkRounds(b *testing.B) {
	const nodes, podsPerNode = 1000, 10
	base := make([]*ExistingNode, nodes)
	for i := range base {
		pods := make([]*corev1.Pod, podsPerNode)
		for j := range pods {
			pods[j] = mkPod(fmt.Sprintf("p-%d-%d", i, j), "300m", "512Mi", withLabels("app", fmt.Sprintf("app-%d", j)))
		}
		base[i] = mkNode(fmt.Sprintf("node-%04d", i), "4", "16Gi", map[string]string{
			LabelZone: fmt.Sprintf("zone-%d", i%3), LabelInstanceType: "m-4x", LabelCapacityType: "on-demand",
			LabelArch: "amd64", LabelOS: "linux", "karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
		}, pods...)
	}
	pending := make([]*corev1.Pod, 20)
	for i := range pending {
		pending[i] = mkPod(fmt.Sprintf("pending-%d", i), "500m", "1Gi")
	}
	next := func(round int, prev []*ExistingNode) []*ExistingNode {
		out := make([]*ExistingNode, len(prev))
		for i, n := range prev {
			cp := *n
			cp.prepared = nil
			switch (i + round) % 20 {
			case 0:
				cp.Labels = maps.Clone(n.Labels)
			case 1:
				cp.Pods = slices.Clone(n.Pods)
				cp.Pods[0] = n.Pods[0].DeepCopy()
			}
			out[i] = &cp
		}
		return out
	}
	for _, mode := range []string{"fresh", "cache"} {
		b.Run(mode, func(b *testing.B) {
			cache := &NodeCache{}
			current := base
			round := 0
			for b.Loop() {
				round++
				current = next(round, current)
				in := &Input{Nodes: current, Pods: pending}
				if mode == "cache" {
					in.Nodes = cache.Prepare(current)
				}
				Solve(in)
			}
		})
	}
}
