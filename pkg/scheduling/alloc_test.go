package scheduling

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// bytesPer is the heap allocated per call of f, averaged over runs.
func bytesPer(runs int, f func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// TestSolveBuildsLittlePerSolve bounds what a solve allocates for what it
// reads of its input: the disruption simulator solves once per candidate, so
// copying every instance type's requirements and building a map per
// container of every bound pod on each solve was most of the controller's
// garbage.
func TestSolveBuildsLittlePerSolve(t *testing.T) {
	// PodRequests: the same sums, without a list per container.
	p := mkPod("p", "1", "1Gi")
	p.Spec.Containers = append(p.Spec.Containers,
		corev1.Container{Name: "limit-only", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}},
		corev1.Container{Name: "both", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}})
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	got := PodRequests(p)
	assert.Equal(t, "1760m", ptrQ(got[corev1.ResourceCPU]).String())
	assert.Equal(t, int64(2<<30+256<<20), ptrQ(got[corev1.ResourceMemory]).Value())
	assert.LessOrEqual(t, testing.AllocsPerRun(50, func() { PodRequests(p) }), 4.0, "allocations per PodRequests of a 3-container pod")

	// Instance types: their requirements are read, not copied.
	var types []*InstanceType
	for i := range 200 {
		types = append(types, mkType(fmt.Sprintf("t-%d", i), 1+i%64, 4, 0.05, zones3, both))
	}
	before := map[string]int{}
	for _, it := range types {
		before[it.Name] = len(it.Requirements)
	}
	in := &Input{Pods: []*corev1.Pod{mkPod("one", "100m", "")}, NodePools: []*NodePool{mkPool("default", types)}}
	Solve(in)
	for _, it := range types {
		assert.Len(t, it.Requirements, before[it.Name], "type %s's requirements are left as they were", it.Name)
	}
	perSolve := bytesPer(10, func() { Solve(in) })
	t.Logf("bytes per solve over %d types: %.0f", len(types), perSolve)
	assert.Less(t, perSolve, float64(len(types)*1000), "bytes per solve over %d types", len(types))
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }
