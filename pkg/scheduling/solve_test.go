package scheduling

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func solveOK(t *testing.T, in *Input) *Result {
	t.Helper()
	res := Solve(in)
	require.NoError(t, checkInvariants(in, res))
	return res
}

func typeNames(nc *NewNodeClaim) []string {
	var out []string
	for _, it := range nc.InstanceTypes {
		out = append(out, it.Name)
	}
	return out
}

func TestResources(t *testing.T) {
	initPod := mkPod("init", "1", "1Gi", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("3")}}}}
	})
	always := corev1.ContainerRestartPolicyAlways
	sidecarPod := mkPod("sidecar", "1", "1Gi", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2")}}}}
	})
	overheadPod := mkPod("overhead", "1", "1Gi", func(p *corev1.Pod) {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	})
	limitsOnly := mkPod("limits", "", "", func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	})
	cases := []struct {
		name     string
		pods     []*corev1.Pod
		claims   int
		cheapest string // cheapest type of claim 0
		unplaced int
		why      string
	}{
		{"one small pod", []*corev1.Pod{mkPod("a", "500m", "1Gi")}, 1, "m.1x", 0, ""},
		{"pod just over a size", []*corev1.Pod{mkPod("a", "1", "1Gi")}, 1, "m.2x", 0, ""},
		{"memory decides", []*corev1.Pod{mkPod("a", "100m", "10Gi")}, 1, "m.4x", 0, ""},
		{"two pods share", []*corev1.Pod{mkPod("a", "1", "1Gi"), mkPod("b", "1", "1Gi")}, 1, "m.4x", 0, ""},
		{"too big for any type", []*corev1.Pod{mkPod("a", "100", "1Gi")}, 0, "", 1, "no instance type has room for requests cpu=100"},
		{"init container peak", []*corev1.Pod{initPod}, 1, "m.4x", 0, ""},
		{"sidecar adds to apps", []*corev1.Pod{sidecarPod}, 1, "m.4x", 0, ""},
		{"pod overhead counts", []*corev1.Pod{overheadPod}, 1, "m.4x", 0, ""},
		{"limits stand in for requests", []*corev1.Pod{limitsOnly}, 1, "m.4x", 0, ""},
		{"gpu needs a gpu type", []*corev1.Pod{mkPod("a", "1", "1Gi", withResource("nvidia.com/gpu", "1"))}, 1, "g.8x", 0, ""},
		{"two gpus do not fit one", []*corev1.Pod{mkPod("a", "1", "1Gi", withResource("nvidia.com/gpu", "2"))}, 0, "", 1, "nvidia.com/gpu=2"},
		{"pod count caps a node", podsN(120, "10m", "10Mi"), 2, "", 0, ""},
	}
	gpu := mkType("g.8x", 8, 32, 2.0, zones3, odOnly)
	gpu.Capacity["nvidia.com/gpu"] = resource.MustParse("1")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: tc.pods, NodePools: []*NodePool{mkPool("default", append(stdTypes(), gpu))}}
			res := solveOK(t, in)
			assert.Len(t, res.NewNodeClaims, tc.claims)
			assert.Len(t, res.Unscheduled(), tc.unplaced)
			if tc.cheapest != "" {
				assert.Equal(t, tc.cheapest, res.NewNodeClaims[0].InstanceTypes[0].Name)
			}
			if tc.why != "" {
				assert.Contains(t, res.Unscheduled()[0].Why(), tc.why)
			}
		})
	}
}

func podsN(n int, cpu, mem string, opts ...podOpt) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		out = append(out, mkPod(fmt.Sprintf("p%03d", i), cpu, mem, opts...))
	}
	return out
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(cpu string) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	side := func(cpu string) corev1.Container { x := c(cpu); x.RestartPolicy = &always; return x }
	cases := []struct {
		name  string
		apps  []corev1.Container
		inits []corev1.Container
		want  string
	}{
		{"apps only", []corev1.Container{c("1"), c("2")}, nil, "3"},
		{"init smaller", []corev1.Container{c("2")}, []corev1.Container{c("1")}, "2"},
		{"init larger", []corev1.Container{c("1")}, []corev1.Container{c("5")}, "5"},
		{"sidecar added", []corev1.Container{c("1")}, []corev1.Container{side("1")}, "2"},
		{"init after sidecar", []corev1.Container{c("1")}, []corev1.Container{side("1"), c("4")}, "5"},
		{"init before sidecar", []corev1.Container{c("1")}, []corev1.Container{c("4"), side("1")}, "4"},
		{"two sidecars", []corev1.Container{c("1")}, []corev1.Container{side("1"), side("1")}, "3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: tc.apps, InitContainers: tc.inits}}
			got := PodRequests(p)[corev1.ResourceCPU]
			want := resource.MustParse(tc.want)
			assert.Equal(t, want.MilliValue(), got.MilliValue())
		})
	}
}

