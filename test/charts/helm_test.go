package charts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// repoRoot is the module root: go test runs in test/charts.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	return root
}

func chartDir(t testing.TB, name string) string {
	return filepath.Join(repoRoot(t), "charts", name)
}

// helmBin is bin/tools/helm (or $KARPENTER_TOOLS_DIR/helm): the pinned
// helm `make tools` builds, never one from $PATH.
func helmBin(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KARPENTER_TOOLS_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "bin", "tools")
	}
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("helm not found at %s (run `make tools`): %v", bin, err)
	}
	return bin
}

// helm runs the helm binary with its own config, cache and data
// directories, so nothing of the user's helm setup (repositories, plugins,
// registry logins) leaks into the test. It returns stdout; a non-zero exit
// fails the test with stderr.
func helm(t testing.TB, env []string, args ...string) string {
	t.Helper()
	out, err := helmErr(t, env, args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func helmErr(t testing.TB, env []string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// documents splits a rendered manifest into objects, dropping empty ones.
func documents(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding manifest: %v\n%s", err, manifest)
		}
		if s := strings.TrimSpace(string(raw)); s == "" || s == "null" || s == "{}" {
			continue
		}
		// Unstructured's own decoder keeps integers as int64, as the API
		// machinery expects.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("decoding object: %v\n%s", err, raw)
		}
		out = append(out, u)
	}
}

// find returns the one object of kind and name, failing when there is not
// exactly one.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var hits []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			hits = append(hits, o)
		}
	}
	if len(hits) != 1 {
		t.Fatalf("want one %s %q in the manifest, found %d (objects: %s)", kind, name, len(hits), names(objs))
	}
	return hits[0]
}

func names(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(s, ", ")
}

// typed converts u into out (a typed API object).
func typed(t testing.TB, u *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		b, _ := yaml.Marshal(u.Object)
		t.Fatalf("converting %s/%s to %T: %v\n%s", u.GetKind(), u.GetName(), out, err, b)
	}
}

func deployment(t testing.TB, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	typed(t, find(t, objs, "Deployment", name), d)
	return d
}

// controllerEnv is the controller container's environment: literal values
// by name, and the names set from the downward API.
func controllerEnv(t testing.TB, d *appsv1.Deployment) (literal map[string]string, fromField map[string]*corev1.EnvVarSource) {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "controller" {
			continue
		}
		literal, fromField = map[string]string{}, map[string]*corev1.EnvVarSource{}
		for _, e := range c.Env {
			if _, dup := literal[e.Name]; dup {
				t.Fatalf("env %s set twice", e.Name)
			}
			if _, dup := fromField[e.Name]; dup {
				t.Fatalf("env %s set twice", e.Name)
			}
			if e.ValueFrom != nil {
				fromField[e.Name] = e.ValueFrom
			} else {
				literal[e.Name] = e.Value
			}
		}
		return literal, fromField
	}
	t.Fatalf("no controller container in %s", d.Name)
	return nil, nil
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden (run with -update to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendering (run `go test ./test/charts -run %s -update` after checking the change):\n%s", path, t.Name(), diffLines(string(want), got))
	}
}

// diffLines lists the lines only in want (-) or only in got (+), in order:
// enough to see what changed in a manifest without a diff library.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i++
			j++
		case j < len(g) && (i >= len(w) || !contains(w[i:], g[j])):
			fmt.Fprintf(&b, "+ %s\n", g[j])
			j++
		default:
			fmt.Fprintf(&b, "- %s\n", w[i])
			i++
		}
	}
	return b.String()
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}
