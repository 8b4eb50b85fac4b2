package scheduling

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// kwokLikeTypes mirrors the shapes of upstream's kwok catalogue: families
// with 2, 4 and 8 GiB per cpu, priced by cpu and memory, up to 256 cpu and
// 16 pods per cpu.
func kwokLikeTypes() []*InstanceType {
	var out []*InstanceType
	for _, cpu := range []int{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256} {
		for fam, perCPU := range map[string]int{"c": 2, "s": 4, "m": 8} {
			mem := cpu * perCPU
			price := 0.025*float64(cpu) + 0.001*float64(int64(mem)<<30)/1e9
			it := mkType(fmt.Sprintf("%s-%dx", fam, cpu), cpu, mem, price, zones3, []string{CapacityTypeSpot})
			it.Capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(min(16*cpu, 1024)), resource.DecimalSI)
			out = append(out, it)
		}
	}
	return out
}

// strandedOnArrival plays the kube-scheduler's part, independently of the
// solver: pods arrive alternating between the two Deployments and each goes
// to the first node, in a random node order, that has room under the
// allocatable of the type that launches (the cheapest listed). It returns
// how many pods found no room.
func strandedOnArrival(res *Result, large, small []*corev1.Pod, seed int64) int {
	type node struct{ cpu, mem, pods int64 }
	nodes := make([]*node, 0, len(res.NewNodeClaims))
	for _, nc := range res.NewNodeClaims {
		it := nc.InstanceTypes[0]
		a := it.Capacity.DeepCopy()
		for k, v := range it.Overhead {
			q := a[k]
			q.Sub(v)
			a[k] = q
		}
		nodes = append(nodes, &node{cpu: a.Cpu().MilliValue(), mem: a.Memory().Value(), pods: a.Pods().Value()})
	}
	rand.New(rand.NewSource(seed)).Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	var arrivals []*corev1.Pod
	for i := 0; i < max(len(large), len(small)); i++ {
		if i < len(large) {
			arrivals = append(arrivals, large[i])
		}
		if i < len(small) {
			arrivals = append(arrivals, small[i])
		}
	}
	stranded := 0
	for _, p := range arrivals {
		r := PodRequests(p)
		cpu, mem := r.Cpu().MilliValue(), r.Memory().Value()
		placed := false
		for _, n := range nodes {
			if n.cpu >= cpu && n.mem >= mem && n.pods >= 1 {
				n.cpu, n.mem, n.pods = n.cpu-cpu, n.mem-mem, n.pods-1
				placed = true
				break
			}
		}
		if !placed {
			stranded++
		}
	}
	return stranded
}

// TestRobustPlanSurvivesMixing is the provisioning benchmark's workload:
// 500 pods of 3500m/28Gi and 500 of 900m/3100Mi against a kwok-like
// catalogue. The cheapest packing puts the small pods on a 4 GiB-per-cpu
// machine; once the kube-scheduler mixes the pods, that machine runs out of
// memory with cpu to spare and pods are left over. The robust plan holds
// every pod in every node order, for a few percent more.
func TestRobustPlanSurvivesMixing(t *testing.T) {
	var large, small, pods []*corev1.Pod
	for i := 0; i < 500; i++ {
		large = append(large, mkPod(fmt.Sprintf("large-%03d", i), "3500m", "28Gi"))
		small = append(small, mkPod(fmt.Sprintf("small-%03d", i), "900m", "3100Mi"))
	}
	pods = append(append(pods, large...), small...)
	solve := func(robust bool) *Result {
		in := &Input{Pods: pods, NodePools: []*NodePool{mkPool("bench", kwokLikeTypes())}, Options: Options{Robust: robust}}
		res := Solve(in)
		require.NoError(t, checkInvariants(in, res))
		for _, pl := range res.Placements {
			require.True(t, pl.Scheduled(), pl.Why())
		}
		return res
	}
	cheap, robust := solve(false), solve(true)

	worst := func(res *Result) int {
		w := 0
		for seed := int64(0); seed < 20; seed++ {
			w = max(w, strandedOnArrival(res, large, small, seed))
		}
		return w
	}
	assert.Positive(t, worst(cheap), "the cheapest plan should strand pods once they are mixed (else this test shows nothing)")
	assert.Zero(t, worst(robust), "the robust plan must hold every pod however they mix")
	assert.LessOrEqual(t, robust.Cost(), cheap.Cost()*1.05, "robustness should cost little: %.2f vs %.2f", robust.Cost(), cheap.Cost())
	assert.Equal(t, len(cheap.NewNodeClaims), len(robust.NewNodeClaims), "the same NodeClaims, some on a larger type")
	t.Logf("cheapest plan $%.2f/h, robust plan $%.2f/h, %d NodeClaims", cheap.Cost(), robust.Cost(), len(robust.NewNodeClaims))
}

// TestRobustLeavesUnmixablePodsAlone checks that pods pinned to different
// node shapes by their selectors (here, arch) are not treated as one mix.
func TestRobustLeavesUnmixablePodsAlone(t *testing.T) {
	types := kwokLikeTypes()
	var arm []*InstanceType
	for _, it := range types {
		c := *it
		c.Name = it.Name + "-arm"
		c.Requirements = it.Requirements.Copy()
		c.Requirements[LabelInstanceType] = NewRequirement(LabelInstanceType, OpIn, c.Name)
		c.Requirements[LabelArch] = NewRequirement(LabelArch, OpIn, "arm64")
		arm = append(arm, &c)
	}
	var pods []*corev1.Pod
	for i := 0; i < 100; i++ {
		pods = append(pods,
			mkPod(fmt.Sprintf("amd-%03d", i), "3500m", "28Gi", withNodeSelector(LabelArch, "amd64")),
			mkPod(fmt.Sprintf("arm-%03d", i), "900m", "3100Mi", withNodeSelector(LabelArch, "arm64")))
	}
	solve := func(robust bool) *Result {
		return Solve(&Input{Pods: pods, NodePools: []*NodePool{mkPool("p", append(types, arm...))}, Options: Options{Robust: robust}})
	}
	assert.Equal(t, solve(false).Cost(), solve(true).Cost())
}