func TestRequirementsAndLabels(t *testing.T) {
	armPool := poolReqs(NewRequirement(LabelArch, OpIn, "amd64"))
	teamType := func() []*InstanceType { return stdTypes() }
	cases := []struct {
		name   string
		pod    *corev1.Pod
		pool   []func(*NodePool)
		placed bool
		why    string
		check  func(t *testing.T, nc *NewNodeClaim)
	}{
		{"arch mismatch explains", mkPod("a", "1", "1Gi", withNodeSelector(LabelArch, "arm64")), []func(*NodePool){armPool}, false,
			"nodepool default: kubernetes.io/arch In [arm64] not in NodePool's [amd64]", nil},
		{"arch matches", mkPod("a", "1", "1Gi", withNodeSelector(LabelArch, "amd64")), []func(*NodePool){armPool}, true, "", nil},
		{"beta arch alias", mkPod("a", "1", "1Gi", withNodeSelector("beta.kubernetes.io/arch", "amd64")), []func(*NodePool){armPool}, true, "", nil},
		{"arch no type offers it", mkPod("a", "1", "1Gi", withNodeSelector(LabelArch, "arm64")), nil, false, "no instance type matches", nil},
		{"zone selector narrows claim", mkPod("a", "1", "1Gi", withNodeSelector(LabelZone, "zone-b")), nil, true, "", func(t *testing.T, nc *NewNodeClaim) {
			assert.Equal(t, []string{"zone-b"}, nc.Requirements.Get(LabelZone).Values())
		}},
		{"beta zone alias", mkPod("a", "1", "1Gi", withNodeSelector("failure-domain.beta.kubernetes.io/zone", "zone-c")), nil, true, "", func(t *testing.T, nc *NewNodeClaim) {
			assert.Equal(t, []string{"zone-c"}, nc.Requirements.Get(LabelZone).Values())
		}},
		{"unknown zone", mkPod("a", "1", "1Gi", withNodeSelector(LabelZone, "zone-z")), nil, false, "no instance type matches", nil},
		{"undefined custom label", mkPod("a", "1", "1Gi", withNodeSelector("example.com/team", "a")), nil, false, `label "example.com/team" does not have known values`, nil},
		{"custom label from pool Exists gets pod value", mkPod("a", "1", "1Gi", withNodeSelector("example.com/team", "blue")),
			[]func(*NodePool){poolReqs(NewRequirement("example.com/team", OpExists))}, true, "", func(t *testing.T, nc *NewNodeClaim) {
				assert.Equal(t, "blue", nc.Labels["example.com/team"])
			}},
		{"custom Exists label generated", mkPod("a", "1", "1Gi"),
			[]func(*NodePool){poolReqs(NewRequirement("example.com/team", OpExists))}, true, "", func(t *testing.T, nc *NewNodeClaim) {
				assert.Len(t, nc.Labels["example.com/team"], 10)
			}},
		{"pool label becomes claim label", mkPod("a", "1", "1Gi", withNodeSelector("team", "x")),
			[]func(*NodePool){func(np *NodePool) { np.Labels = map[string]string{"team": "x"} }}, true, "", func(t *testing.T, nc *NewNodeClaim) {
				assert.Equal(t, "x", nc.Labels["team"])
				assert.Equal(t, "default", nc.Labels[LabelNodePool])
			}},
		{"pool label conflicts", mkPod("a", "1", "1Gi", withNodeSelector("team", "y")),
			[]func(*NodePool){func(np *NodePool) { np.Labels = map[string]string{"team": "x"} }}, false, "team In [y] not in NodePool's [x]", nil},
		{"notin instance type skips cheapest", mkPod("a", "500m", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelInstanceType, corev1.NodeSelectorOpNotIn, "m.1x")})),
			nil, true, "", func(t *testing.T, nc *NewNodeClaim) { assert.Equal(t, "m.2x", nc.InstanceTypes[0].Name) }},
		{"Gt on custom integer label", mkPod("a", "500m", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{nsr("example.com/cpus", corev1.NodeSelectorOpGt, "8")})),
			nil, true, "", func(t *testing.T, nc *NewNodeClaim) {
				assert.Equal(t, "m.16x", nc.InstanceTypes[0].Name)
				assert.NotContains(t, nc.Labels, "example.com/cpus", "instance-type labels come from the instance")
			}},
		{"nodepool DoesNotExist label", mkPod("a", "1", "1Gi", withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelNodePool, corev1.NodeSelectorOpIn, "other")})),
			nil, false, "karpenter.sh/nodepool In [other] not in NodePool's [default]", nil},
		{"required OR term falls through", mkPod("a", "1", "1Gi", withRequiredTerms(
			[]corev1.NodeSelectorRequirement{nsr(LabelArch, corev1.NodeSelectorOpIn, "arm64")},
			[]corev1.NodeSelectorRequirement{nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-a")})), nil, true, "", func(t *testing.T, nc *NewNodeClaim) {
			assert.Equal(t, []string{"zone-a"}, nc.Requirements.Get(LabelZone).Values())
		}},
		{"matchFields unsupported", mkPod("a", "1", "1Gi", func(p *corev1.Pod) {
			affinity(p).NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{nsr("metadata.name", corev1.NodeSelectorOpIn, "n")}}}}}
		}), nil, false, "matchFields", nil},
		{"hostname selector cannot be a new node", mkPod("a", "1", "1Gi", withNodeSelector(LabelHostname, "n1")), nil, false, "kubernetes.io/hostname", nil},
		{"capacity type on-demand", mkPod("a", "1", "1Gi", withNodeSelector(LabelCapacityType, CapacityTypeOnDemand)), nil, true, "", func(t *testing.T, nc *NewNodeClaim) {
			assert.Equal(t, []string{CapacityTypeOnDemand}, nc.Requirements.Get(LabelCapacityType).Values())
			assert.InDelta(t, 0.1, nc.Price, 1e-9)
		}},
		{"spot preferred by price", mkPod("a", "1", "1Gi"), nil, true, "", func(t *testing.T, nc *NewNodeClaim) {
			assert.InDelta(t, 0.07, nc.Price, 1e-9)
			assert.Equal(t, []string{CapacityTypeOnDemand, CapacityTypeSpot}, nc.Requirements.Get(LabelCapacityType).Values())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			types := teamType()
			for _, it := range types {
				it.Requirements.Add(NewRequirement("example.com/cpus", OpIn, fmt.Sprint(it.Capacity.Cpu().Value())))
			}
			in := &Input{Pods: []*corev1.Pod{tc.pod}, NodePools: []*NodePool{mkPool("default", types, tc.pool...)}}
			res := solveOK(t, in)
			p := res.Placements[0]
			assert.Equal(t, tc.placed, p.Scheduled(), p.Why())
			if tc.why != "" {
				assert.Contains(t, p.Why(), tc.why)
			}
			if tc.check != nil && p.NodeClaim >= 0 {
				tc.check(t, res.NewNodeClaims[p.NodeClaim])
			}
		})
	}
}

