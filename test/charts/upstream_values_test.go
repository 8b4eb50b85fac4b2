package charts_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// upstreamValuesFile is upstream's values.yaml for the chart version ours
// follows, read from the module cache (test input only). hack/anchors pins
// the upstream module, so its go.sum verifies what is read.
func upstreamValuesFile(t testing.TB) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/aws/karpenter-provider-aws")
	cmd.Dir = filepath.Join(repoRoot(t), "hack", "anchors")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locating upstream's chart in the module cache: %v\n%s", err, out)
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download: %v %s %s", err, m.Error, out)
	}
	return filepath.Join(m.Dir, "charts", "karpenter", "values.yaml")
}

func readValues(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// mergeValues layers values the way helm layers -f files and --set: maps
// merge key by key, anything else in a later layer replaces the earlier.
func mergeValues(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		for k, v := range l {
			if vm, ok := v.(map[string]any); ok {
				if om, ok := out[k].(map[string]any); ok {
					out[k] = mergeValues(om, vm)
					continue
				}
			}
			out[k] = v
		}
	}
	return out
}

// sdkRender renders the karpenter chart in-process with the Helm SDK, as
// `helm install karpenter -n karpenter` with the given user values would:
// the templates' output by file name (NOTES.txt included).
func sdkRender(t testing.TB, user map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir(t, "karpenter"))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, user, chartutil.ReleaseOptions{Name: "karpenter", Namespace: "karpenter", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return engine.Render(ch, vals)
}

// sdkDeployment is the rendered controller Deployment.
func sdkDeployment(t testing.TB, out map[string]string) *appsv1.Deployment {
	t.Helper()
	return deployment(t, documents(t, out["karpenter/templates/deployment.yaml"]), "karpenter")
}

// hardened: the controller container is non-root with a read-only root, no
// escalation and no capabilities, and carries no field the API server
// refuses (an AppArmor profile without a type).
func hardened(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("controller securityContext is not the hardened default: %+v", sc)
		return
	}
	if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == "" {
		t.Errorf("appArmorProfile without a type: %+v", sc.AppArmorProfile)
	}
	if sc.SELinuxOptions != nil && *sc.SELinuxOptions == (corev1.SELinuxOptions{}) {
		t.Errorf("empty seLinuxOptions rendered")
	}
}

// upstreamCases are upstream's default values file (with the clusterName
// every install command sets) and three typical user files, each with
// what it must render.
func upstreamCases(t *testing.T) []struct {
	name  string
	files []string
	set   map[string]any
	check func(t *testing.T, d *appsv1.Deployment, out map[string]string)
} {
	users := filepath.Join("testdata", "upstream-users")
	return []struct {
		name  string
		files []string
		set   map[string]any
		check func(t *testing.T, d *appsv1.Deployment, out map[string]string)
	}{
		{"upstream defaults", []string{upstreamValuesFile(t)}, map[string]any{"settings": map[string]any{"clusterName": "demo"}},
			func(t *testing.T, d *appsv1.Deployment, out map[string]string) {
				c := d.Spec.Template.Spec.Containers[0]
				if !strings.HasPrefix(c.Image, "public.ecr.aws/karpenter/controller:") {
					t.Errorf("image %s: upstream's file pins upstream's image", c.Image)
				}
				if notes := out["karpenter/templates/NOTES.txt"]; !strings.Contains(notes, "WARNING") || !strings.Contains(notes, "upstream Karpenter's image") {
					t.Errorf("NOTES do not warn of upstream's image:\n%s", notes)
				}
			}},
		{"IRSA", []string{filepath.Join(users, "irsa.yaml")}, nil,
			func(t *testing.T, d *appsv1.Deployment, out map[string]string) {
				pod := d.Spec.Template.Spec
				token := corev1.VolumeMount{Name: "aws-iam-token", MountPath: "/var/run/secrets/eks.amazonaws.com/serviceaccount", ReadOnly: true}
				if len(pod.Containers) != 2 || !reflect.DeepEqual(pod.Containers[0].VolumeMounts, []corev1.VolumeMount{token}) ||
					!reflect.DeepEqual(pod.Containers[1].VolumeMounts, []corev1.VolumeMount{token, {Name: "shipper-state", MountPath: "/state"}}) {
					t.Errorf("extraVolumeMounts on the controller and (then sidecarVolumeMounts) on the sidecar: %+v", pod.Containers)
				}
				sa := find(t, documents(t, out["karpenter/templates/serviceaccount.yaml"]), "ServiceAccount", "karpenter")
				if sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/KarpenterControllerRole-demo" {
					t.Errorf("ServiceAccount annotations %v", sa.GetAnnotations())
				}
				if strings.Contains(out["karpenter/templates/NOTES.txt"], "WARNING") {
					t.Errorf("NOTES warn of upstream's image for ours:\n%s", out["karpenter/templates/NOTES.txt"])
				}
			}},
		{"Pod Identity", []string{filepath.Join(users, "pod-identity.yaml")}, nil,
			func(t *testing.T, d *appsv1.Deployment, out map[string]string) {
				env, _ := controllerEnv(t, d)
				if env["CLUSTER_NAME"] != "demo" || env["INTERRUPTION_QUEUE"] != "Karpenter-demo" || env["AWS_REGION"] != "eu-west-1" {
					t.Errorf("tpl on settings, controller.env: %v", env)
				}
				if sc := d.Spec.Template.Spec.Containers[0].SecurityContext; sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || sc.AppArmorProfile != nil {
					t.Errorf("securityContext %+v", sc)
				}
			}},
		{"resources and tolerations", []string{filepath.Join(users, "resources-tolerations.yaml")}, nil,
			func(t *testing.T, d *appsv1.Deployment, out map[string]string) {
				pod := d.Spec.Template.Spec
				res := pod.Containers[0].Resources
				env, _ := controllerEnv(t, d)
				if *d.Spec.Replicas != 1 || pod.PriorityClassName != "platform-critical" || len(pod.Tolerations) != 2 || pod.NodeSelector["node-group"] != "system" ||
					res.Requests.Cpu().String() != "500m" || res.Limits.Memory().String() != "512Mi" || env["LOG_LEVEL"] != "debug" ||
					d.Spec.Template.Annotations["example.com/owner"] != "platform" {
					t.Errorf("pod %+v, env %v", pod, env)
				}
			}},
	}
}

