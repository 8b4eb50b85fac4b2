package benchmark

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// The pods of the end-to-end consolidation benchmark (test/e2e
// BenchmarkConsolidation1000).
var (
	largePod = shape{"large-resource-app", 3500, 28 << 10}
	smallPod = shape{"small-resource-app", 900, 3100}
)

// ScaleInCapped16 is the fleet the end-to-end benchmark's capped run found
// right after small-resource-app went from 500 to 200 replicas (its log's
// "nodes by pods after the scale-in"): m-16x-amd64-linux nodes counted by
// the large and small pods they ran, as {large, small, nodes}. Emptied
// nodes are left out (Emptiness deletes them without evictions).
var ScaleInCapped16 = [][3]int{{1, 0, 9}, {2, 0, 1}, {2, 6, 1}, {2, 8, 2}, {2, 9, 10}, {3, 0, 1}, {3, 6, 8}, {4, 0, 88}, {4, 1, 2}, {4, 2, 19}}

// ScaleInCapped16Holes is another capped run's fleet after the scale-in:
// 30 nodes of three large pods each have room for a fourth, so deleting
// the 1- and 2-pod nodes into those holes saves nearly what one N→M move
// over every underused node saves, for far fewer evictions.
var ScaleInCapped16Holes = [][3]int{{1, 0, 4}, {2, 0, 5}, {3, 0, 30}, {3, 2, 5}, {3, 3, 9}, {3, 4, 14}, {4, 0, 21}, {4, 1, 7}, {4, 2, 50}}

// ScaleInCapped16Threes is a third capped run's fleet after the scale-in:
// 23 nodes of three large pods and no small one, 22 more with one or two
// small pods, so most nodes have room for a fourth large pod.
var ScaleInCapped16Threes = [][3]int{{1, 0, 4}, {2, 0, 4}, {3, 0, 23}, {3, 1, 11}, {3, 2, 11}, {3, 3, 1}, {3, 4, 2}, {4, 0, 1}, {4, 1, 14}, {4, 2, 71}}

// ScaleInCapped16Ones is a fourth capped run's fleet after the scale-in: 24
// nodes of one or two large pods, whose pods fill the holes of 16
// three-pod nodes when all are deleted at once, and not when they go one
// by one (the kube-scheduler spreads each one's pods onto the next).
var ScaleInCapped16Ones = [][3]int{{1, 0, 13}, {2, 0, 11}, {3, 0, 16}, {3, 3, 2}, {3, 4, 5}, {3, 5, 4}, {4, 0, 15}, {4, 1, 8}, {4, 2, 73}}

// ScaleInCapped16Twos is a fifth capped run's fleet after the scale-in: 13
// nodes of two large pods and 4 of one, beside 14 of three large and six
// small pods. Deletes and pairs of the two-pod nodes save nearly what one
// N→M move over 66 nodes saves, for a fifteenth of its evictions.
var ScaleInCapped16Twos = [][3]int{{1, 0, 4}, {2, 0, 13}, {3, 3, 1}, {3, 4, 2}, {3, 5, 1}, {3, 6, 14}, {4, 0, 46}, {4, 1, 16}, {4, 2, 42}}

// CappedPoolRequirements are the end-to-end benchmark's pool: on-demand
// amd64 linux, below 32 vCPU when capped.
func CappedPoolRequirements(capped bool) []v1.NodeSelectorRequirementWithMinValues {
	reqs := []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
	}
	if capped {
		reqs = append(reqs, v1.NodeSelectorRequirementWithMinValues{Key: "karpenter.kwok.sh/instance-size", Operator: corev1.NodeSelectorOpLt, Values: []string{"32"}})
	}
	return reqs
}

// LargePodFloor is PodFloor for n large pods on the upstream-kwok catalog
// within the end-to-end benchmark's pool.
func LargePodFloor(n int, capped bool) (float64, error) {
	cat, err := kwok.LoadCatalog(kwok.CatalogUpstreamKWOK)
	if err != nil {
		return 0, fmt.Errorf("loading the upstream-kwok catalog: %w", err)
	}
	reqs, err := snapshot.Requirements(CappedPoolRequirements(capped))
	if err != nil {
		return 0, err
	}
	return PodFloor(cat, reqs, largePod.cpu, largePod.memory<<20, n), nil
}

// NewScaleInCluster rebuilds a fleet of m-16x-amd64-linux nodes of the
// end-to-end benchmark's capped pool ("bench", upstream-kwok catalog, no
// DaemonSet, consolidating at once under a 100% budget) from counts of
// {large, small, nodes}, so that both algorithms can be compared offline
// on the very state the end-to-end run consolidated.
func NewScaleInCluster(counts [][3]int) (*Cluster, error) {
	cat, err := kwok.LoadCatalog(kwok.CatalogUpstreamKWOK)
	if err != nil {
		return nil, fmt.Errorf("loading the upstream-kwok catalog: %w", err)
	}
	const pool = "bench"
	c := &Cluster{Catalog: cat, noDaemon: true}
	c.Snap = &disruption.Snapshot{Now: Epoch, NodePools: map[string]*v1.NodePool{}, InstanceTypes: map[string][]*scheduling.InstanceType{pool: cat}}
	c.Snap.NodePools[pool] = &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: v1.NodePoolSpec{
		Disruption: v1.Disruption{ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: v1.NewNillableDuration(0), Budgets: []v1.Budget{{Nodes: "100%"}}},
		Template:   v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{Requirements: CappedPoolRequirements(true)}},
	}, Status: readyStatus()}
	c.pools = []string{pool}
	var m16 *scheduling.InstanceType
	for _, it := range cat {
		if it.Name == "m-16x-amd64-linux" {
			m16 = it
		}
	}
	if m16 == nil {
		return nil, fmt.Errorf("m-16x-amd64-linux is not in the upstream-kwok catalog")
	}
	for _, k := range counts {
		for i := 0; i < k[2]; i++ {
			n := c.AddNode(pool, m16, c.poolOffer(pool, m16, "test-zone-a"), Epoch.Add(-2*time.Hour))
			for j := 0; j < k[0]; j++ {
				c.Bind(newPod(c.name(largePod.name), "", largePod, "ReplicaSet", largePod.name), n)
			}
			for j := 0; j < k[1]; j++ {
				c.Bind(newPod(c.name(smallPod.name), "", smallPod, "ReplicaSet", smallPod.name), n)
			}
		}
	}
	c.sortNodes()
	return c, nil
}