func TestTaintsAndPools(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		pools []*NodePool
		pool  string // expected pool, "" = unplaced
		why   string
	}{
		{"taint blocks", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("gpu", stdTypes(), poolTaints(gpuTaint))}, "", "nodepool gpu: did not tolerate taint gpu=true:NoSchedule"},
		{"toleration passes", mkPod("a", "1", "1Gi", withToleration("gpu", "true", corev1.TaintEffectNoSchedule)), []*NodePool{mkPool("gpu", stdTypes(), poolTaints(gpuTaint))}, "gpu", ""},
		{"exists toleration passes", mkPod("a", "1", "1Gi", withToleration("gpu", "", "")), []*NodePool{mkPool("gpu", stdTypes(), poolTaints(gpuTaint))}, "gpu", ""},
		{"wrong value blocks", mkPod("a", "1", "1Gi", withToleration("gpu", "false", corev1.TaintEffectNoSchedule)), []*NodePool{mkPool("gpu", stdTypes(), poolTaints(gpuTaint))}, "", "did not tolerate"},
		{"startup taints ignored", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("p", stdTypes(), func(np *NodePool) { np.StartupTaints = []corev1.Taint{gpuTaint} })}, "p", ""},
		{"PreferNoSchedule relaxed last", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("soft", stdTypes(), poolTaints(soft))}, "soft", ""},
		{"weight wins", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("low", stdTypes(), poolWeight(1)), mkPool("high", stdTypes(), poolWeight(50))}, "high", ""},
		{"name breaks weight tie", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("b", stdTypes()), mkPool("a", stdTypes())}, "a", ""},
		{"falls back to lower weight", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("low", stdTypes(), poolWeight(1)), mkPool("high", stdTypes(), poolWeight(50), poolTaints(gpuTaint))}, "low", ""},
		{"limit on cpu", mkPod("a", "3", "1Gi"), []*NodePool{mkPool("p", stdTypes(), poolRemaining("cpu", "2"))}, "", "exceed the nodepool's limits"},
		{"limit allows small type", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("p", stdTypes(), poolRemaining("cpu", "2"))}, "p", ""},
		{"nodes limit", mkPod("a", "1", "1Gi"), []*NodePool{mkPool("p", stdTypes(), poolRemaining("nodes", "0"))}, "", "limit on nodes"},
		{"no pools", mkPod("a", "1", "1Gi"), nil, "", "no NodePools"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: []*corev1.Pod{tc.pod}, NodePools: tc.pools}
			res := solveOK(t, in)
			p := res.Placements[0]
			if tc.pool == "" {
				require.False(t, p.Scheduled())
				assert.Contains(t, p.Why(), tc.why)
				return
			}
			require.True(t, p.Scheduled(), p.Why())
			assert.Equal(t, tc.pool, res.NewNodeClaims[p.NodeClaim].NodePool)
		})
	}
}

