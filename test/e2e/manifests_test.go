package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// The e2e tests' NodePools, Deployments and PDBs are typed objects built
// here and rendered with manifest, so that a field is spelled by the API
// types rather than by hand in YAML.

// manifest renders objects as a multi-document YAML manifest for applyAll,
// without their (empty) status.
func manifest(objs ...any) string {
	docs := make([]string, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			panic(err) // the objects are the API types: they always marshal
		}
		fields := map[string]any{}
		if err := json.Unmarshal(raw, &fields); err != nil {
			panic(err)
		}
		delete(fields, "status")
		doc, err := yaml.Marshal(fields)
		if err != nil {
			panic(err)
		}
		docs = append(docs, string(doc))
	}
	return strings.Join(docs, "---\n")
}

type poolOpt func(*v1.NodePool)

// kwokPool is a NodePool on the default KWOKNodeClass; opts add labels,
// requirements, disruption settings and the rest. It has no requirement
// and no disruption settings of its own.
func kwokPool(name string, opts ...poolOpt) *v1.NodePool {
	np := &v1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	for _, o := range opts {
		o(np)
	}
	return np
}

// testPool is a kwokPool whose nodes carry e2ePoolLabel=name, for
// workloads placed with onPool.
func testPool(name string, opts ...poolOpt) *v1.NodePool {
	return kwokPool(name, append([]poolOpt{poolLabel(e2ePoolLabel, name)}, opts...)...)
}

// defaultKWOKNodeClass is the KWOKNodeClass "default" the pools refer to.
func defaultKWOKNodeClass() *kwokv1alpha1.KWOKNodeClass {
	return &kwokv1alpha1.KWOKNodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: kwokv1alpha1.GroupVersion.String(), Kind: "KWOKNodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
	}
}

// requirement adds a template requirement.
func requirement(key string, op corev1.NodeSelectorOperator, values ...string) poolOpt {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
}

// amd64OnDemand are the requirements most test pools start with.
func amd64OnDemand(linux bool) []poolOpt {
	opts := []poolOpt{requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")}
	if linux {
		opts = append(opts, requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"))
	}
	return append(opts, requirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
}

// poolLabel adds a template label.
func poolLabel(key, value string) poolOpt {
	return func(np *v1.NodePool) {
		labels := np.Spec.Template.LabelMap()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = value
		np.Spec.Template.SetLabelMap(labels)
	}
}

// consolidation sets the policy ("" leaves it to the API server's default)
// and consolidateAfter ("0s", "Never", ...).
func consolidation(policy v1.ConsolidationPolicy, after string) poolOpt {
	return func(np *v1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = policy
		np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration(after)
	}
}

// budgets sets the disruption budgets.
func budgets(bs ...v1.Budget) poolOpt {
	return func(np *v1.NodePool) { np.Spec.Disruption.Budgets = bs }
}

// nodesBudget is a budget of nodes ("1", "15%"), optionally scheduled
// (cron and duration) and limited to reasons.
func nodesBudget(nodes, schedule string, duration time.Duration, reasons ...v1.DisruptionReason) v1.Budget {
	b := v1.Budget{Nodes: nodes, Reasons: reasons}
	if schedule != "" {
		b.Schedule = &schedule
		b.Duration = &v1.Duration{Duration: duration}
	}
	return b
}

// startupTaints sets the template's startup taints.
func startupTaints(ts ...corev1.Taint) poolOpt {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.StartupTaints = ts }
}

// terminationGracePeriod sets the template's terminationGracePeriod.
func terminationGracePeriod(d time.Duration) poolOpt {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.TerminationGracePeriod = &v1.Duration{Duration: d} }
}

// expireAfter sets the template's expireAfter ("45s", "Never").
func expireAfter(after string) poolOpt {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration(after) }
}

// static makes the pool static: replicas nodes, at most nodeLimit.
func static(replicas, nodeLimit int64) poolOpt {
	return func(np *v1.NodePool) {
		np.Spec.Replicas = &replicas
		np.Spec.Limits = v1.Limits{v1.ResourceNodes: *resource.NewQuantity(nodeLimit, resource.DecimalSI)}
	}
}

type deploymentOpt func(*appsv1.Deployment)

// pauseDeployment is a Deployment of pause pods (app=name, grace period 0)
// in the default namespace, each requesting cpu and memory.
func pauseDeployment(name string, replicas int32, cpu, memory string, opts ...deploymentOpt) *appsv1.Deployment {
	zero := int64(0)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
					}}},
				},
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// inNamespace puts the Deployment in namespace ns.
func inNamespace(ns string) deploymentOpt {
	return func(d *appsv1.Deployment) { d.Namespace = ns }
}

// image sets the container image (the default "pause" is the kwok
// provider's stand-in).
func image(ref string) deploymentOpt {
	return func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = ref }
}

// podLabel adds a pod template label.
func podLabel(key, value string) deploymentOpt {
	return func(d *appsv1.Deployment) { d.Spec.Template.Labels[key] = value }
}

// onPool pins the pods to a test pool (nodeSelector on e2ePoolLabel).
func onPool(pool string) deploymentOpt {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{e2ePoolLabel: pool}
	}
}

// podAnnotations sets the pod template's annotations (none when empty).
func podAnnotations(annotations map[string]string) deploymentOpt {
	return func(d *appsv1.Deployment) {
		if len(annotations) > 0 {
			d.Spec.Template.Annotations = annotations
		}
	}
}

// onePerHost keeps the pods on separate hosts (required hostname
// anti-affinity on app=name).
func onePerHost(d *appsv1.Deployment) {
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.Name}},
		}},
	}}
}

// podDisruptionBudget is a PodDisruptionBudget over app=app.
func podDisruptionBudget(name, app string, maxUnavailable int) *policyv1.PodDisruptionBudget {
	max := intstr.FromInt32(int32(maxUnavailable))
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &max,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
}

// TestManifests checks the builders render what the API server accepts and
// round-trips: the YAML decodes back into the objects they built.
func TestManifests(t *testing.T) {
	np := testPool("p", append(amd64OnDemand(true), consolidation(v1.ConsolidationPolicyWhenEmpty, "Never"),
		budgets(nodesBudget("0", "0 9 * * *", time.Hour, v1.DisruptionReasonDrifted)), expireAfter("45s"))...)
	d := pauseDeployment("app", 3, "100m", "128Mi", onPool("p"), onePerHost, podAnnotations(map[string]string{v1.DoNotDisruptAnnotationKey: "true"}))
	docs := strings.Split(manifest(np, d), "---\n")
	require.Len(t, docs, 2)
	gotPool := &v1.NodePool{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), gotPool))
	require.Equal(t, "p", gotPool.Spec.Template.LabelMap()[e2ePoolLabel])
	require.True(t, gotPool.Spec.Disruption.ConsolidateAfter.IsNever())
	require.Equal(t, "0 9 * * *", *gotPool.Spec.Disruption.Budgets[0].Schedule)
	require.Len(t, gotPool.Spec.Template.Spec.Requirements, 3)
	gotDeployment := &appsv1.Deployment{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), gotDeployment))
	require.Equal(t, int32(3), *gotDeployment.Spec.Replicas)
	require.Equal(t, "p", gotDeployment.Spec.Template.Spec.NodeSelector[e2ePoolLabel])
	require.Equal(t, "true", gotDeployment.Spec.Template.Annotations[v1.DoNotDisruptAnnotationKey])
}
