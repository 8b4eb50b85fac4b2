package scheduling

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// zoneCounts returns how many of the pods selected by app=<app> landed per
// zone (claims pinned to one zone, or existing nodes).
func zoneCounts(t *testing.T, in *Input, res *Result, app string) map[string]int {
	t.Helper()
	nodes := map[string]*ExistingNode{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	out := map[string]int{}
	for _, p := range res.Placements {
		if p.Pod.Labels["app"] != app {
			continue
		}
		switch {
		case p.Node != "":
			out[nodes[p.Node].Labels[LabelZone]]++
		case p.NodeClaim >= 0:
			z := res.NewNodeClaims[p.NodeClaim].Requirements.Get(LabelZone)
			require.Equal(t, 1, z.Len(), "spread pods must land on zone-pinned claims")
			out[z.Values()[0]]++
		}
	}
	return out
}

func TestTopologySpread(t *testing.T) {
	spread := func(key string, skew int32, mods ...func(*corev1.TopologySpreadConstraint)) podOpt {
		return withSpread(key, skew, corev1.DoNotSchedule, map[string]string{"app": "web"}, mods...)
	}
	zoneNode := func(name, zone string, pods ...*corev1.Pod) *ExistingNode {
		return mkNode(name, "64", "256Gi", map[string]string{LabelZone: zone}, pods...)
	}
	web := func(name string) *corev1.Pod { return mkPod(name, "100m", "100Mi", withLabels("app", "web")) }
	cases := []struct {
		name     string
		pods     []*corev1.Pod
		nodes    []*ExistingNode
		pool     []func(*NodePool)
		zones    map[string]int
		claims   int
		unplaced int
	}{
		{"even over three zones", podsN(6, "100m", "100Mi", withLabels("app", "web"), spread(LabelZone, 1)), nil, nil,
			map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}, -1, 0},
		{"seven pods skew one", podsN(7, "100m", "100Mi", withLabels("app", "web"), spread(LabelZone, 1)), nil, nil,
			map[string]int{"zone-a": 3, "zone-b": 2, "zone-c": 2}, -1, 0},
		{"pool limited to two zones", podsN(4, "100m", "100Mi", withLabels("app", "web"), spread(LabelZone, 1)), nil,
			[]func(*NodePool){poolReqs(NewRequirement(LabelZone, OpIn, "zone-a", "zone-b"))},
			map[string]int{"zone-a": 2, "zone-b": 2}, -1, 0},
		{"existing pods counted", podsN(3, "100m", "100Mi", withLabels("app", "web"), spread(LabelZone, 1)),
			[]*ExistingNode{func() *ExistingNode {
				n := zoneNode("n1", "zone-a", web("old1"), web("old2"))
				n.Taints = []corev1.Taint{{Key: "full", Effect: corev1.TaintEffectNoSchedule}}
				return n
			}()}, nil, map[string]int{"zone-b": 2, "zone-c": 1}, -1, 0},
		{"hostname skew one means one per node", podsN(4, "100m", "100Mi", withLabels("app", "web"), spread(LabelHostname, 1)), nil, nil,
			nil, 4, 0},
		{"hostname skew two", podsN(4, "100m", "100Mi", withLabels("app", "web"), spread(LabelHostname, 2)), nil, nil,
			nil, 2, 0},
		{"non-matching selector does not spread", podsN(4, "100m", "100Mi", withLabels("app", "other"), spread(LabelHostname, 1)), nil, nil,
			nil, 1, 0},
		{"capacity type key", podsN(4, "100m", "100Mi", withLabels("app", "web"), spread(LabelCapacityType, 1)), nil, nil,
			nil, 2, 0},
		{"minDomains larger than domains forces zero minimum", podsN(6, "100m", "100Mi", withLabels("app", "web"),
			spread(LabelZone, 1, func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](5) })), nil, nil,
			map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}, -1, 3},
		{"node affinity policy honour limits domains", podsN(4, "100m", "100Mi", withLabels("app", "web"), spread(LabelZone, 1),
			withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-a", "zone-b")})), nil, nil,
			map[string]int{"zone-a": 2, "zone-b": 2}, -1, 0},
		{"node affinity policy ignore keeps all domains", podsN(4, "100m", "100Mi", withLabels("app", "web"),
			spread(LabelZone, 1, func(c *corev1.TopologySpreadConstraint) {
				c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
			}),
			withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-a", "zone-b")})), nil, nil,
			map[string]int{"zone-a": 1, "zone-b": 1}, -1, 2},
		{"schedule anyway relaxes", podsN(4, "100m", "100Mi", withLabels("app", "web"),
			withSpread(LabelZone, 1, corev1.ScheduleAnyway, map[string]string{"app": "web"}),
			withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-a")})), nil,
			[]func(*NodePool){}, nil, -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: tc.pods, Nodes: tc.nodes, NodePools: []*NodePool{mkPool("p", stdTypes(), tc.pool...)}}
			res := solveOK(t, in)
			assert.Len(t, res.Unscheduled(), tc.unplaced)
			if tc.zones != nil {
				assert.Equal(t, tc.zones, zoneCounts(t, in, res, "web"))
			}
			if tc.claims >= 0 {
				assert.Len(t, res.NewNodeClaims, tc.claims)
			}
		})
	}
}

