package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

var now = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC) // a Wednesday

func pool(name string, opts ...func(*v1.NodePool)) *v1.NodePool {
	np := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{
			Disruption: v1.Disruption{
				ConsolidateAfter: v1.NewNillableDuration(0),
				Budgets:          []v1.Budget{{Nodes: "10%"}},
			},
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			}},
		},
		// Ready, as the NodePool controllers leave a valid pool whose
		// NodeClass is ready: only Ready pools are launched into.
		Status: v1.NodePoolStatus{Conditions: []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}}},
	}
	for _, o := range opts {
		o(np)
	}
	return np
}

func budgets(bs ...v1.Budget) func(*v1.NodePool) {
	return func(np *v1.NodePool) { np.Spec.Disruption.Budgets = bs }
}

func never(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.NeverDuration() }

func replicas(n int64) func(*v1.NodePool) {
	return func(np *v1.NodePool) { np.Spec.Replicas = &n }
}

func nodeLimit(n int64) func(*v1.NodePool) {
	return func(np *v1.NodePool) {
		np.Spec.Limits = v1.Limits{v1.ResourceNodes: *resource.NewQuantity(n, resource.DecimalSI)}
	}
}

func budget(nodes string) v1.Budget { return v1.Budget{Nodes: nodes} }

func scheduled(nodes, cron string, d time.Duration) v1.Budget {
	return v1.Budget{Nodes: nodes, Schedule: &cron, Duration: &v1.Duration{Duration: d}}
}

func forReasons(b v1.Budget, rs ...v1.DisruptionReason) v1.Budget { b.Reasons = rs; return b }

type nodeOpt func(*Node)

// node is a managed, initialized, Ready node of pool.
func node(name, poolName string, opts ...nodeOpt) *Node {
	n := &Node{
		NodeClaim: &v1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: poolName}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		},
		Node: &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: poolName}},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		},
		NodePool:    poolName,
		Initialized: true,
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func cond(t string, since time.Time) nodeOpt {
	return func(n *Node) {
		n.NodeClaim.Status.Conditions = append(n.NodeClaim.Status.Conditions, v1.Condition{Type: t, Status: "True", LastTransitionTime: metav1.NewTime(since)})
	}
}

func drifted(since time.Time) nodeOpt { return cond(v1.ConditionTypeDrifted, since) }

var consolidatable = cond(v1.ConditionTypeConsolidatable, now.Add(-time.Minute))

func notReady(n *Node) { n.Node.Status.Conditions[0].Status = corev1.ConditionFalse }

func withTGP(n *Node) {
	n.NodeClaim.Spec.TerminationGracePeriod = &v1.Duration{Duration: time.Hour}
}

func withPods(pods ...*corev1.Pod) nodeOpt {
	return func(n *Node) {
		for _, p := range pods {
			p.Spec.NodeName = n.Name()
			n.Pods = append(n.Pods, p)
		}
	}
}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}, CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func annotated(v string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: v}
	}
}

func daemonSetPod(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}
}

func pdb(name string, allowed int32, matchApp string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": matchApp}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func testSnapshot(pools []*v1.NodePool, nodes []*Node, pdbs ...*policyv1.PodDisruptionBudget) *Snapshot {
	s := &Snapshot{Now: now, Nodes: nodes, NodePools: map[string]*v1.NodePool{}, PDBs: pdbs}
	for _, np := range pools {
		s.NodePools[np.Name] = np
	}
	return s
}

func nodesOf(poolName string, n int, opts ...nodeOpt) []*Node {
	out := make([]*Node, n)
	for i := range out {
		out[i] = node(fmt.Sprintf("%s-%02d", poolName, i), poolName, opts...)
	}
	return out
}

func names(cs []*Candidate) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name())
	}
	return out
}

func explanationOf(d *Decision, name string) *Explanation {
	for i := range d.Explanations {
		if d.Explanations[i].Node == name {
			return &d.Explanations[i]
		}
	}
	return nil
}
