package charts_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/karpenter-go/karpenter/pkg/apis"
)

// TestChartCRDsAreTheGeneratedOnes: charts/karpenter/crds holds exactly the
// files of pkg/apis/crds, byte for byte (make generate copies them; this is
// the same check make verify makes, as a test).
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root := repoRoot(t)
	src := yamlFiles(t, filepath.Join(root, "pkg", "apis", "crds"))
	dst := yamlFiles(t, filepath.Join(root, "charts", "karpenter", "crds"))
	if !slices.Equal(src, dst) {
		t.Fatalf("charts/karpenter/crds has %v, pkg/apis/crds has %v: run make generate", dst, src)
	}
	for _, name := range src {
		a, err := os.ReadFile(filepath.Join(root, "pkg", "apis", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, "charts", "karpenter", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/karpenter/crds/%s differs from pkg/apis/crds: run make generate", name)
		}
	}
}

// TestCRDChartRendersTheGeneratedCRDs: the karpenter-crd chart renders the
// embedded CRDs unchanged, plus additionalAnnotations on each.
func TestCRDChartRendersTheGeneratedCRDs(t *testing.T) {
	want, err := apis.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		extra map[string]string
	}{
		{"defaults", nil, nil},
		{"annotations", []string{"--set", `additionalAnnotations.helm\.sh/resource-policy=keep`, "--set", "additionalAnnotations.team=infra"},
			map[string]string{"helm.sh/resource-policy": "keep", "team": "infra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := helm(t, nil, append([]string{"template", "karpenter-crd", chartDir(t, "karpenter-crd")}, tc.args...)...)
			objs := documents(t, out)
			if len(objs) != len(want) {
				t.Fatalf("rendered %d objects (%s), want the %d CRDs", len(objs), names(objs), len(want))
			}
			for _, w := range want {
				got := &apiextensionsv1.CustomResourceDefinition{}
				typed(t, find(t, objs, "CustomResourceDefinition", w.Name), got)
				for k, v := range tc.extra {
					if got.Annotations[k] != v {
						t.Errorf("%s: annotation %s=%q, want %q", w.Name, k, got.Annotations[k], v)
					}
					delete(got.Annotations, k)
				}
				w := w.DeepCopy()
				w.TypeMeta = got.TypeMeta
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s rendered by the chart differs from pkg/apis/crds", w.Name)
				}
			}
		})
	}
}

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range m {
		out = append(out, filepath.Base(f))
	}
	slices.Sort(out)
	return out
}
