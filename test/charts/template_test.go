package charts_test

import (
	"flag"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/karpenter-go/karpenter/pkg/operator/options"
	awsoptions "github.com/karpenter-go/karpenter/pkg/providers/aws/options"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

// seedArgs are the documented install command's --set flags plus an IRSA
// role annotation and a values file.
var seedArgs = []string{
	"--set", "settings.clusterName=lab-cluster",
	"--set", "settings.interruptionQueue=lab-cluster",
	"--set", "controller.resources.requests.cpu=1",
	"--set", "controller.resources.requests.memory=1Gi",
	"--set", "controller.resources.limits.cpu=1",
	"--set", "controller.resources.limits.memory=1Gi",
	"--set", `serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::111122223333:role/KarpenterControllerRole-lab-cluster`,
	"-f", filepath.Join("testdata", "seed-values.yaml"),
}

// renderCluster is the clusterName render gives the chart.
const renderCluster = "test-cluster"

const roleARN = "arn:aws:iam::111122223333:role/KarpenterControllerRole-lab-cluster"

// render is `helm template` of the karpenter chart with args. The AWS
// provider's required clusterName comes first, so that args can override it.
func render(t *testing.T, args ...string) (string, []*unstructured.Unstructured) {
	t.Helper()
	base := []string{"template", "karpenter", chartDir(t, "karpenter"), "--namespace", "kube-system", "--set", "settings.clusterName=" + renderCluster}
	out := helm(t, nil, append(base, args...)...)
	return out, documents(t, out)
}

func TestLint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chart string
		args  []string
	}{
		{"karpenter defaults", "karpenter", nil},
		{"karpenter seed install", "karpenter", seedArgs},
		{"karpenter kwok provider", "karpenter", []string{"--set", "kwok.enabled=true"}},
		{"karpenter service monitor", "karpenter", []string{"--set", "serviceMonitor.enabled=true"}},
		{"karpenter-crd defaults", "karpenter-crd", nil},
		{"karpenter-crd annotations", "karpenter-crd", []string{"--set", "additionalAnnotations.helm\\.sh/resource-policy=keep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			helm(t, nil, append([]string{"lint", "--strict", chartDir(t, tc.chart)}, tc.args...)...)
		})
	}
}

func TestTemplateDefaultsGolden(t *testing.T) {
	out, _ := render(t)
	golden(t, "karpenter-defaults.yaml", out)
}