func TestPreferNoScheduleRecordsRelaxation(t *testing.T) {
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	in := &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi")}, NodePools: []*NodePool{mkPool("soft", stdTypes(), poolTaints(soft))}}
	res := solveOK(t, in)
	assert.Equal(t, []string{"PreferNoSchedule taints"}, res.Placements[0].Relaxed)
}

func TestLimitsSpanClaims(t *testing.T) {
	// Each claim is charged the capacity of its largest option against the
	// limit (it could still launch that): with 10 cpu left, a claim whose
	// options are 4x and 8x takes 8, and the next pod cannot get a claim.
	pods := podsN(4, "3500m", "1Gi", withLabels("app", "x"), withAntiAffinity(term(LabelHostname, map[string]string{"app": "x"})))
	in := &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", stdTypes(), poolRemaining("cpu", "10"))}}
	res := solveOK(t, in)
	require.Len(t, res.NewNodeClaims, 1)
	assert.Equal(t, []string{"m.4x", "m.8x"}, typeNames(res.NewNodeClaims[0]))
	assert.Len(t, res.Unscheduled(), 3)
}

func TestExistingNodes(t *testing.T) {
	pool := func() []*NodePool { return []*NodePool{mkPool("default", stdTypes())} }
	cases := []struct {
		name  string
		nodes []*ExistingNode
		pod   *corev1.Pod
		want  string
	}{
		{"fits existing", []*ExistingNode{mkNode("n1", "4", "16Gi", nil)}, mkPod("a", "1", "1Gi"), "node:n1"},
		{"existing full", []*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("x", "3500m", "1Gi"))}, mkPod("a", "1", "1Gi"), "claim:0"},
		{"initialized first", []*ExistingNode{func() *ExistingNode { n := mkNode("a-uninit", "4", "16Gi", nil); n.Initialized = false; return n }(), mkNode("z-ready", "4", "16Gi", nil)}, mkPod("a", "1", "1Gi"), "node:z-ready"},
		{"by name", []*ExistingNode{mkNode("n2", "4", "16Gi", nil), mkNode("n1", "4", "16Gi", nil)}, mkPod("a", "1", "1Gi"), "node:n1"},
		{"node taint", []*ExistingNode{func() *ExistingNode {
			n := mkNode("n1", "4", "16Gi", nil)
			n.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			return n
		}()}, mkPod("a", "1", "1Gi"), "claim:0"},
		{"ephemeral taint on starting managed node", []*ExistingNode{func() *ExistingNode {
			n := mkNode("n1", "4", "16Gi", nil)
			n.Initialized, n.Managed = false, true
			n.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
			return n
		}()}, mkPod("a", "1", "1Gi"), "node:n1"},
		{"ephemeral taint on unmanaged node", []*ExistingNode{func() *ExistingNode {
			n := mkNode("n1", "4", "16Gi", nil)
			n.Initialized = false
			n.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
			return n
		}()}, mkPod("a", "1", "1Gi"), "claim:0"},
		{"node selector on label", []*ExistingNode{mkNode("n1", "4", "16Gi", map[string]string{"team": "a"})}, mkPod("a", "1", "1Gi", withNodeSelector("team", "a")), "node:n1"},
		{"node selector mismatch", []*ExistingNode{mkNode("n1", "4", "16Gi", map[string]string{"team": "a"})}, mkPod("a", "1", "1Gi", withNodeSelector(LabelZone, "zone-a")), "claim:0"},
		{"hostname selector", []*ExistingNode{mkNode("n1", "4", "16Gi", nil), mkNode("n2", "4", "16Gi", nil)}, mkPod("a", "1", "1Gi", withNodeSelector(LabelHostname, "n2")), "node:n2"},
		{"host port taken", []*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("x", "100m", "", withHostPort(80)))}, mkPod("a", "1", "1Gi", withHostPort(80)), "claim:0"},
		{"other host port free", []*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("x", "100m", "", withHostPort(80)))}, mkPod("a", "1", "1Gi", withHostPort(81)), "node:n1"},
		{"finished pods free room", []*ExistingNode{mkNode("n1", "4", "16Gi", nil, func() *corev1.Pod {
			p := mkPod("x", "3500m", "1Gi")
			p.Status.Phase = corev1.PodSucceeded
			return p
		}())}, mkPod("a", "1", "1Gi"), "node:n1"},
		{"in-flight claim by requirements", []*ExistingNode{{Name: "nc-1", Initialized: false, Managed: true,
			Requirements: NewRequirements(NewRequirement(LabelZone, OpIn, "zone-a"), NewRequirement(LabelNodePool, OpIn, "default")),
			Allocatable:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}},
			mkPod("a", "1", "1Gi", withNodeSelector(LabelArch, "amd64")), "node:nc-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: []*corev1.Pod{tc.pod}, Nodes: tc.nodes, NodePools: pool()}
			res := solveOK(t, in)
			assert.Equal(t, tc.want, where(res)[tc.pod.Name], res.Placements[0].Why())
		})
	}
}

