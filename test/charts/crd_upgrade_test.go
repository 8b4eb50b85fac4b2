package charts_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// upstreamCRDChartVersion is the upstream release whose karpenter-crd chart
// the upgrade starts from (read from the module cache, test input only).
const upstreamCRDChartVersion = "v1.14.3"

func upstreamCRDChart(t *testing.T) string {
	t.Helper()
	module := "github.com/aws/karpenter-provider-aws@" + upstreamCRDChartVersion
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = filepath.Join(repoRoot(t), "hack", "anchors")
	out, _ := cmd.Output()
	var m struct{ Dir, Error, Zip string }
	_ = json.Unmarshal(out, &m)
	dir := m.Dir
	if dir == "" && m.Zip != "" {
		// The module is downloaded and verified (Zip), but this Go is
		// older than its go directive, so go reports no Dir: the
		// extracted copy is where the module cache always puts it.
		cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err == nil {
			dir = filepath.Join(strings.TrimSpace(string(cache)), module)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "karpenter-crd", "Chart.yaml")); dir == "" || err != nil {
		t.Fatalf("locating upstream's karpenter-crd chart in the module cache: %s %s", m.Error, out)
	}
	return filepath.Join(dir, "charts", "karpenter-crd")
}

// upstreamObjects are one object of every kind upstream's CRD chart
// serves, as a user would have written them against upstream.
const upstreamObjects = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: test}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: test}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits:
    cpu: "100"
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: savings-plan
spec:
  weight: 10
  priceAdjustment: "-20%"
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata:
  name: warm
  namespace: default
spec:
  podTemplateRef: {name: chunk}
  replicas: 3
`

// helmConfig is a Helm SDK configuration against the control plane,
// storing releases in kube-system.
func helmConfig(t *testing.T, cp *controlplane.ControlPlane) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := cp.KubeconfigPath, "kube-system"
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(format string, v ...any) { t.Logf(format, v...) }); err != nil {
		t.Fatalf("helm configuration: %v", err)
	}
	return cfg
}

// TestCRDChartUpgradeFromUpstream installs upstream's karpenter-crd chart
// with the Helm Go SDK, stores one object of each of its kinds, and
// upgrades the release to ours: every CRD upstream's chart installed is
// still there (a CRD our chart lacked would be deleted by the upgrade, and
// every object of it with it), and so is every object.
func TestCRDChartUpgradeFromUpstream(t *testing.T) {
	ctx, cp, _, ours := chartCluster(t)
	cfg := helmConfig(t, cp)

	upstream, err := loader.Load(upstreamCRDChart(t))
	if err != nil {
		t.Fatalf("loading upstream's chart: %v", err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Wait = "karpenter-crd", "kube-system", false
	rel, err := install.RunWithContext(ctx, upstream, map[string]any{})
	if err != nil {
		t.Fatalf("installing upstream's karpenter-crd %s: %v", upstreamCRDChartVersion, err)
	}
	var upstreamCRDs []string
	for _, doc := range documents(t, rel.Manifest) {
		if doc.GetKind() == "CustomResourceDefinition" {
			upstreamCRDs = append(upstreamCRDs, doc.GetName())
			establishedCRD(ctx, t, cp, doc.GetName())
		}
	}
	if len(upstreamCRDs) < 5 {
		t.Fatalf("upstream's chart installed %d CRDs (%v), want its 5", len(upstreamCRDs), upstreamCRDs)
	}

	objs := documents(t, upstreamObjects)
	for _, o := range objs {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s under upstream's CRDs: %v", o.GetKind(), o.GetName(), err)
		}
	}

	chart, err := loader.Load(chartDir(t, "karpenter-crd"))
	if err != nil {
		t.Fatalf("loading our chart: %v", err)
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = "kube-system"
	if _, err := upgrade.RunWithContext(ctx, "karpenter-crd", chart, map[string]any{}); err != nil {
		t.Fatalf("upgrading to our karpenter-crd: %v", err)
	}

	for _, name := range upstreamCRDs {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Errorf("CRD %s after the upgrade: %v", name, err)
			continue
		}
		if !got.DeletionTimestamp.IsZero() {
			t.Errorf("CRD %s is being deleted after the upgrade", name)
		}
		if got.Annotations["meta.helm.sh/release-name"] != "karpenter-crd" {
			t.Errorf("CRD %s is no longer the release's: annotations %v", name, got.Annotations)
		}
	}
	for _, crd := range ours {
		establishedCRD(ctx, t, cp, crd.Name)
	}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s %s after the upgrade: %v", o.GetKind(), o.GetName(), err)
		}
	}
}