// TestTemplateDefaults checks upstream's defaults object by object, so a
// golden refreshed by mistake cannot hide a regression.
func TestTemplateDefaults(t *testing.T) {
	_, objs := render(t)
	// The AWS provider's: no -kwok ClusterRole, and the kube-dns Role in
	// kube-system beside the leader-election Role.
	wantKinds := map[string]int{
		"ServiceAccount": 1, "Service": 1, "Deployment": 1, "PodDisruptionBudget": 1,
		"ClusterRole": 3, "ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2,
	}
	gotKinds := map[string]int{}
	for _, o := range objs {
		gotKinds[o.GetKind()]++
	}
	if !maps.Equal(gotKinds, wantKinds) {
		t.Errorf("kinds rendered: got %v, want %v (no ServiceMonitor, no webhook objects by default)", gotKinds, wantKinds)
	}

	d := deployment(t, objs, "karpenter")
	selector := map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
	if d.Namespace != "kube-system" {
		t.Errorf("deployment namespace %q", d.Namespace)
	}
	if got := *d.Spec.Replicas; got != 2 {
		t.Errorf("replicas %d, want 2", got)
	}
	if !maps.Equal(d.Spec.Selector.MatchLabels, selector) {
		t.Errorf("selector %v", d.Spec.Selector.MatchLabels)
	}
	if got := d.Spec.Strategy.RollingUpdate.MaxUnavailable; got == nil || got.IntValue() != 1 {
		t.Errorf("maxUnavailable %v, want 1", got)
	}
	if got := *d.Spec.RevisionHistoryLimit; got != 10 {
		t.Errorf("revisionHistoryLimit %d", got)
	}
	pod := d.Spec.Template.Spec
	if pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", pod.PriorityClassName)
	}
	if pod.ServiceAccountName != "karpenter" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if !maps.Equal(pod.NodeSelector, map[string]string{"kubernetes.io/os": "linux"}) {
		t.Errorf("nodeSelector %v", pod.NodeSelector)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != 65532 ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", pod.SecurityContext)
	}
	wantTolerations := []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}
	if !reflect.DeepEqual(pod.Tolerations, wantTolerations) {
		t.Errorf("tolerations %+v", pod.Tolerations)
	}
	wantSpread := []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
	}}
	if !reflect.DeepEqual(pod.TopologySpreadConstraints, wantSpread) {
		t.Errorf("topologySpreadConstraints %+v", pod.TopologySpreadConstraints)
	}
	wantAffinity := &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist},
			}}},
		}},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
		}}},
	}
	if !reflect.DeepEqual(pod.Affinity, wantAffinity) {
		t.Errorf("affinity %+v", pod.Affinity)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("containers %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "karpenter-go/controller:1.14.1" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q pull %q", c.Image, c.ImagePullPolicy)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if !maps.Equal(ports, map[string]int32{"http-metrics": 8080, "http": 8081}) {
		t.Errorf("ports %v", ports)
	}
	probe := func(name string, p *corev1.Probe, path string, delay int32) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromString("http") || p.InitialDelaySeconds != delay || p.TimeoutSeconds != 30 {
			t.Errorf("%s probe %+v, want GET %s on http after %ds, timeout 30s", name, p, path, delay)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz", 30)
	probe("readiness", c.ReadinessProbe, "/readyz", 5)
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}

	pdb := &policyv1.PodDisruptionBudget{}
	typed(t, find(t, objs, "PodDisruptionBudget", "karpenter"), pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil || !maps.Equal(pdb.Spec.Selector.MatchLabels, selector) {
		t.Errorf("pdb %+v", pdb.Spec)
	}

	svc := &corev1.Service{}
	typed(t, find(t, objs, "Service", "karpenter"), svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http-metrics" || svc.Spec.Ports[0].Port != 8080 ||
		svc.Spec.Ports[0].TargetPort != intstr.FromString("http-metrics") || !maps.Equal(svc.Spec.Selector, selector) {
		t.Errorf("service %+v", svc.Spec)
	}
	sa := find(t, objs, "ServiceAccount", "karpenter")
	if len(sa.GetAnnotations()) != 0 {
		t.Errorf("service account annotations %v, want none by default", sa.GetAnnotations())
	}
}

// TestTemplateProviders: by default the controller runs the AWS provider
// with the write verbs its controllers use on EC2NodeClasses and the
// kube-dns Role; kwok.enabled runs the kwok provider with its own rules.
// Each release reads only its provider's NodeClass kind (the controllers
// watch the kinds the provider supports). Each rule is compared whole, so a
// verb added by mistake fails here too.
func TestTemplateProviders(t *testing.T) {
	read := []string{"list", "watch"}
	awsRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"karpenter.k8s.aws"}, Resources: []string{"ec2nodeclasses"}, Verbs: read},
		rbacv1.PolicyRule{APIGroups: []string{"karpenter.k8s.aws"}, Resources: []string{"ec2nodeclasses"}, Verbs: []string{"patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"karpenter.k8s.aws"}, Resources: []string{"ec2nodeclasses/status"}, Verbs: []string{"patch"}},
	}
	kwokClassRules := []rbacv1.PolicyRule{{APIGroups: []string{"karpenter.kwok.sh"}, Resources: []string{"kwoknodeclasses"}, Verbs: read}}
	dnsRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{"kube-dns"}, Verbs: []string{"get"}}}
	kwokRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"create"}},
	}
	for _, tc := range []struct {
		name      string
		args      []string
		provider  string
		nodeClass []rbacv1.PolicyRule
		dns, kwok []rbacv1.PolicyRule // nil: not rendered
	}{
		{"defaults", nil, "aws", awsRules, dnsRules, nil},
		{"kwok.enabled", []string{"--set", "kwok.enabled=true"}, "kwok", kwokClassRules, nil, kwokRules},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, objs := render(t, tc.args...)
			env, _ := controllerEnv(t, deployment(t, objs, "karpenter"))
			if env["CLOUD_PROVIDER"] != tc.provider {
				t.Errorf("CLOUD_PROVIDER=%q, want %q", env["CLOUD_PROVIDER"], tc.provider)
			}
			rules := func(kind, name string) []rbacv1.PolicyRule {
				for _, o := range objs {
					if o.GetKind() != kind || o.GetName() != name {
						continue
					}
					if kind == "Role" {
						r := &rbacv1.Role{}
						typed(t, o, r)
						return r.Rules
					}
					r := &rbacv1.ClusterRole{}
					typed(t, o, r)
					return r.Rules
				}
				return nil
			}
			if got := rules("ClusterRole", "karpenter"); !reflect.DeepEqual(got, tc.nodeClass) {
				t.Errorf("ClusterRole karpenter rules:\n got %+v\nwant %+v", got, tc.nodeClass)
			}
			if got := rules("ClusterRole", "karpenter-kwok"); !reflect.DeepEqual(got, tc.kwok) {
				t.Errorf("ClusterRole karpenter-kwok rules:\n got %+v\nwant %+v", got, tc.kwok)
			}
			if got := rules("Role", "karpenter-dns"); !reflect.DeepEqual(got, tc.dns) {
				t.Errorf("Role karpenter-dns rules:\n got %+v\nwant %+v", got, tc.dns)
			}
			if tc.dns != nil {
				role := find(t, objs, "Role", "karpenter-dns")
				binding := find(t, objs, "RoleBinding", "karpenter-dns")
				subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
				if role.GetNamespace() != "kube-system" || binding.GetNamespace() != "kube-system" || len(subjects) != 1 ||
					!reflect.DeepEqual(subjects[0], map[string]any{"kind": "ServiceAccount", "name": "karpenter", "namespace": "kube-system"}) {
					t.Errorf("kube-dns Role in %q, binding in %q for %v; want both in kube-system, for the chart's ServiceAccount", role.GetNamespace(), binding.GetNamespace(), subjects)
				}
			}
			if tc.kwok != nil {
				find(t, objs, "ClusterRoleBinding", "karpenter-kwok")
			}
		})
	}
}