func TestExistingNodeReasonShown(t *testing.T) {
	n := mkNode("n1", "1", "1Gi", nil)
	in := &Input{Pods: []*corev1.Pod{mkPod("a", "2", "1Gi")}, Nodes: []*ExistingNode{n}}
	res := solveOK(t, in)
	assert.Equal(t, "existing nodes: none of 1 fit (first: n1: not enough cpu)", res.Placements[0].Why())
}

func TestHostPorts(t *testing.T) {
	pods := podsN(3, "100m", "100Mi", withHostPort(8080))
	res := solveOK(t, &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", stdTypes())}})
	assert.Len(t, res.NewNodeClaims, 3)
	a := hostPort{ip: "10.0.0.1", port: 80, proto: corev1.ProtocolTCP}
	assert.True(t, a.conflicts(hostPort{ip: "", port: 80, proto: corev1.ProtocolTCP}))
	assert.True(t, a.conflicts(hostPort{ip: "0.0.0.0", port: 80, proto: corev1.ProtocolTCP}))
	assert.False(t, a.conflicts(hostPort{ip: "10.0.0.2", port: 80, proto: corev1.ProtocolTCP}))
	assert.False(t, a.conflicts(hostPort{ip: "10.0.0.1", port: 80, proto: corev1.ProtocolUDP}))
}

func TestOfferings(t *testing.T) {
	t.Run("unavailable offering excluded", func(t *testing.T) {
		in := &Input{Pods: []*corev1.Pod{mkPod("a", "500m", "1Gi", withNodeSelector(LabelZone, "zone-a", LabelCapacityType, CapacityTypeSpot))},
			NodePools:   []*NodePool{mkPool("p", stdTypes())},
			Unavailable: []OfferingKey{{"m.1x", "zone-a", CapacityTypeSpot}}}
		res := solveOK(t, in)
		assert.Equal(t, "m.2x", res.NewNodeClaims[0].InstanceTypes[0].Name)
	})
	t.Run("provider-unavailable offering excluded", func(t *testing.T) {
		types := stdTypes()
		for i := range types[0].Offerings {
			types[0].Offerings[i].Available = false
		}
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "500m", "1Gi")}, NodePools: []*NodePool{mkPool("p", types)}})
		assert.Equal(t, "m.2x", res.NewNodeClaims[0].InstanceTypes[0].Name)
	})
	t.Run("reservation used once", func(t *testing.T) {
		types := stdTypes()
		types[0].Offerings = append(types[0].Offerings, Offering{Zone: "zone-a", CapacityType: CapacityTypeReserved, Price: 0.001, Available: true,
			ReservationID: "cr-1", ReservationCapacity: 1})
		types[0].Requirements[LabelCapacityType] = NewRequirement(LabelCapacityType, OpIn, CapacityTypeSpot, CapacityTypeOnDemand, CapacityTypeReserved)
		pods := podsN(2, "500m", "1Gi", withLabels("app", "r"), withAntiAffinity(term(LabelHostname, map[string]string{"app": "r"})))
		res := solveOK(t, &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", types)}})
		require.Len(t, res.NewNodeClaims, 2)
		reserved := 0
		for _, nc := range res.NewNodeClaims {
			if len(nc.ReservationIDs) > 0 {
				reserved++
				assert.Equal(t, []string{CapacityTypeReserved}, nc.Requirements.Get(LabelCapacityType).Values())
				assert.Equal(t, []string{"cr-1"}, nc.Requirements.Get(LabelReservationID).Values())
				assert.InDelta(t, 0.001, nc.Price, 1e-9)
			} else {
				assert.InDelta(t, 0.035, nc.Price, 1e-9)
			}
		}
		assert.Equal(t, 1, reserved)
	})
	t.Run("instance types sorted by price and capped", func(t *testing.T) {
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "500m", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes())},
			Options: Options{MaxInstanceTypes: 3}})
		assert.Equal(t, []string{"m.1x", "m.2x", "m.4x"}, typeNames(res.NewNodeClaims[0]))
		assert.Equal(t, []string{"m.1x", "m.2x", "m.4x"}, res.NewNodeClaims[0].Requirements.Get(LabelInstanceType).Values())
	})
}

