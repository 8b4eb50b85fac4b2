package scheduling

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestSpreadOverPlacementGroupPartitions: the AWS provider gives every
// type of a class in a partition placement group the requirement
// karpenter.k8s.aws/placement-group-partition In [1..N] (no offering per
// partition, as upstream has); a spread over that key still makes one
// domain per partition, and each NodeClaim is pinned to one partition,
// which the provider then launches into.
func TestSpreadOverPlacementGroupPartitions(t *testing.T) {
	const key = "karpenter.k8s.aws/placement-group-partition"
	var types []*InstanceType
	for _, c := range []int{2, 4, 8} {
		types = append(types, mkType(fmt.Sprintf("m.%dx", c), c, 4*c, 0.05*float64(c), zones3, odOnly,
			NewRequirement(key, OpIn, "1", "2", "3")))
	}
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, mkPod(fmt.Sprintf("kafka-%d", i), "500m", "512Mi", withLabels("app", "kafka"),
			withSpread(key, 1, corev1.DoNotSchedule, map[string]string{"app": "kafka"})))
	}
	res := solveOK(t, &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", types)}})
	require.Len(t, res.NewNodeClaims, 3, "one NodeClaim per partition: %v", where(res))
	var partitions []string
	for _, nc := range res.NewNodeClaims {
		r := nc.Requirements.Get(key)
		require.Equal(t, 1, r.Len(), "pinned to one partition: %s", r)
		partitions = append(partitions, r.Values()[0])
	}
	sort.Strings(partitions)
	assert.Equal(t, []string{"1", "2", "3"}, partitions)
}