// TestUpstreamValuesRender: the chart renders upstream's default values
// file and three typical user files unchanged, with the Helm SDK, into a
// hardened controller that honours each file; without a clusterName the
// render fails and says which value to set.
func TestUpstreamValuesRender(t *testing.T) {
	for _, tc := range upstreamCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			var layers []map[string]any
			for _, f := range tc.files {
				layers = append(layers, readValues(t, f))
			}
			out, err := sdkRender(t, mergeValues(append(layers, tc.set)...))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			d := sdkDeployment(t, out)
			hardened(t, d.Spec.Template.Spec.Containers[0])
			if env, _ := controllerEnv(t, d); env["CLOUD_PROVIDER"] != "aws" || env["CLUSTER_NAME"] != "demo" {
				t.Errorf("env %v", env)
			}
			tc.check(t, d, out)
		})
	}
	t.Run("securityContext fields replace the default's", func(t *testing.T) {
		out, err := sdkRender(t, map[string]any{
			"settings": map[string]any{"clusterName": "demo"},
			"controller": map[string]any{"securityContext": map[string]any{
				"readOnlyRootFilesystem": false,
				"appArmorProfile":        map[string]any{"type": "Localhost", "localhostProfile": "karpenter"},
				"seLinuxOptions":         map[string]any{},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		sc := sdkDeployment(t, out).Spec.Template.Spec.Containers[0].SecurityContext
		if sc.ReadOnlyRootFilesystem == nil || *sc.ReadOnlyRootFilesystem || sc.AppArmorProfile == nil || *sc.AppArmorProfile.LocalhostProfile != "karpenter" ||
			sc.SELinuxOptions != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("securityContext %+v", sc)
		}
	})
	t.Run("without clusterName", func(t *testing.T) {
		_, err := sdkRender(t, readValues(t, upstreamValuesFile(t)))
		if err == nil || !strings.Contains(err.Error(), "settings.clusterName is required") {
			t.Errorf("rendering upstream's defaults without a clusterName: %v", err)
		}
		// The kwok provider needs no cluster name.
		if _, err := sdkRender(t, map[string]any{"kwok": map[string]any{"enabled": true}}); err != nil {
			t.Errorf("kwok without a clusterName: %v", err)
		}
	})
}

// TestUpstreamValuesKeys: every key of upstream's values.yaml is a key of
// ours, and none is ignored: changing its value (a flipped bool, a
// different number or string, an entry in an empty map or list, an empty
// list for a full one) changes what the chart renders.
func TestUpstreamValuesKeys(t *testing.T) {
	upstream := readValues(t, upstreamValuesFile(t))
	ours := readValues(t, filepath.Join(chartDir(t, "karpenter"), "values.yaml"))
	// serviceMonitor's keys matter only with the ServiceMonitor rendered,
	// sidecarVolumeMounts only with a sidecar.
	base := map[string]any{
		"settings":       map[string]any{"clusterName": "demo"},
		"serviceMonitor": map[string]any{"enabled": true},
		"controller":     map[string]any{"sidecarContainer": []any{map[string]any{"name": "sidecar", "image": "sidecar:1"}}},
	}
	want, err := sdkRender(t, base)
	if err != nil {
		t.Fatal(err)
	}
	var paths [][]string
	var walk func(prefix []string, m map[string]any)
	walk = func(prefix []string, m map[string]any) {
		for k, v := range m {
			p := append(slices.Clone(prefix), k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p, sub)
				continue
			}
			paths = append(paths, p)
		}
	}
	walk(nil, upstream)
	sort.Slice(paths, func(i, j int) bool { return strings.Join(paths[i], ".") < strings.Join(paths[j], ".") })
	if len(paths) < 60 {
		t.Fatalf("only %d keys in upstream's values", len(paths))
	}
	for _, p := range paths {
		key := strings.Join(p, ".")
		v, ok := lookup(ours, p)
		if !ok {
			t.Errorf("%s: not a value of our chart", key)
			continue
		}
		if key == "serviceMonitor.enabled" {
			continue // the base turns it on; TestTemplateServiceMonitor covers off
		}
		changed := map[string]any{}
		setPath(changed, p, perturb(v))
		got, err := sdkRender(t, mergeValues(base, changed))
		if err != nil {
			// Refusing a value (a bad port, say) is not ignoring it.
			continue
		}
		if reflect.DeepEqual(got, want) {
			t.Errorf("%s: changing it to %v changes nothing the chart renders", key, perturb(v))
		}
	}
}

func lookup(m map[string]any, p []string) (any, bool) {
	v, ok := m[p[0]]
	if !ok || len(p) == 1 {
		return v, ok
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	return lookup(sub, p[1:])
}

func setPath(m map[string]any, p []string, v any) {
	for _, k := range p[:len(p)-1] {
		sub, ok := m[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	m[p[len(p)-1]] = v
}

// perturb is a different value of v's kind.
func perturb(v any) any {
	switch v := v.(type) {
	case bool:
		return !v
	case float64:
		return v + 7
	case string:
		if v == "" {
			return "x-value"
		}
		return v + "x"
	case map[string]any:
		return map[string]any{"x-key": "x-value"}
	case []any:
		if len(v) == 0 {
			return []any{map[string]any{"name": "x-value"}}
		}
		return []any{}
	default: // null
		return float64(42)
	}
}

// TestUpstreamValuesInstall installs each of the four renderings on the
// local control plane (the API server validates every object: upstream's
// securityContext block was refused before the merge), then runs the
// controller from the image with upstream's default values file.
func TestUpstreamValuesInstall(t *testing.T) {
	ctx, cp, kube, _ := chartCluster(t)
	const ns = "karpenter"
	var valueArgs []string
	for i, tc := range upstreamCases(t) {
		args := []string{"upgrade", "--install", "karpenter", chartDir(t, "karpenter"), "--namespace", ns, "--create-namespace"}
		for _, f := range tc.files {
			args = append(args, "-f", f)
		}
		if tc.set != nil {
			args = append(args, "--set", "settings.clusterName=demo")
		}
		if i == 0 {
			valueArgs = args[7:]
		}
		if _, err := helmErr(t, kube, args...); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		d := &appsv1.Deployment{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "karpenter"}, d); err != nil {
			t.Fatal(err)
		}
		hardened(t, d.Spec.Template.Spec.Containers[0])
	}
	if t.Failed() {
		return
	}
	// The AWS provider needs AWS (TestServiceAccountCycleAWS runs it on the
	// local AWS); here upstream's values file runs the kwok provider, its
	// other values unchanged.
	values := append(valueArgs, "--set", "kwok.enabled=true")
	helm(t, kube, append([]string{"upgrade", "karpenter", chartDir(t, "karpenter"), "--namespace", ns}, values...)...)
	rootfs, img := hostRootfs(t)
	logPath := startController(ctx, t, cp, ns, values, nil, &imageRun{rootfs: rootfs, image: img})
	time.Sleep(3 * time.Second)
	noForbidden(t, logPath)
}