func TestMinValues(t *testing.T) {
	mv := func(n int) func(*NodePool) {
		return func(np *NodePool) {
			r := NewRequirement(LabelInstanceType, OpExists)
			r.MinValues = n
			np.Requirements = NewRequirements(r)
		}
	}
	t.Run("strict met", func(t *testing.T) {
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "20", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes(), mv(2))}})
		require.Len(t, res.NewNodeClaims, 1)
		assert.Equal(t, []string{"m.32x", "m.64x"}, typeNames(res.NewNodeClaims[0]))
	})
	t.Run("strict unmet", func(t *testing.T) {
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "40", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes(), mv(2))}})
		require.Len(t, res.Unscheduled(), 1)
		assert.Contains(t, res.Unscheduled()[0].Why(), "minValues 2 of node.kubernetes.io/instance-type not met")
	})
	t.Run("best effort relaxes", func(t *testing.T) {
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "40", "1Gi")}, NodePools: []*NodePool{mkPool("p", stdTypes(), mv(2))},
			Options: Options{MinValuesPolicy: MinValuesBestEffort}})
		require.Len(t, res.NewNodeClaims, 1)
		assert.True(t, res.NewNodeClaims[0].MinValuesRelaxed)
	})
	t.Run("second pod would break it", func(t *testing.T) {
		pods := []*corev1.Pod{mkPod("a", "20", "1Gi"), mkPod("b", "20", "1Gi")}
		res := solveOK(t, &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", stdTypes(), mv(2))}})
		assert.Len(t, res.NewNodeClaims, 2, "sharing would leave only m.64x")
	})
}

