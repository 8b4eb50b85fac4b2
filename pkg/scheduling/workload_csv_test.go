package scheduling

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The upstream benchmark catalogue (see shared/bench/scheduling-workload.md),
// rebuilt here so that the solver can be checked against the recorded
// streams without depending on the benchmark package.
func benchCatalogue() []*InstanceType {
	var out []*InstanceType
	for k := 1; k <= 400; k++ {
		price := 0.1*float64(k) + 0.1*float64(int64(2*k)<<30)/1e9
		it := &InstanceType{
			Name: fmt.Sprintf("fake-it-%d", k-1),
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(k), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(int64(2*k)<<30, resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(int64(10*k), resource.DecimalSI),
			},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")},
		}
		size := "small"
		special := NewRequirement("special", OpDoesNotExist)
		if k >= 5 {
			size = "large"
			special = NewRequirement("special", OpIn, "optional")
		}
		it.Requirements = NewRequirements(
			NewRequirement(LabelInstanceType, OpIn, it.Name),
			NewRequirement(LabelArch, OpIn, "amd64"),
			NewRequirement(LabelOS, OpIn, "darwin", "linux", "windows"),
			NewRequirement(LabelZone, OpIn, "test-zone-1", "test-zone-2", "test-zone-3"),
			NewRequirement(LabelCapacityType, OpIn, "spot", "on-demand"),
			NewRequirement("integer", OpIn, strconv.Itoa(k)),
			NewRequirement("size", OpIn, size),
			special,
		)
		for _, o := range [][2]string{{"spot", "test-zone-1"}, {"spot", "test-zone-2"}, {"on-demand", "test-zone-1"}, {"on-demand", "test-zone-2"}, {"on-demand", "test-zone-3"}} {
			it.Offerings = append(it.Offerings, Offering{CapacityType: o[0], Zone: o[1], Price: price, Available: true})
		}
		out = append(out, it)
	}
	return out
}

// csvPods reads one workload stream.
func csvPods(t testing.TB, path string) []*corev1.Pod {
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("workload not available: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i, r := range rows[1:] {
		cpu, _ := strconv.Atoi(r[1])
		mem, _ := strconv.Atoi(r[2])
		p := mkPod(fmt.Sprintf("p-%05d", i), fmt.Sprintf("%dm", cpu), fmt.Sprintf("%dMi", mem), withLabels("testing/cluster", "unspecified"))
		zone, host := LabelZone, LabelHostname
		switch r[0] {
		case "generic":
			p.Labels["my-label"] = r[3]
		case "spread-zone", "spread-hostname":
			p.Labels["my-label"] = r[3]
			key := zone
			if r[0] == "spread-hostname" {
				key = host
			}
			withSpread(key, 1, corev1.DoNotSchedule, map[string]string{"my-label": r[4]})(p)
		case "affinity-zone":
			p.Labels["my-affininity"] = r[3]
			withPodAffinity(term(zone, map[string]string{"my-affininity": r[3]}))(p)
		case "anti-hostname":
			p.Labels["app"] = "nginx"
			withAntiAffinity(term(host, map[string]string{"app": "nginx"}))(p)
		case "preference":
			p.Labels["app"] = "nginx"
			withPreferredNode(1, nsr(zone, corev1.NodeSelectorOpIn, "test-zone-1"))(p)
			withPreferredAntiAffinity(10, term(zone, map[string]string{"app": "nginx"}))(p)
			withPreferredAntiAffinity(1, term(host, map[string]string{"app": "nginx"}))(p)
		}
		p.CreationTimestamp = metav1.Now()
		pods = append(pods, p)
	}
	return pods
}

// cpuTime is this process's user+system CPU time; on a shared machine it is
// a steadier measure than wall time (the solver is single-threaded, but the
// GC is not, so it slightly overstates the solver's own work).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestUpstreamWorkloads runs the recorded upstream streams when
// SCHED_WORKLOADS=1; it prints pods/s, NodeClaims and cost, and checks the
// invariants. It is opt-in because it takes CPU.
func TestUpstreamWorkloads(t *testing.T) {
	if os.Getenv("SCHED_WORKLOADS") == "" {
		t.Skip("set SCHED_WORKLOADS=1 to run")
	}
	dir := "/work/shared/bench/workloads"
	cases := []string{"Scheduling1", "Scheduling50", "Scheduling100", "Scheduling500", "Scheduling1000", "Scheduling2000", "Scheduling5000", "Scheduling10000", "Scheduling20000", "RespectPreferences", "IgnorePreferences"}
	if only := os.Getenv("SCHED_CASE"); only != "" {
		cases = []string{only}
	}
	cat := benchCatalogue()
	for _, name := range cases {
		pods := csvPods(t, filepath.Join(dir, name+".csv"))
		in := &Input{Pods: pods, NodePools: []*NodePool{mkPool("default", cat, poolRemaining("cpu", "10000000", "memory", "10000000Gi"))}}
		if name == "IgnorePreferences" {
			in.Options.PreferencePolicy = PreferencesIgnore
		}
		start, cpu0 := time.Now(), cpuTime()
		res := Solve(in)
		el, cpuEl := time.Since(start), cpuTime()-cpu0
		un := len(res.Unscheduled())
		sumK := 0.0
		for _, nc := range res.NewNodeClaims {
			sumK += nc.Price / 0.3147483648
		}
		t.Logf("%-20s pods=%6d wall=%8.1fms cpu=%8.1fms pods/s(cpu)=%8.0f claims=%5d cost=%9.2f Σk=%7.0f unscheduled=%d",
			name, len(pods), float64(el.Microseconds())/1000, float64(cpuEl.Microseconds())/1000, float64(len(pods))/cpuEl.Seconds(), len(res.NewNodeClaims), res.Cost(), sumK, un)
		if os.Getenv("SCHED_NOCHECK") != "" {
			continue
		}
		if err := checkInvariants(in, res); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