func TestMatchLabelKeys(t *testing.T) {
	mk := func(name, rev string) *corev1.Pod {
		return mkPod(name, "100m", "100Mi", withLabels("app", "web", "rev", rev),
			withSpread(LabelHostname, 1, corev1.DoNotSchedule, map[string]string{"app": "web"}, func(c *corev1.TopologySpreadConstraint) {
				c.MatchLabelKeys = []string{"rev"}
			}))
	}
	// two revisions: each revision spreads on its own, so two nodes suffice
	res := solveOK(t, &Input{Pods: []*corev1.Pod{mk("a1", "1"), mk("a2", "1"), mk("b1", "2"), mk("b2", "2")}, NodePools: []*NodePool{mkPool("p", stdTypes())}})
	assert.Len(t, res.NewNodeClaims, 2)
}

func TestPodAffinity(t *testing.T) {
	cases := []struct {
		name     string
		pods     []*corev1.Pod
		nodes    []*ExistingNode
		check    func(t *testing.T, res *Result)
		unplaced int
	}{
		{"self affinity on zone shares a zone", podsN(6, "2", "1Gi", withLabels("app", "db"), withPodAffinity(term(LabelZone, map[string]string{"app": "db"}))), nil,
			func(t *testing.T, res *Result) {
				zones := map[string]bool{}
				for _, nc := range res.NewNodeClaims {
					zones[nc.Requirements.Get(LabelZone).Values()[0]] = true
				}
				assert.Len(t, zones, 1)
			}, 0},
		{"affinity to existing pod on hostname", []*corev1.Pod{mkPod("a", "1", "1Gi", withPodAffinity(term(LabelHostname, map[string]string{"app": "cache"})))},
			[]*ExistingNode{mkNode("n1", "4", "16Gi", nil), mkNode("n2", "4", "16Gi", nil, mkPod("c", "100m", "", withLabels("app", "cache")))},
			func(t *testing.T, res *Result) { assert.Equal(t, "n2", res.Placements[0].Node) }, 0},
		{"affinity to existing pod's zone", []*corev1.Pod{mkPod("a", "1", "1Gi", withPodAffinity(term(LabelZone, map[string]string{"app": "cache"})))},
			[]*ExistingNode{func() *ExistingNode {
				n := mkNode("n2", "1", "16Gi", map[string]string{LabelZone: "zone-b"}, mkPod("c", "100m", "", withLabels("app", "cache")))
				return n
			}()},
			func(t *testing.T, res *Result) {
				assert.Equal(t, []string{"zone-b"}, res.NewNodeClaims[0].Requirements.Get(LabelZone).Values())
			}, 0},
		{"affinity with no target fails", []*corev1.Pod{mkPod("a", "1", "1Gi", withPodAffinity(term(LabelZone, map[string]string{"app": "nothing"})))}, nil,
			func(t *testing.T, res *Result) {
				assert.Contains(t, res.Placements[0].Why(), "no matching pod is scheduled yet")
			}, 1},
		{"affinity follows a pending pod placed earlier", []*corev1.Pod{
			mkPod("b", "1", "1Gi", withPodAffinity(term(LabelHostname, map[string]string{"app": "lead"}))),
			mkPod("a", "100m", "1Gi", withLabels("app", "lead"))}, nil,
			func(t *testing.T, res *Result) {
				assert.Equal(t, where(res)["a"], where(res)["b"])
			}, 0},
		{"anti-affinity hostname one per node", podsN(5, "100m", "100Mi", withLabels("app", "x"), withAntiAffinity(term(LabelHostname, map[string]string{"app": "x"}))), nil,
			func(t *testing.T, res *Result) { assert.Len(t, res.NewNodeClaims, 5) }, 0},
		{"anti-affinity zone at most three", podsN(4, "100m", "100Mi", withLabels("app", "x"), withAntiAffinity(term(LabelZone, map[string]string{"app": "x"}))), nil,
			func(t *testing.T, res *Result) { assert.Len(t, res.NewNodeClaims, 3) }, 1},
		{"existing pod's anti-affinity repels", []*corev1.Pod{mkPod("a", "100m", "100Mi", withLabels("app", "x"))},
			[]*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("guard", "100m", "", withAntiAffinity(term(LabelHostname, map[string]string{"app": "x"}))))},
			func(t *testing.T, res *Result) { assert.Equal(t, "claim:0", where(res)["a"]) }, 0},
		{"existing pod's anti-affinity other namespace no effect", []*corev1.Pod{mkPod("a", "100m", "100Mi", withLabels("app", "x"), withNS("other"))},
			[]*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("guard", "100m", "", withAntiAffinity(term(LabelHostname, map[string]string{"app": "x"}))))},
			func(t *testing.T, res *Result) { assert.Equal(t, "node:n1", where(res)["a"]) }, 0},
		{"namespaces list widens anti-affinity", []*corev1.Pod{mkPod("a", "100m", "100Mi", withLabels("app", "x"), withNS("other"))},
			[]*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("guard", "100m", "", withAntiAffinity(func() corev1.PodAffinityTerm {
				tm := term(LabelHostname, map[string]string{"app": "x"})
				tm.Namespaces = []string{"other"}
				return tm
			}())))},
			func(t *testing.T, res *Result) { assert.Equal(t, "claim:0", where(res)["a"]) }, 0},
		{"empty namespaceSelector means all namespaces", []*corev1.Pod{mkPod("a", "100m", "100Mi", withLabels("app", "x"), withNS("other"))},
			[]*ExistingNode{mkNode("n1", "4", "16Gi", nil, mkPod("guard", "100m", "", withAntiAffinity(func() corev1.PodAffinityTerm {
				tm := term(LabelHostname, map[string]string{"app": "x"})
				tm.NamespaceSelector = &metav1.LabelSelector{}
				return tm
			}())))},
			func(t *testing.T, res *Result) { assert.Equal(t, "claim:0", where(res)["a"]) }, 0},
		{"pending owner repels later pods", []*corev1.Pod{
			mkPod("guard", "2", "1Gi", withAntiAffinity(term(LabelHostname, map[string]string{"app": "x"}))),
			mkPod("a", "100m", "100Mi", withLabels("app", "x"))}, nil,
			func(t *testing.T, res *Result) { assert.NotEqual(t, where(res)["guard"], where(res)["a"]) }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: tc.pods, Nodes: tc.nodes, NodePools: []*NodePool{mkPool("p", stdTypes())}}
			res := solveOK(t, in)
			assert.Len(t, res.Unscheduled(), tc.unplaced)
			tc.check(t, res)
		})
	}
}

