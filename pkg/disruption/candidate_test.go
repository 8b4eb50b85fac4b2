package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

func TestCandidateBlockers(t *testing.T) {
	tests := []struct {
		name  string
		node  *Node
		pdbs  []*policyv1.PodDisruptionBudget
		kind  Kind // "" means the node is a candidate
		event bool
		check func(t *testing.T, v Verdict)
	}{
		{name: "plain node is a candidate", node: node("n", "p")},
		{name: "unmanaged", node: &Node{Node: node("n", "p").Node}, kind: KindNotManaged},
		{name: "launched, no node yet", node: node("n", "p", func(n *Node) { n.Node = nil; n.NodeClaim.Status.ProviderID = "kwok://n" }), kind: KindNoNode, event: true},
		{name: "not launched yet (no event)", node: node("n", "p", func(n *Node) { n.Node = nil }), kind: KindNoNode},
		{name: "not initialized", node: node("n", "p", func(n *Node) { n.Initialized = false }), kind: KindNotInitialized, event: true},
		{name: "deleting", node: node("n", "p", func(n *Node) { n.Deleting = true }), kind: KindDeleting, event: true},
		{name: "marked for deletion", node: node("n", "p", func(n *Node) { n.MarkedForDeletion = true }), kind: KindDeleting, event: true},
		{name: "nominated", node: node("n", "p", func(n *Node) { n.Nominated = true }), kind: KindNominated, event: true},
		{name: "in queue (no event)", node: node("n", "p", func(n *Node) { n.InQueue = true; n.MarkedForDeletion = true }), kind: KindInQueue},
		{name: "node do-not-disrupt", node: node("n", "p", func(n *Node) {
			n.Node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		}), kind: KindNodeDoNotDisrupt, event: true},
		{name: "no nodepool label", node: node("n", "", func(n *Node) {}), kind: KindNoNodePoolLabel, event: true},
		{name: "unknown nodepool", node: node("n", "missing"), kind: KindNodePoolNotFound, event: true},
		{name: "pod do-not-disrupt true", node: node("n", "p", withPods(pod("a"), pod("b", annotated("true")))), kind: KindPodDoNotDisrupt, event: true,
			check: func(t *testing.T, v Verdict) { assert.Equal(t, "default/b", v.Pod); assert.Nil(t, v.Until) }},
		{name: "pod do-not-disrupt duration, pod younger", node: node("n", "p", withPods(pod("a", annotated("5m")))), kind: KindPodDoNotDisrupt, event: true,
			check: func(t *testing.T, v Verdict) {
				require.NotNil(t, v.Until)
				assert.Equal(t, now.Add(4*time.Minute), *v.Until)
			}},
		{name: "pod do-not-disrupt duration elapsed", node: node("n", "p", withPods(pod("a", annotated("30s"))))},
		{name: "do-not-disrupt on a finished pod is ignored", node: node("n", "p", withPods(pod("a", annotated("true"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })))},
		{name: "do-not-disrupt on a DaemonSet pod blocks (upstream)", node: node("n", "p", withPods(pod("a", annotated("true"), daemonSetPod))), kind: KindPodDoNotDisrupt, event: true},
		{name: "PDB allows no disruption", node: node("n", "p", withPods(pod("web"))), pdbs: []*policyv1.PodDisruptionBudget{pdb("web-pdb", 0, "web")}, kind: KindPDBBlocked, event: true,
			check: func(t *testing.T, v Verdict) {
				assert.Equal(t, "default/web-pdb", v.PDB)
				assert.Equal(t, "default/web", v.Pod)
			}},
		{name: "PDB allows one", node: node("n", "p", withPods(pod("web"))), pdbs: []*policyv1.PodDisruptionBudget{pdb("web-pdb", 1, "web")}},
		{name: "PDB of another app", node: node("n", "p", withPods(pod("web"))), pdbs: []*policyv1.PodDisruptionBudget{pdb("db-pdb", 0, "db")}},
		{name: "two PDBs on one pod", node: node("n", "p", withPods(pod("web"))), pdbs: []*policyv1.PodDisruptionBudget{pdb("a", 1, "web"), pdb("b", 1, "web")}, kind: KindMultiplePDBs, event: true,
			check: func(t *testing.T, v Verdict) { assert.Equal(t, []string{"default/a", "default/b"}, v.PDBs) }},
		{name: "PDB with AlwaysAllow and an unready pod", node: node("n", "p", withPods(pod("web", func(p *corev1.Pod) { p.Status.Conditions = nil }))),
			pdbs: []*policyv1.PodDisruptionBudget{func() *policyv1.PodDisruptionBudget {
				b := pdb("web-pdb", 0, "web")
				always := policyv1.AlwaysAllow
				b.Spec.UnhealthyPodEvictionPolicy = &always
				return b
			}()}},
		{name: "PDB ignores pods tolerating the disrupted taint", node: node("n", "p", withPods(pod("web", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
		}))), pdbs: []*policyv1.PodDisruptionBudget{pdb("web-pdb", 0, "web")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := testSnapshot([]*v1.NodePool{pool("p")}, []*Node{tt.node}, tt.pdbs...)
			found := discover(snap)
			if tt.kind == "" {
				require.Empty(t, found.refused)
				require.Len(t, found.all, 1)
				assert.Nil(t, found.all[0].PodBlocker)
				return
			}
			require.Empty(t, found.all)
			v, ok := found.refused[tt.node.Name()]
			require.True(t, ok)
			assert.Equal(t, tt.kind, v.Kind)
			assert.Equal(t, tt.event, v.Event)
			assert.NotEmpty(t, v.Message())
			if tt.check != nil {
				tt.check(t, v)
			}
		})
	}
}

