package workload

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		name      string
		spec      corev1.PodSpec
		cpu, memG float64
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}},
			{Resources: corev1.ResourceRequirements{Requests: rl("500m", "1Gi")}},
		}}, 1.5, 2},
		{"init peak wins when larger", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("4", "1Gi")}}},
			Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("1", "2Gi")}}},
		}, 4, 2},
		{"sidecars add to both", corev1.PodSpec{
			InitContainers: []corev1.Container{
				{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}},
				{Resources: corev1.ResourceRequirements{Requests: rl("3", "1Gi")}},
			},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}}},
		}, 4, 2},
		{"overhead on top", corev1.PodSpec{
			Overhead:   rl("250m", "1Gi"),
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("1", "1Gi")}}},
		}, 1.25, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := PodRequests(&corev1.Pod{Spec: tc.spec})
			assert.InDelta(t, tc.cpu, d[corev1.ResourceCPU], 1e-9)
			assert.InDelta(t, tc.memG, d[corev1.ResourceMemory]/(1<<30), 1e-9)
			assert.Equal(t, 1.0, d[corev1.ResourcePods])
		})
	}
}

func simpleType(name string, cpu, mem string, price float64) InstanceType {
	return InstanceType{
		Name:      name,
		Capacity:  rl(cpu, mem),
		Offerings: []Offering{{Price: price, Available: true}, {Price: price / 2, Available: false}},
	}
}

func TestLowerBound(t *testing.T) {
	skewed := []InstanceType{simpleType("cpu-rich", "4", "1", 1), simpleType("mem-rich", "1", "4", 1)}
	for _, tc := range []struct {
		name       string
		demand     Demand
		types      []InstanceType
		lp, simple float64
		binding    corev1.ResourceName
		infeasible bool
	}{
		// Each resource alone is cheapest at 1/4 per unit, yet covering both
		// needs one of each type: the LP sees that, the per-resource bound not.
		{"lp beats per-resource", Demand{"cpu": 5, "memory": 5}, skewed, 2, 1.25, "cpu", false},
		{"one resource", Demand{"cpu": 8}, skewed, 2, 2, "cpu", false},
		{"unavailable offerings ignored", Demand{"memory": 4}, skewed, 1, 1, "memory", false},
		{"nobody offers gpus", Demand{"cpu": 1, "nvidia.com/gpu": 1}, skewed, 0, 0, "", true},
		{"empty demand", Demand{}, skewed, 0, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := LowerBound(tc.demand, tc.types)
			if tc.infeasible {
				assert.ErrorIs(t, err, ErrInfeasible)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tc.lp, b.LP, 1e-9)
			assert.InDelta(t, tc.simple, b.PerResource, 1e-9)
			assert.Equal(t, tc.binding, b.Binding)
		})
	}
}

// On the benchmark catalogue the largest type has the best price per unit of
// every resource, so the LP optimum buys only fake-it-399 and equals the
// per-resource bound.
func TestLowerBoundOnBenchmarkCatalogue(t *testing.T) {
	cat := Catalogue()
	perCore := Price(400) / 399.9
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			d := TotalDemand(c.Pods)
			b, err := LowerBound(d, cat)
			require.NoError(t, err)
			want := d[corev1.ResourceCPU] * perCore
			if m := d[corev1.ResourceMemory] * Price(400) / float64(800<<30-10<<20); m > want {
				want = m
			}
			assert.InDelta(t, want, b.LP, want*1e-9)
			assert.InDelta(t, b.PerResource, b.LP, want*1e-9)
		})
	}
	// Upstream's IgnorePreferences plan (5 × k=400 + 1 × k=3) is within 0.2%
	// of the bound; its diverse plans are far above it.
	c, err := CaseByName("IgnorePreferences")
	require.NoError(t, err)
	b, err := LowerBound(TotalDemand(c.Pods), cat)
	require.NoError(t, err)
	assert.InDelta(t, 1.0013, 630.44/b.LP, 0.001)
}