func TestNamespaceSelectorLabels(t *testing.T) {
	guard := mkPod("guard", "100m", "", withAntiAffinity(func() corev1.PodAffinityTerm {
		tm := term(LabelHostname, map[string]string{"app": "x"})
		tm.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "red"}}
		return tm
	}()))
	in := &Input{
		Pods:       []*corev1.Pod{mkPod("red", "100m", "100Mi", withLabels("app", "x"), withNS("red-ns")), mkPod("blue", "100m", "100Mi", withLabels("app", "x"), withNS("blue-ns"))},
		Nodes:      []*ExistingNode{mkNode("n1", "4", "16Gi", nil, guard)},
		NodePools:  []*NodePool{mkPool("p", stdTypes())},
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "red-ns", Labels: map[string]string{"team": "red"}}}, {ObjectMeta: metav1.ObjectMeta{Name: "blue-ns"}}},
	}
	res := solveOK(t, in)
	assert.Equal(t, "claim:0", where(res)["red"])
	assert.Equal(t, "node:n1", where(res)["blue"])
}

func TestPreferences(t *testing.T) {
	zoneA := nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-a")
	cases := []struct {
		name   string
		pods   []*corev1.Pod
		policy PreferencePolicy
		check  func(t *testing.T, res *Result)
	}{
		{"preferred node affinity honoured", []*corev1.Pod{mkPod("a", "1", "1Gi", withPreferredNode(1, zoneA))}, "",
			func(t *testing.T, res *Result) {
				assert.Equal(t, []string{"zone-a"}, res.NewNodeClaims[0].Requirements.Get(LabelZone).Values())
				assert.Empty(t, res.Placements[0].Relaxed)
			}},
		{"heaviest preferred node affinity first", []*corev1.Pod{mkPod("a", "1", "1Gi", withPreferredNode(1, zoneA),
			withPreferredNode(50, nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-c")))}, "",
			func(t *testing.T, res *Result) {
				assert.Equal(t, []string{"zone-c"}, res.NewNodeClaims[0].Requirements.Get(LabelZone).Values())
			}},
		{"impossible preference relaxed", []*corev1.Pod{mkPod("a", "1", "1Gi", withPreferredNode(1, nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-z")))}, "",
			func(t *testing.T, res *Result) {
				require.True(t, res.Placements[0].Scheduled())
				assert.Equal(t, []string{"preferred node affinity (weight 1)"}, res.Placements[0].Relaxed)
			}},
		{"ignore policy drops preferences", []*corev1.Pod{mkPod("a", "1", "1Gi", withPreferredNode(1, zoneA))}, PreferencesIgnore,
			func(t *testing.T, res *Result) {
				assert.Equal(t, 3, res.NewNodeClaims[0].Requirements.Get(LabelZone).Len())
			}},
		{"preferred anti-affinity respected while possible", podsN(3, "100m", "100Mi", withLabels("app", "x"),
			withPreferredAntiAffinity(10, term(LabelHostname, map[string]string{"app": "x"}))), "",
			func(t *testing.T, res *Result) { assert.Len(t, res.NewNodeClaims, 3) }},
		{"preferred anti-affinity ignored", podsN(3, "100m", "100Mi", withLabels("app", "x"),
			withPreferredAntiAffinity(10, term(LabelHostname, map[string]string{"app": "x"}))), PreferencesIgnore,
			func(t *testing.T, res *Result) { assert.Len(t, res.NewNodeClaims, 1) }},
		{"preferred zone anti-affinity relaxed after three", podsN(4, "100m", "100Mi", withLabels("app", "x"),
			withPreferredAntiAffinity(10, term(LabelZone, map[string]string{"app": "x"}))), "",
			func(t *testing.T, res *Result) {
				assert.Empty(t, res.Unscheduled())
				relaxed := 0
				for _, p := range res.Placements {
					if len(p.Relaxed) > 0 {
						relaxed++
						assert.Equal(t, []string{"preferred pod anti-affinity (weight 10)"}, p.Relaxed)
					}
				}
				assert.Equal(t, 1, relaxed)
			}},
		{"preferred pod affinity relaxed when target missing", []*corev1.Pod{mkPod("a", "1", "1Gi",
			withPreferredPodAffinity(5, term(LabelZone, map[string]string{"app": "none"})))}, "",
			func(t *testing.T, res *Result) {
				assert.Equal(t, []string{"preferred pod affinity (weight 5)"}, res.Placements[0].Relaxed)
			}},
		{"upstream order: affinity before anti-affinity before node", []*corev1.Pod{mkPod("a", "1", "1Gi", withLabels("app", "x"),
			withPreferredPodAffinity(5, term(LabelZone, map[string]string{"app": "none"})),
			withPreferredNode(1, nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-z")),
			withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelArch, corev1.NodeSelectorOpIn, "arm64")}, []corev1.NodeSelectorRequirement{zoneA}))}, "",
			func(t *testing.T, res *Result) {
				assert.Equal(t, []string{"required node affinity term 0", "preferred pod affinity (weight 5)", "preferred node affinity (weight 1)"}, res.Placements[0].Relaxed)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Pods: tc.pods, NodePools: []*NodePool{mkPool("p", stdTypes())}, Options: Options{PreferencePolicy: tc.policy}}
			tc.check(t, solveOK(t, in))
		})
	}
}

// TestRespectPreferencesShape reproduces the upstream preference benchmark in
// miniature: every pod ends on its own zone-a claim.
func TestRespectPreferencesShape(t *testing.T) {
	pods := podsN(20, "1500m", "100Mi", withLabels("app", "nginx"),
		withPreferredNode(1, nsr(LabelZone, corev1.NodeSelectorOpIn, "zone-a")),
		withPreferredAntiAffinity(10, term(LabelZone, map[string]string{"app": "nginx"})),
		withPreferredAntiAffinity(1, term(LabelHostname, map[string]string{"app": "nginx"})))
	res := solveOK(t, &Input{Pods: pods, NodePools: []*NodePool{mkPool("p", stdTypes())}})
	require.Len(t, res.NewNodeClaims, 20)
	for i, nc := range res.NewNodeClaims {
		assert.Equal(t, []string{"zone-a"}, nc.Requirements.Get(LabelZone).Values(), fmt.Sprint(i))
	}
}