func TestDaemonSetOverhead(t *testing.T) {
	ds := func(cpu string, mods ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "kube-system"}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "d", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
		for _, m := range mods {
			m(d)
		}
		return d
	}
	taint := corev1.Taint{Key: "t", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name     string
		ds       *appsv1.DaemonSet
		pool     []func(*NodePool)
		pod      *corev1.Pod
		cheapest string
	}{
		{"no daemonset", nil, nil, mkPod("a", "800m", "1Gi"), "m.1x"},
		{"daemonset pushes up", ds("500m"), nil, mkPod("a", "800m", "1Gi"), "m.2x"},
		{"daemonset not tolerating pool taint ignored", ds("500m"), []func(*NodePool){poolTaints(taint)}, mkPod("a", "800m", "1Gi", withToleration("t", "", "")), "m.1x"},
		{"daemonset tolerating pool taint counted", ds("500m", func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), []func(*NodePool){poolTaints(taint)}, mkPod("a", "800m", "1Gi", withToleration("t", "", "")), "m.2x"},
		{"daemonset for other arch ignored", ds("500m", func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{LabelArch: "arm64"}
		}), nil, mkPod("a", "800m", "1Gi"), "m.1x"},
		{"daemonset for larger types only", ds("500m", func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.NodeSelector = map[string]string{LabelInstanceType: "m.2x"}
		}), nil, mkPod("a", "800m", "1Gi"), "m.1x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: []*corev1.Pod{tc.pod}, NodePools: []*NodePool{mkPool("p", stdTypes(), tc.pool...)}}
			if tc.ds != nil {
				in.DaemonSets = []*appsv1.DaemonSet{tc.ds}
			}
			res := solveOK(t, in)
			require.Len(t, res.NewNodeClaims, 1, res.Placements[0].Why())
			assert.Equal(t, tc.cheapest, res.NewNodeClaims[0].InstanceTypes[0].Name)
		})
	}
}

func TestDeterminism(t *testing.T) {
	mk := func() []*corev1.Pod {
		var pods []*corev1.Pod
		r := rand.New(rand.NewSource(7))
		for i := 0; i < 200; i++ {
			opts := []podOpt{withLabels("app", fmt.Sprint(i%5))}
			switch i % 4 {
			case 1:
				opts = append(opts, withSpread(LabelZone, 1, corev1.DoNotSchedule, map[string]string{"app": fmt.Sprint(i % 5)}))
			case 2:
				opts = append(opts, withAntiAffinity(term(LabelHostname, map[string]string{"app": fmt.Sprint(i % 5)})))
			}
			pods = append(pods, mkPod(fmt.Sprintf("p%03d", i), fmt.Sprintf("%dm", 100+r.Intn(2000)), fmt.Sprintf("%dMi", 100+r.Intn(4000)), opts...))
		}
		return pods
	}
	pods := mk()
	a := solveOK(t, &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", stdTypes())}})
	b := solveOK(t, &Input{Pods: mk(), NodePools: []*NodePool{mkPool("p", stdTypes())}})
	assert.True(t, reflect.DeepEqual(where(a), where(b)))
	// Reversing the input order gives the same NodeClaims.
	rev := mk()
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	c := solveOK(t, &Input{Pods: rev, NodePools: []*NodePool{mkPool("p", stdTypes())}})
	assert.Equal(t, where(a), where(c))
	assert.InDelta(t, a.Cost(), c.Cost(), 1e-9)
}

func TestPoolFallbacks(t *testing.T) {
	t.Run("limits exhausted moves to the next pool", func(t *testing.T) {
		pods := podsN(3, "3", "1Gi", withLabels("app", "x"), withAntiAffinity(term(LabelHostname, map[string]string{"app": "x"})))
		in := &Input{Pods: pods, NodePools: []*NodePool{
			mkPool("first", stdTypes(), poolWeight(10), poolRemaining("nodes", "1")),
			mkPool("second", stdTypes()),
		}}
		res := solveOK(t, in)
		require.Len(t, res.NewNodeClaims, 3)
		pools := map[string]int{}
		for _, nc := range res.NewNodeClaims {
			pools[nc.NodePool]++
		}
		assert.Equal(t, map[string]int{"first": 1, "second": 2}, pools)
	})
	t.Run("every offering unavailable", func(t *testing.T) {
		types := stdTypes()[:1]
		var ice []OfferingKey
		for _, o := range types[0].Offerings {
			ice = append(ice, OfferingKey{types[0].Name, o.Zone, o.CapacityType})
		}
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "100m", "")}, NodePools: []*NodePool{mkPool("p", types)}, Unavailable: ice})
		assert.Equal(t, "nodepool p: no instance type with an available offering", res.Placements[0].Why())
	})
	t.Run("zone offering unavailable steers the zone", func(t *testing.T) {
		types := stdTypes()[:1]
		ice := []OfferingKey{{types[0].Name, "zone-a", CapacityTypeSpot}, {types[0].Name, "zone-a", CapacityTypeOnDemand}}
		res := solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "100m", "", withNodeSelector(LabelZone, "zone-a"))}, NodePools: []*NodePool{mkPool("p", types)}, Unavailable: ice})
		assert.Contains(t, res.Placements[0].Why(), "no instance type matches [topology.kubernetes.io/zone In [zone-a]]")
	})
}

