package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// upstreamWorkloads holds upstream Karpenter's example Deployments; CI lays
// shared/ beside the clone.
const upstreamWorkloads = "../../../shared/reference/upstream-examples/workloads"

// workloadsPool permits every upstream example workload: both
// architectures, spot and on-demand, and no instance-category filter so the
// GPU and Neuron types are in. The manifests carry no tolerations, so the
// pool has no taints.
const workloadsPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: upstream-workloads
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64", "arm64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
      nodeClassRef:
        group: karpenter.kwok.sh
        kind: KWOKNodeClass
        name: default
`

// workloadCheck asserts a workload's own constraint once all its pods run.
// nodes holds every Node in the cluster, by name.
type workloadCheck func(t *testing.T, d *appsv1.Deployment, pods []corev1.Pod, nodes map[string]*corev1.Node)

// TestUpstreamWorkloads runs each of upstream's example Deployments at 10
// replicas against one permissive NodePool and checks that every pod runs
// and that its constraint holds on the nodes it landed on.
//
// The spread workloads go first, on an empty cluster, so that Karpenter (not
// spare room left by other workloads) creates the domains they spread over,
// and their skew is checked before later nodes add empty domains that did
// not exist when the kube-scheduler placed them. The rest constrain node
// properties, which no later node can invalidate, so they run together.
func TestUpstreamWorkloads(t *testing.T) {
	manifests := readUpstreamWorkloads(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(workloadsPool)))
	startController(t, cp, "controller")

	nodeHas := func(r corev1.ResourceName) workloadCheck {
		return func(t *testing.T, d *appsv1.Deployment, pods []corev1.Pod, nodes map[string]*corev1.Node) {
			for _, p := range pods {
				q := nodes[p.Spec.NodeName].Status.Allocatable[r]
				require.Truef(t, q.Sign() > 0, "%s: pod %s runs on %s, which has no %s", d.Name, p.Name, p.Spec.NodeName, r)
			}
		}
	}
	nodeLabel := func(k, v string) workloadCheck {
		return func(t *testing.T, d *appsv1.Deployment, pods []corev1.Pod, nodes map[string]*corev1.Node) {
			for _, p := range pods {
				require.Equalf(t, v, nodes[p.Spec.NodeName].Labels[k], "%s: pod %s runs on %s", d.Name, p.Name, p.Spec.NodeName)
			}
		}
	}
	noCheck := func(*testing.T, *appsv1.Deployment, []corev1.Pod, map[string]*corev1.Node) {}
	phases := []map[string]workloadCheck{
		{
			"spread-zone.yaml":          checkSpread,
			"spread-hostname.yaml":      checkSpread,
			"spread-hostname-zone.yaml": checkSpread,
		},
		{
			"inflate.yaml":    noCheck,
			"arm64.yaml":      nodeLabel(corev1.LabelArchStable, v1.ArchitectureArm64),
			"spot.yaml":       nodeLabel(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot),
			"prefer-arm.yaml": logArchitectures,
			// The PDB's own effect on disruption is for disruption tests; here
			// its pods must run on amd64 and the PDB must see them healthy.
			"disruption-budget.yaml": nodeLabel(corev1.LabelArchStable, v1.ArchitectureAmd64),
			"gpu-nvidia.yaml":        nodeHas(awsv1.ResourceNVIDIAGPU),
			"gpu-amd.yaml":           nodeHas(awsv1.ResourceAMDGPU),
			"neuron.yaml":            nodeHas(awsv1.ResourceAWSNeuron),
		},
	}
	covered := 0
	for _, phase := range phases {
		covered += len(phase)
	}
	require.Equal(t, len(manifests), covered, "every upstream workload has a check")

	for _, phase := range phases {
		files := make([]string, 0, len(phase))
		for f := range phase {
			files = append(files, f)
		}
		sort.Strings(files)
		deploys := map[string]*appsv1.Deployment{}
		for _, f := range files {
			raw, ok := manifests[f]
			require.Truef(t, ok, "upstream workload %s is missing", f)
			deploys[f] = createWorkload(t, ctx, cp, f, raw, 10)
		}
		start := time.Now()
		require.Eventuallyf(t, func() bool {
			for _, f := range files {
				if n := runningOnOurNodes(ctx, t, cp, selectorOf(t, deploys[f])); n != 10 {
					return false
				}
			}
			return true
		}, 3*time.Minute, time.Second, "every pod of %v should run on our nodes", files)
		t.Logf("%v: all pods running after %s", files, time.Since(start).Round(100*time.Millisecond))

		nodes := allNodes(t, ctx, cp)
		for _, f := range files {
			d := deploys[f]
			pods := podsOf(t, ctx, cp, d)
			require.Lenf(t, pods, 10, "%s: exactly 10 pods", d.Name)
			for _, p := range pods {
				require.Equalf(t, corev1.PodRunning, p.Status.Phase, "%s: pod %s", d.Name, p.Name)
				require.Containsf(t, nodes, p.Spec.NodeName, "%s: pod %s", d.Name, p.Name)
			}
			t.Run(strings.TrimSuffix(f, ".yaml"), func(t *testing.T) { phase[f](t, d, pods, nodes) })
		}
	}

	// upstream's disruption-budget PDB keeps 80% of the 10 pods: with all of
	// them healthy, the disruption controller allows exactly 2 disruptions.
	require.Eventually(t, func() bool {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pdb"}, pdb); err != nil {
			return false
		}
		return pdb.Status.CurrentHealthy == 10 && pdb.Status.DisruptionsAllowed == 2
	}, time.Minute, time.Second, "the pdb should count 10 healthy pods and allow 2 disruptions")

	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &claims))
	for _, nc := range claims.Items {
		require.Equal(t, "upstream-workloads", nc.Labels[v1.NodePoolLabelKey])
		require.Truef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady), "%s not Ready: %+v", nc.Name, nc.Status.Conditions)
	}
	t.Logf("%d nodeclaims", len(claims.Items))
}

// readUpstreamWorkloads returns the workload manifests by file name. They
// live outside the repository: a local run without them skips, CI fails.
func readUpstreamWorkloads(t *testing.T) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(upstreamWorkloads, "*.yaml"))
	if len(files) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("no upstream workloads at %s; CI must have shared/ beside the clone", upstreamWorkloads)
		}
		t.Skipf("no upstream workloads at %s", upstreamWorkloads)
	}
	out := map[string][]byte{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		out[filepath.Base(f)] = raw
	}
	return out
}

// createWorkload creates the objects of one upstream manifest in the
// default namespace, with the Deployment at the given replica count.
// Objects are decoded leniently, like a client that does not validate:
// some upstream manifests misspell a field (allowPrivilegedEscalation), which
// the API server would refuse under strict validation; the unknown field is
// logged and dropped.
func createWorkload(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, file string, raw []byte, replicas int32) *appsv1.Deployment {
	t.Helper()
	objs, err := controlplane.DecodeManifests(raw)
	require.NoError(t, err, file)
	var deploy *appsv1.Deployment
	for _, u := range objs {
		var obj client.Object
		switch u.GetKind() {
		case "Deployment":
			deploy = &appsv1.Deployment{}
			obj = deploy
		case "PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			t.Fatalf("%s: unexpected kind %s", file, u.GetKind())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
			t.Logf("%s: dropping what the API does not know: %v", file, err)
		}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj), file)
		obj.SetNamespace("default")
		if deploy == obj {
			deploy.Spec.Replicas = ptr.To(replicas)
		}
		require.NoError(t, cp.Client.Create(ctx, obj), file)
	}
	require.NotNilf(t, deploy, "%s has no Deployment", file)
	return deploy
}

// selectorOf renders a Deployment's single-label selector the way
// runningOnOurNodes takes it.
func selectorOf(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	require.Lenf(t, d.Spec.Selector.MatchLabels, 1, "%s: a single-label selector", d.Name)
	for k, v := range d.Spec.Selector.MatchLabels {
		return k + "=" + v
	}
	return ""
}

func podsOf(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, cp.Client.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)))
	return pods.Items
}

func allNodes(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane) map[string]*corev1.Node {
	t.Helper()
	var list corev1.NodeList
	require.NoError(t, cp.Client.List(ctx, &list))
	out := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// checkSpread checks every topology spread constraint of the pod template
// the way the kube-scheduler counts: the domains are the topology values of
// all nodes the pods could run on (taints are ignored, as the default
// nodeTaintsPolicy does), including domains that hold none of the pods.
func checkSpread(t *testing.T, d *appsv1.Deployment, pods []corev1.Pod, nodes map[string]*corev1.Node) {
	tsc := d.Spec.Template.Spec.TopologySpreadConstraints
	require.NotEmptyf(t, tsc, "%s has no topology spread constraints", d.Name)
	for _, c := range tsc {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		require.NoError(t, err)
		counts := map[string]int{}
		for _, n := range nodes {
			if v, ok := n.Labels[c.TopologyKey]; ok && podFitsNodeSelection(d.Spec.Template.Spec, n) {
				counts[v] += 0
			}
		}
		for _, p := range pods {
			if !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			v, ok := nodes[p.Spec.NodeName].Labels[c.TopologyKey]
			require.Truef(t, ok, "%s: node %s has no %s", d.Name, p.Spec.NodeName, c.TopologyKey)
			counts[v]++
		}
		lo, hi := len(pods), 0
		for _, n := range counts {
			lo, hi = min(lo, n), max(hi, n)
		}
		t.Logf("%s: %s over %d domains: min %d, max %d (maxSkew %d)", d.Name, c.TopologyKey, len(counts), lo, hi, c.MaxSkew)
		require.LessOrEqualf(t, hi-lo, int(c.MaxSkew), "%s: %s skew %d exceeds maxSkew %d: %v", d.Name, c.TopologyKey, hi-lo, c.MaxSkew, counts)
		if c.TopologyKey == corev1.LabelTopologyZone {
			require.Greaterf(t, len(counts), 1, "%s: a zone spread should get more than one zone: %v", d.Name, counts)
		}
	}
}

// podFitsNodeSelection reports whether the pod's nodeSelector admits the
// node (the upstream spread workloads use no node affinity).
func podFitsNodeSelection(spec corev1.PodSpec, n *corev1.Node) bool {
	for k, v := range spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	return true
}

// logArchitectures reports where the prefer-arm pods went. The preference
// is soft: the kube-scheduler may use spare amd64 room before Karpenter
// sees the pods, so only the outcome is logged.
func logArchitectures(t *testing.T, d *appsv1.Deployment, pods []corev1.Pod, nodes map[string]*corev1.Node) {
	arches := map[string]int{}
	for _, p := range pods {
		arches[nodes[p.Spec.NodeName].Labels[corev1.LabelArchStable]]++
	}
	t.Logf("%s: pods by architecture: %v", d.Name, arches)
}