// TestTemplateSettingsEnv sets every settings.* value and checks the
// environment variable it lands in, with upstream's names.
func TestTemplateSettingsEnv(t *testing.T) {
	_, objs := render(t,
		"--set", "settings.batchMaxDuration=30s",
		"--set", "settings.batchIdleDuration=3s",
		"--set", "settings.preferencePolicy=Ignore",
		"--set", "settings.minValuesPolicy=BestEffort",
		"--set", "settings.clusterCABundle=Q0E=",
		"--set", "settings.clusterName=prod",
		"--set", "settings.clusterEndpoint=https://api.example.com",
		"--set", "settings.isolatedVPC=true",
		"--set", "settings.eksControlPlane=true",
		"--set", "settings.vmMemoryOverheadPercent=0.1",
		"--set", "settings.interruptionQueue=prod-queue",
		"--set-string", "settings.reservedENIs=2",
		"--set", "settings.ignoreDRARequests=false",
		"--set", "settings.disableClusterStateObservability=true",
		"--set", "settings.disableDryRun=true",
		"--set", "settings.enableZonalShift=true",
		"--set", "settings.amiRefreshInterval=5m",
		"--set", "settings.subnetRefreshInterval=6m",
		"--set", "settings.consolidationAlgorithm=planner",
		"--set", "settings.consolidationPaybackHorizon=2h",
		"--set", "settings.consolidationRestartCost=0.05",
		"--set", "settings.consolidationCoolDown=10m",
		"--set", "settings.consolidationDrainDeletionCost=false",
		"--set", "settings.featureGates.nodeRepair=true",
		"--set", "settings.featureGates.nodeOverlay=true",
		"--set", "settings.featureGates.reservedCapacity=false",
		"--set", "settings.featureGates.spotToSpotConsolidation=true",
		"--set", "settings.featureGates.staticCapacity=true",
		"--set", "settings.featureGates.capacityBuffer=true",
		"--set", "settings.awsFeatureGates.nodeClassCEL=true",
		"--set", "logLevel=error",
		"--set", "logOutputPaths={stdout,/tmp/k.log}",
		"--set", "controller.metrics.port=9090",
		"--set", "controller.healthProbe.port=9091",
	)
	env, _ := controllerEnv(t, deployment(t, objs, "karpenter"))
	for name, want := range map[string]string{
		"BATCH_MAX_DURATION":                  "30s",
		"BATCH_IDLE_DURATION":                 "3s",
		"PREFERENCE_POLICY":                   "Ignore",
		"MIN_VALUES_POLICY":                   "BestEffort",
		"CLUSTER_CA_BUNDLE":                   "Q0E=",
		"CLUSTER_NAME":                        "prod",
		"CLUSTER_ENDPOINT":                    "https://api.example.com",
		"ISOLATED_VPC":                        "true",
		"EKS_CONTROL_PLANE":                   "true",
		"VM_MEMORY_OVERHEAD_PERCENT":          "0.1",
		"INTERRUPTION_QUEUE":                  "prod-queue",
		"RESERVED_ENIS":                       "2",
		"IGNORE_DRA_REQUESTS":                 "false",
		"DISABLE_CLUSTER_STATE_OBSERVABILITY": "true",
		"DISABLE_DRY_RUN":                     "true",
		"ENABLE_ZONAL_SHIFT":                  "true",
		"AMI_REFRESH_INTERVAL":                "5m",
		"SUBNET_REFRESH_INTERVAL":             "6m",
		"CONSOLIDATION_ALGORITHM":             "planner",
		"CONSOLIDATION_PAYBACK_HORIZON":       "2h",
		"CONSOLIDATION_RESTART_COST":          "0.05",
		"CONSOLIDATION_COOL_DOWN":             "10m",
		"CONSOLIDATION_DRAIN_DELETION_COST":   "false",
		"FEATURE_GATES":                       "NodeRepair=true,ReservedCapacity=false,SpotToSpotConsolidation=true,NodeOverlay=true,StaticCapacity=true,CapacityBuffer=true",
		"AWS_FEATURE_GATES":                   "NodeClassCEL=true",
		"LOG_LEVEL":                           "error",
		"LOG_OUTPUT_PATHS":                    "stdout,/tmp/k.log",
		"LOG_ERROR_OUTPUT_PATHS":              "stderr",
		"METRICS_PORT":                        "9090",
		"HEALTH_PROBE_PORT":                   "9091",
		"KARPENTER_SERVICE":                   "karpenter",
		"KUBERNETES_MIN_VERSION":              "1.19.0-0",
	} {
		if got, ok := env[name]; !ok || got != want {
			t.Errorf("env %s = %q (set %v), want %q", name, got, ok, want)
		}
	}

	// What the chart sets must be what the controller parses: the same
	// environment through the core and AWS option parsers.
	opts, aws := parseEnv(t, env)
	if opts.BatchMaxDuration != 30*time.Second || opts.BatchIdleDuration != 3*time.Second || opts.PreferencePolicy != "Ignore" ||
		opts.MinValuesPolicy != "BestEffort" || opts.IgnoreDRARequests || !opts.DisableClusterStateObservability ||
		opts.LogLevel != "error" || opts.MetricsPort != 9090 || opts.HealthProbePort != 9091 {
		t.Errorf("core options parsed from the chart's env: %+v", opts)
	}
	wantGates := options.FeatureGates{NodeRepair: true, SpotToSpotConsolidation: true, NodeOverlay: true, StaticCapacity: true, CapacityBuffer: true,
		AnticipateReplicaSets: options.DefaultFeatureGates().AnticipateReplicaSets}
	if opts.FeatureGates != wantGates {
		t.Errorf("feature gates %+v, want %+v", opts.FeatureGates, wantGates)
	}
	if aws.ClusterName != "prod" || aws.ClusterEndpoint != "https://api.example.com" || aws.ClusterCABundle != "Q0E=" || !aws.IsolatedVPC ||
		!aws.EKSControlPlane || aws.VMMemoryOverheadPercent != 0.1 || aws.InterruptionQueue != "prod-queue" || aws.ReservedENIs != 2 ||
		!aws.DisableDryRun || !aws.EnableZonalShift || aws.AMIRefreshInterval != 5*time.Minute || aws.SubnetRefreshInterval != 6*time.Minute ||
		aws.AWSFeatureGates != "NodeClassCEL=true" {
		t.Errorf("AWS options parsed from the chart's env: %+v", aws)
	}
}