func TestTerminationGracePeriodLetsDriftPastPodBlockers(t *testing.T) {
	blocked := node("blocked", "p", withTGP, drifted(now.Add(-time.Hour)), consolidatable, withPods(pod("a", annotated("true"))))
	pdbBlocked := node("pdb", "p", withTGP, drifted(now.Add(-time.Hour)), consolidatable, withPods(pod("web")))
	snap := testSnapshot([]*v1.NodePool{pool("p", budgets(budget("100%")))}, []*Node{blocked, pdbBlocked}, pdb("web-pdb", 0, "web"))
	found := discover(snap)
	require.Len(t, found.all, 2, "a terminationGracePeriod keeps them candidates")
	for _, c := range found.all {
		require.NotNil(t, c.PodBlocker)
	}
	// Emptiness (graceful) refuses them with the pod blocker; drift
	// (eventual) takes one.
	d, err := Disrupt(snap, []Method{Emptiness{}}, nil)
	require.NoError(t, err)
	assert.Empty(t, d.Commands)
	assert.Equal(t, KindPodDoNotDisrupt, explanationOf(d, "blocked").Verdicts[0].Kind)
	assert.Equal(t, KindPDBBlocked, explanationOf(d, "pdb").Verdicts[0].Kind)

	d, err = Disrupt(snap, []Method{Drift{}}, fits())
	require.NoError(t, err)
	require.Len(t, d.Commands, 1)
	assert.Len(t, d.Commands[0].Candidates, 1)
}

func TestInvalidDoNotDisruptIsAWarning(t *testing.T) {
	n := node("n", "p", withPods(pod("a", annotated("soon"))))
	found := discover(testSnapshot([]*v1.NodePool{pool("p")}, []*Node{n}))
	require.Len(t, found.all, 1, "an invalid value does not protect the pod")
	require.Len(t, found.warnings, 1)
	w := found.warnings[0]
	assert.Equal(t, KindInvalidAnnotation, w.Kind)
	assert.Equal(t, "default/a", w.Pod)
	assert.Equal(t, "soon", w.Value)
	assert.Contains(t, w.Message(), `"soon"`)
}

func TestReschedulableAndCost(t *testing.T) {
	prio := int32(1 << 25)
	n := node("n", "p", withPods(
		pod("app"),
		pod("ds", daemonSetPod),
		pod("mirror", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("leaving", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }),
		pod("tolerant", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}),
		pod("important", func(p *corev1.Pod) { p.Spec.Priority = &prio }),
	))
	found := discover(testSnapshot([]*v1.NodePool{pool("p")}, []*Node{n}))
	require.Len(t, found.all, 1)
	c := found.all[0]
	var got []string
	for _, p := range c.Reschedulable {
		got = append(got, p.Name)
	}
	assert.Equal(t, []string{"app", "important"}, got)
	assert.InDelta(t, 1+2, c.DisruptionCost, 1e-9)
}

func TestEvictionCost(t *testing.T) {
	prio := func(v int32) podOpt { return func(p *corev1.Pod) { p.Spec.Priority = &v } }
	cost := func(v string) podOpt {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{v1.PodDeletionCostAnnotationKey: v} }
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want float64
	}{
		{"default", pod("a"), 1},
		{"deletion cost 2^27", pod("a", cost("134217728")), 2},
		{"negative deletion cost", pod("a", cost("-134217728")), 0},
		{"unparseable deletion cost", pod("a", cost("x")), 1},
		{"priority 2^25", pod("a", prio(1<<25)), 2},
		{"clamped high", pod("a", prio(1000000000)), 10},
		{"clamped low", pod("a", prio(-2147483648)), -10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, EvictionCost(tt.pod), 1e-9)
		})
	}
}

func TestLifetimeRemaining(t *testing.T) {
	nc := node("n", "p").NodeClaim // created an hour ago
	assert.Equal(t, 1.0, LifetimeRemaining(nc, now))
	nc.Spec.ExpireAfter = v1.NewNillableDuration(4 * time.Hour)
	assert.InDelta(t, 0.75, LifetimeRemaining(nc, now), 1e-9)
	nc.Spec.ExpireAfter = v1.NewNillableDuration(30 * time.Minute)
	assert.Equal(t, 0.0, LifetimeRemaining(nc, now))
	nc.Spec.ExpireAfter = v1.NeverDuration()
	assert.Equal(t, 1.0, LifetimeRemaining(nc, now))
}