// TestSolveNominations checks that pods an earlier round planned onto a node
// go back there first, so that a later round does not repack exactly-sized
// in-flight capacity and run out of room.
func TestSolveNominations(t *testing.T) {
	nodes := func() []*ExistingNode {
		return []*ExistingNode{mkNode("a", "6", "64Gi", nil), mkNode("b", "4", "64Gi", nil)}
	}
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{mkPod("p1", "4", "1Gi"), mkPod("p2", "3", "1Gi"), mkPod("p3", "3", "1Gi")}
	}
	tainted := func() []*ExistingNode {
		ns := nodes()
		ns[1].Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		return ns
	}
	tests := []struct {
		name        string
		nodes       []*ExistingNode
		nominations map[types.UID]string
		want        map[string]string
	}{
		{"without nominations first fit strands p3", nodes(), nil,
			map[string]string{"p1": "node:a", "p2": "node:b", "p3": "claim:0"}},
		{"nominations restore the earlier plan", nodes(),
			map[types.UID]string{"uid-p1": "b", "uid-p2": "a", "uid-p3": "a"},
			map[string]string{"p1": "node:b", "p2": "node:a", "p3": "node:a"}},
		{"a nomination that no longer fits falls back", tainted(),
			map[types.UID]string{"uid-p1": "b", "uid-p2": "a", "uid-p3": "a"},
			map[string]string{"p1": "claim:0", "p2": "node:a", "p3": "node:a"}},
		{"a nomination to an unknown node is ignored", nodes(),
			map[types.UID]string{"uid-p1": "gone"},
			map[string]string{"p1": "node:a", "p2": "node:b", "p3": "claim:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Solve(&Input{Pods: pods(), Nodes: tt.nodes, Nominations: tt.nominations,
				NodePools: []*NodePool{mkPool("default", stdTypes())}})
			assert.Equal(t, tt.want, where(res))
		})
	}
}

// TestWellKnownLabelsComeFromTheInput checks that the solver's idea of which
// labels the provider decides comes from the Input alone: the same pods and
// in-flight NodeClaim give a different answer only when the Input declares
// the provider's key, and one solve does not leak into the next.
func TestWellKnownLabelsComeFromTheInput(t *testing.T) {
	const family = "example.com/instance-family"
	inFlight := func() *ExistingNode {
		return &ExistingNode{Name: "nc-1", Managed: true,
			Requirements: NewRequirements(NewRequirement(LabelNodePool, OpIn, "p")),
			Allocatable:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
	}
	solve := func(wellKnown []string) *Result {
		types := stdTypes()
		for _, it := range types {
			it.Requirements.Add(NewRequirement(family, OpIn, "m"))
		}
		return solveOK(t, &Input{Pods: []*corev1.Pod{mkPod("a", "1", "1Gi", withNodeSelector(family, "m"))},
			Nodes: []*ExistingNode{inFlight()}, NodePools: []*NodePool{mkPool("p", types)}, WellKnownLabels: wellKnown})
	}
	// Not declared: the in-flight NodeClaim does not define the key, so the
	// pod cannot count on it and gets a NodeClaim of its own.
	res := solve(nil)
	require.Equal(t, "claim:0", where(res)["a"])
	// Declared: the instance type of the in-flight NodeClaim decides it.
	res = solve([]string{family})
	assert.Equal(t, "node:nc-1", where(res)["a"])
	// And the declaration did not stick.
	res = solve(nil)
	assert.Equal(t, "claim:0", where(res)["a"])
	assert.NotContains(t, DefaultWellKnownLabels(), family)
}