// TestTemplateEnvNamesAreKnown: every variable the chart sets is one the
// controller (core, kwok or AWS options) reads, or one of upstream's
// informational ones; a misspelt name would silently do nothing.
func TestTemplateEnvNamesAreKnown(t *testing.T) {
	// CLOUD_PROVIDER is read by cmd/controller itself, not by an options
	// package.
	known := map[string]bool{"KUBERNETES_MIN_VERSION": true, "SYSTEM_NAMESPACE": true, "CLOUD_PROVIDER": true}
	for _, env := range options.EnvNames() {
		known[env] = true
	}
	for _, env := range awsoptions.EnvNames() {
		known[env] = true
	}
	for _, env := range []string{kwok.EnvCatalog, kwok.EnvInstanceTypesFile, kwok.EnvRegistrationDelay, kwok.EnvFaults, kwok.EnvRepairToleration} {
		known[env] = true
	}
	for _, args := range [][]string{nil, seedArgs, {"--set", "kwok.enabled=true"}, {"--set", "settings.isolatedVPC=true", "--set", "settings.eksControlPlane=true",
		"--set", "settings.disableClusterStateObservability=true", "--set", "settings.disableDryRun=true", "--set", "settings.enableZonalShift=true",
		"--set", "settings.clusterEndpoint=https://x", "--set", "settings.clusterCABundle=x"}} {
		_, objs := render(t, args...)
		env, fromField := controllerEnv(t, deployment(t, objs, "karpenter"))
		for name := range env {
			if !known[name] && name != "AWS_REGION" { // AWS_REGION: the seed values' controller.env, for the SDK
				t.Errorf("chart sets %s, which nothing reads", name)
			}
		}
		for name := range fromField {
			if !known[name] {
				t.Errorf("chart sets %s, which nothing reads", name)
			}
		}
	}
}