// A random-ish catalogue where several types share the optimum exercises the
// degenerate pivots Bland's rule is there for.
func TestLowerBoundDegenerate(t *testing.T) {
	var types []InstanceType
	for i := 1; i <= 30; i++ {
		types = append(types, simpleType("t", resource.NewQuantity(int64(i), resource.DecimalSI).String(),
			resource.NewQuantity(int64(i)<<30, resource.BinarySI).String(), float64(i)))
		types = append(types, simpleType("u", resource.NewQuantity(int64(2*i), resource.DecimalSI).String(),
			resource.NewQuantity(int64(i)<<30, resource.BinarySI).String(), float64(i)*1.5))
	}
	b, err := LowerBound(Demand{"cpu": 100, "memory": 100 << 30}, types)
	require.NoError(t, err)
	assert.InDelta(t, 100, b.LP, 1e-6)
	assert.False(t, math.IsNaN(b.LP))
}

// On random catalogues the LP must sit between the per-resource bound and
// the cost of the best fractional single-type plan, both of which are
// feasible points of its dual and primal.
func TestLowerBoundRandomSandwich(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := range 200 {
		var types []InstanceType
		for range 1 + rng.Intn(20) {
			it := simpleType("r", resource.NewMilliQuantity(int64(1+rng.Intn(64000)), resource.DecimalSI).String(),
				resource.NewQuantity(int64(1+rng.Intn(256))<<30, resource.BinarySI).String(), 0.01+rng.Float64()*10)
			it.Capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(1+rng.Intn(200)), resource.DecimalSI)
			types = append(types, it)
		}
		d := Demand{"cpu": 1 + rng.Float64()*1000, "memory": float64(1+rng.Intn(5000)) * (1 << 30), "pods": float64(1 + rng.Intn(3000))}
		b, err := LowerBound(d, types)
		require.NoError(t, err, "trial %d", trial)
		single := math.Inf(1)
		for _, it := range types {
			p, _ := it.CheapestPrice()
			alloc := it.Allocatable()
			n := 0.0
			for name, v := range d {
				q := alloc[name]
				n = math.Max(n, v/q.AsApproximateFloat64())
			}
			single = math.Min(single, p*n)
		}
		assert.GreaterOrEqual(t, b.LP, b.PerResource, "trial %d", trial)
		assert.LessOrEqual(t, b.LP, single*(1+1e-9), "trial %d", trial)
	}
}

// With two resources an optimal basic solution uses one type, or two types
// with both constraints tight; enumerating those gives the exact LP optimum.
func TestLowerBoundMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := range 300 {
		var types []InstanceType
		var a [][2]float64
		var price []float64
		d := Demand{"cpu": 1 + float64(rng.Intn(500)), "memory": float64(1+rng.Intn(500)) * (1 << 30)}
		for range 1 + rng.Intn(12) {
			cpu, mem, p := 1+rng.Intn(64), 1+rng.Intn(64), 0.1+rng.Float64()*5
			types = append(types, simpleType("r", resource.NewQuantity(int64(cpu), resource.DecimalSI).String(),
				resource.NewQuantity(int64(mem)<<30, resource.BinarySI).String(), p))
			a = append(a, [2]float64{float64(cpu) / d["cpu"], float64(mem) * (1 << 30) / d["memory"]})
			price = append(price, p)
		}
		best := math.Inf(1)
		for i := range a {
			best = math.Min(best, price[i]*math.Max(1/a[i][0], 1/a[i][1]))
			for j := range a {
				det := a[i][0]*a[j][1] - a[j][0]*a[i][1]
				if i == j || math.Abs(det) < 1e-12 {
					continue
				}
				xi, xj := (a[j][1]-a[j][0])/det, (a[i][0]-a[i][1])/det
				if xi >= 0 && xj >= 0 {
					best = math.Min(best, price[i]*xi+price[j]*xj)
				}
			}
		}
		b, err := LowerBound(d, types)
		require.NoError(t, err)
		assert.InDelta(t, best, b.LP, best*1e-9, "trial %d", trial)
	}
}
