package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const crd = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.23.0
  name: things.example.com
spec:
  group: example.com
`

func TestTemplate(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{name: "hook after the annotations", in: crd, want: `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    controller-gen.kubebuilder.io/version: v0.23.0
` + annotationsHook + `  name: things.example.com
spec:
  group: example.com
`},
		{name: "template delimiters refused", in: strings.Replace(crd, "group: example.com", "description: '{{ x }}'", 1), err: "{{"},
		{name: "no annotations block", in: strings.Replace(crd, "  annotations:\n    controller-gen.kubebuilder.io/version: v0.23.0\n", "", 1), err: "no metadata.annotations"},
		{name: "annotations key elsewhere ignored", in: strings.Replace(crd, "spec:\n", "spec:\n  annotations:\n", 1) + "  x: y\n",
			want: strings.Replace(strings.Replace(crd, "  name: things", annotationsHook+"  name: things", 1), "spec:\n", "spec:\n  annotations:\n", 1) + "  x: y\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Template([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestRunCopiesAndPrunes: both destinations get every CRD, and a CRD the API
// no longer has leaves them.
func TestRunCopiesAndPrunes(t *testing.T) {
	src, plain, tmpl := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(dir, name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src, "a.yaml", crd)
	write(plain, "gone.yaml", crd)
	write(tmpl, "gone.yaml", crd)
	write(tmpl, "_helpers.tpl", "kept")
	if err := run(src, plain, tmpl); err != nil {
		t.Fatal(err)
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(filepath.Join(plain, "a.yaml")); got != crd {
		t.Errorf("plain copy differs:\n%s", got)
	}
	if got := read(filepath.Join(tmpl, "a.yaml")); !strings.Contains(got, annotationsHook) {
		t.Errorf("templated copy lacks the hook:\n%s", got)
	}
	for _, p := range []string{filepath.Join(plain, "gone.yaml"), filepath.Join(tmpl, "gone.yaml")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s not pruned (%v)", p, err)
		}
	}
	if read(filepath.Join(tmpl, "_helpers.tpl")) != "kept" {
		t.Error("non-YAML file in the templates dir touched")
	}
	if err := run(t.TempDir(), plain, tmpl); err == nil {
		t.Error("an empty source dir must be an error, not an emptied chart")
	}
}