// TestTemplateSeedInstall renders the documented install command: the
// cluster name and queue, the IRSA role annotation, resources and the values
// file must reach the objects, and the controller must accept the result.
func TestTemplateSeedInstall(t *testing.T) {
	_, objs := render(t, seedArgs...)
	sa := find(t, objs, "ServiceAccount", "karpenter")
	if got := sa.GetAnnotations()["eks.amazonaws.com/role-arn"]; got != roleARN {
		t.Errorf("service account role-arn annotation %q, want %q", got, roleARN)
	}
	svc := find(t, objs, "Service", "karpenter")
	if got := svc.GetAnnotations()["prometheus.io/scrape"]; got != "true" {
		t.Errorf("service annotations %v", svc.GetAnnotations())
	}
	d := deployment(t, objs, "karpenter")
	c := d.Spec.Template.Spec.Containers[0]
	wantImage := "registry.example.com/karpenter-go/controller:1.14.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if c.Image != wantImage {
		t.Errorf("image %q, want %q", c.Image, wantImage)
	}
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.Cmp(wantRes.Requests[r]) != 0 || lim.Cmp(wantRes.Limits[r]) != 0 {
			t.Errorf("resources %+v, want %+v", c.Resources, wantRes)
		}
	}
	env, fromField := controllerEnv(t, d)
	for name, want := range map[string]string{
		"CLUSTER_NAME": "lab-cluster", "INTERRUPTION_QUEUE": "lab-cluster", "AWS_REGION": "eu-west-1",
		"LOG_LEVEL": "debug", "BATCH_MAX_DURATION": "20s", "BATCH_IDLE_DURATION": "2s",
		"FEATURE_GATES": "NodeRepair=true,ReservedCapacity=true,SpotToSpotConsolidation=true,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false",
	} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q", name, env[name], want)
		}
	}
	// The downward API fills these in the pod; resolve them the way the
	// kubelet does against the container's resources.
	downward(t, c, fromField, env)
	if env["CPU_REQUESTS"] != "1000" || env["MEMORY_LIMIT"] != strconv.Itoa(1<<30) || env["SYSTEM_NAMESPACE"] != "kube-system" {
		t.Errorf("downward API env CPU_REQUESTS=%q MEMORY_LIMIT=%q SYSTEM_NAMESPACE=%q", env["CPU_REQUESTS"], env["MEMORY_LIMIT"], env["SYSTEM_NAMESPACE"])
	}
	opts, aws := parseEnv(t, env)
	if opts.CPURequests != 1000 || opts.MemoryLimit != 1<<30 || opts.GoMemLimit() != (1<<30)/10*9 || opts.LogLevel != "debug" ||
		opts.BatchMaxDuration != 20*time.Second || !opts.FeatureGates.SpotToSpotConsolidation || !opts.FeatureGates.NodeRepair || !opts.FeatureGates.ReservedCapacity {
		t.Errorf("core options from the seed install: %+v", opts)
	}
	if aws.ClusterName != "lab-cluster" || aws.InterruptionQueue != "lab-cluster" || aws.VMMemoryOverheadPercent != 0.075 || aws.ReservedENIs != 0 {
		t.Errorf("AWS options from the seed install: %+v", aws)
	}
}

