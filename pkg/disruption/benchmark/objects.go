package benchmark

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// A trace's pools, PDBs and pod constraints are defined once, here, and
// read both by the offline run (traces.go) and by the end-to-end run on a
// local control plane (test/soak), so that both play the same shapes.

// NodePool is the pool as the offline run and a cluster see it:
// WhenEmptyOrUnderutilized after 0 s under the pool's nodes budget.
func (tp TracePool) NodePool() *v1.NodePool {
	budget := tp.Budget
	if budget == "" {
		budget = "100%"
	}
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: tp.Name}, Spec: v1.NodePoolSpec{
		Disruption: v1.Disruption{ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized, ConsolidateAfter: v1.NewNillableDuration(0), Budgets: []v1.Budget{{Nodes: budget}}},
		Template:   v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{Requirements: tp.Requirements}},
	}}
	if tp.Weight != 0 {
		w := tp.Weight
		np.Spec.Weight = &w
	}
	return np
}

// selector selects the deployment's pods (its PDB, its spread and
// anti-affinity terms).
func (d Deployment) selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}}
}

// PodDisruptionBudget is the deployment's PDB in namespace, nil without one.
func (d Deployment) PodDisruptionBudget(namespace string) *policyv1.PodDisruptionBudget {
	if d.PDB == 0 {
		return nil
	}
	mu := intstr.FromString(fmt.Sprintf("%d%%", d.PDB))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: d.selector()},
	}
}

// constrain adds the deployment's scheduling constraints to a pod spec:
// its pool, zone spread and anti-affinity.
func (d Deployment) constrain(spec *corev1.PodSpec) {
	if d.Pool != "" {
		spec.NodeSelector = map[string]string{v1.NodePoolLabelKey: d.Pool}
	}
	if d.ZoneSpread {
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: d.selector()}}
	}
	if d.AntiAffinity {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: d.selector(), TopologyKey: corev1.LabelHostname}}}}
	}
}

// dndSuffix names the Deployment that carries a deployment's
// do-not-disrupt pods on a cluster: a Deployment cannot annotate every
// k-th pod, so the trace's one deployment becomes two under one app label.
const dndSuffix = "-dnd"

// TraceObjects are a trace's objects for a cluster.
type TraceObjects struct {
	NodePools   []*v1.NodePool
	Deployments []*appsv1.Deployment
	PDBs        []*policyv1.PodDisruptionBudget
	// DaemonSet is the per-node agent, nil when the trace runs none.
	DaemonSet *appsv1.DaemonSet
}

// Objects are the trace as Kubernetes objects: its NodePools on nodeClass,
// its Deployments at 0 replicas (ReplicasAt scales them) and PDBs in
// namespace, and the DaemonSet when the trace runs one. The application
// pods carry labels besides their app label.
func (t Trace) Objects(namespace string, nodeClass v1.NodeClassReference, labels map[string]string) TraceObjects {
	var out TraceObjects
	for _, tp := range t.Pools {
		np := tp.NodePool()
		ref := nodeClass
		np.Spec.Template.Spec.NodeClassRef = &ref
		out.NodePools = append(out.NodePools, np)
	}
	for _, d := range t.Deps {
		out.Deployments = append(out.Deployments, d.deployment(namespace, d.Name, false, labels))
		if d.DoNotDisrupt > 0 {
			out.Deployments = append(out.Deployments, d.deployment(namespace, d.Name+dndSuffix, true, labels))
		}
		if pdb := d.PodDisruptionBudget(namespace); pdb != nil {
			out.PDBs = append(out.PDBs, pdb)
		}
	}
	if t.Daemon {
		podLabels := map[string]string{"app": daemon.name}
		out.DaemonSet = &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: daemon.name, Namespace: namespace},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: podLabels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: podSpec(daemon)},
			},
		}
	}
	return out
}

// deployment is one Deployment of d named name, its pods annotated
// do-not-disrupt when dnd.
func (d Deployment) deployment(namespace, name string, dnd bool, labels map[string]string) *appsv1.Deployment {
	podLabels := map[string]string{"app": d.Name, "deployment": name}
	for k, v := range labels {
		podLabels[k] = v
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: podSpec(shape{d.Name, d.CPU, d.Memory})}
	if dnd {
		tmpl.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	}
	d.constrain(&tmpl.Spec)
	zero := int32(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name, "deployment": name}},
			Template: tmpl,
		},
	}
}

// podSpec runs a pause container asking s's requests, deleted at once.
func podSpec(s shape) corev1.PodSpec {
	zero := int64(0)
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(s.cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(s.memory<<20, resource.BinarySI),
		}}}},
	}
}

// ReplicasAt is every Deployment's replicas at step s, by name: a
// deployment with do-not-disrupt pods splits its count as the offline run
// annotates them (pods 0, k, 2k, ... of its count).
func (t Trace) ReplicasAt(s int) map[string]int32 {
	out := map[string]int32{}
	for i, d := range t.Deps {
		n := t.Replicas[s][i]
		if d.DoNotDisrupt > 0 {
			dnd := (n + d.DoNotDisrupt - 1) / d.DoNotDisrupt
			out[d.Name+dndSuffix] = int32(dnd)
			n -= dnd
		}
		out[d.Name] = int32(n)
	}
	return out
}