// TestTemplateDefaultEnvParses: the defaults start the controller with
// upstream's default settings (the AWS options need a cluster name, as
// upstream's do).
func TestTemplateDefaultEnvParses(t *testing.T) {
	_, objs := render(t)
	d := deployment(t, objs, "karpenter")
	env, fromField := controllerEnv(t, d)
	downward(t, d.Spec.Template.Spec.Containers[0], fromField, env)
	opts, _ := parseEnv(t, env, "--cluster-name=x")
	want := options.New()
	want.MemoryLimit, want.CPURequests = opts.MemoryLimit, opts.CPURequests // node-dependent without limits
	want.ServiceName = "karpenter"
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("options from the default chart differ from the controller's defaults:\n got %+v\nwant %+v", opts, want)
	}
}

func TestTemplateServiceMonitor(t *testing.T) {
	_, objs := render(t,
		"--set", "serviceMonitor.enabled=true",
		"--set", "serviceMonitor.additionalLabels.release=prom",
		"--set", "serviceMonitor.endpointConfig.interval=15s",
		"--set", "serviceMonitor.sampleLimit=5000",
	)
	sm := find(t, objs, "ServiceMonitor", "karpenter")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != "kube-system" || sm.GetLabels()["release"] != "prom" {
		t.Errorf("servicemonitor metadata %v %v", sm.GetAPIVersion(), sm.GetLabels())
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("endpoints %v", eps)
	}
	ep := eps[0].(map[string]any)
	if ep["port"] != "http-metrics" || ep["path"] != "/metrics" || ep["interval"] != "15s" {
		t.Errorf("endpoint %v", ep)
	}
	if limit, _, _ := unstructured.NestedInt64(sm.Object, "spec", "sampleLimit"); limit != 5000 {
		t.Errorf("sampleLimit %d", limit)
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !maps.Equal(sel, map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}) {
		t.Errorf("selector %v", sel)
	}
}

// TestTemplateOverrides covers the values that reshape the pod.
func TestTemplateOverrides(t *testing.T) {
	_, objs := render(t,
		"--set", "fullnameOverride=kp",
		"--set", "replicas=1",
		"--set", "serviceAccount.create=false",
		"--set", "serviceAccount.name=existing",
		"--set", "hostNetwork=true",
		"--set", "dnsPolicy=Default",
		"--set", "terminationGracePeriodSeconds=60",
		"--set", "podDisruptionBudget.name=kp-pdb",
		"--set", "additionalLabels.team=infra",
		"--set", "podLabels.extra=yes",
		"--set", "controller.securityContext.runAsUser=1000",
		"--set", "kwok.enabled=false",
		"--set", "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=kubernetes.io/hostname",
		"--set-string", "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.own=true",
		"--set", "additionalClusterRoleRules[0].apiGroups[0]=example.com",
		"--set", "additionalClusterRoleRules[0].resources[0]=widgets",
		"--set", "additionalClusterRoleRules[0].verbs[0]=get",
	)
	rules, _, _ := unstructured.NestedSlice(find(t, objs, "ClusterRole", "kp-core").Object, "rules")
	last := rules[len(rules)-1].(map[string]any)
	if !reflect.DeepEqual(last, map[string]any{"apiGroups": []any{"example.com"}, "resources": []any{"widgets"}, "verbs": []any{"get"}}) {
		t.Errorf("additionalClusterRoleRules not appended to the core ClusterRole: last rule %v", last)
	}
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" {
			t.Errorf("service account rendered with serviceAccount.create=false")
		}
		if strings.HasSuffix(o.GetName(), "-kwok") {
			t.Errorf("%s/%s rendered with kwok.enabled=false", o.GetKind(), o.GetName())
		}
		if o.GetLabels()["team"] != "infra" && o.GetKind() != "PodDisruptionBudget" {
			t.Errorf("%s/%s lacks additionalLabels", o.GetKind(), o.GetName())
		}
	}
	d := deployment(t, objs, "kp")
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas != 1 || pod.ServiceAccountName != "existing" || !pod.HostNetwork || pod.DNSPolicy != corev1.DNSDefault ||
		pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds != 60 || d.Spec.Template.Labels["extra"] != "yes" {
		t.Errorf("pod spec %+v", pod)
	}
	// A field set replaces the default's; the others stay hardened.
	if sc := pod.Containers[0].SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("controller.securityContext.runAsUser must replace only the default's runAsUser: %+v", sc)
	}
	if got := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels; !maps.Equal(got, map[string]string{"own": "true"}) {
		t.Errorf("a given labelSelector must be kept: %v", got)
	}
	find(t, objs, "PodDisruptionBudget", "kp-pdb")
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "existing" {
				t.Errorf("%s/%s subjects %v, want the existing service account", kind, o.GetName(), subjects)
			}
		}
	}
}

// parseEnv runs env (and args) through the controller's core and AWS option
// parsers on one flag set, as a binary serving both would.
func parseEnv(t *testing.T, env map[string]string, args ...string) (*options.Options, *awsoptions.Options) {
	t.Helper()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	opts := options.New()
	opts.AddFlags(fs)
	aws := awsoptions.New()
	aws.AddFlags(fs)
	if err := opts.Parse(fs, lookup, args...); err != nil {
		t.Fatalf("the controller rejects the chart's environment: %v", err)
	}
	if err := aws.Parse(fs, lookup, args...); err != nil {
		t.Fatalf("the AWS options reject the chart's environment: %v", err)
	}
	return opts, aws
}

// downward resolves the chart's downward-API variables into env the way the
// kubelet would for container c (namespace kube-system).
func downward(t *testing.T, c corev1.Container, fromField map[string]*corev1.EnvVarSource, env map[string]string) {
	t.Helper()
	for name, src := range fromField {
		switch {
		case src.FieldRef != nil:
			if src.FieldRef.FieldPath != "metadata.namespace" {
				t.Fatalf("%s from field %s", name, src.FieldRef.FieldPath)
			}
			env[name] = "kube-system"
		case src.ResourceFieldRef != nil:
			ref := src.ResourceFieldRef
			if ref.ContainerName != c.Name {
				t.Errorf("%s refers to container %q, the controller is %q", name, ref.ContainerName, c.Name)
			}
			var q resource.Quantity
			var ok bool
			switch ref.Resource {
			case "requests.cpu":
				q, ok = c.Resources.Requests[corev1.ResourceCPU]
			case "limits.memory":
				q, ok = c.Resources.Limits[corev1.ResourceMemory]
			default:
				t.Fatalf("%s from resource %s", name, ref.Resource)
			}
			if !ok {
				continue // the kubelet would use node allocatable; leave unset
			}
			divisor := ref.Divisor
			if divisor.IsZero() {
				divisor = resource.MustParse("1")
			}
			// ceil(q / divisor), as the kubelet rounds.
			v := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
			env[name] = strconv.FormatInt(v, 10)
		default:
			t.Fatalf("%s from an unexpected source %+v", name, src)
		}
	}
}

// The core ClusterRole grants patch on pods only where the controller
// patches them: the planner with its drain deletion cost on.
func TestTemplatePlannerPodPatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		patch bool
	}{
		{"defaults", nil, false},
		{"planner", []string{"--set", "settings.consolidationAlgorithm=planner"}, true},
		{"planner without the deletion cost", []string{"--set", "settings.consolidationAlgorithm=planner",
			"--set", "settings.consolidationDrainDeletionCost=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, objs := render(t, tc.args...)
			var role rbacv1.ClusterRole
			typed(t, find(t, objs, "ClusterRole", "karpenter-core"), &role)
			patch := slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "patch")
			})
			if patch != tc.patch {
				t.Errorf("patch on pods granted: %v, want %v", patch, tc.patch)
			}
		})
	}
}
