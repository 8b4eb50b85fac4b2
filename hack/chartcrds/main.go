// Command chartcrds copies the generated CRDs (pkg/apis/crds) into the Helm
// charts, so the charts never carry a hand-kept copy: verbatim into
// charts/karpenter/crds (Helm installs that directory before the templates)
// and, with an additionalAnnotations hook in metadata, into
// charts/karpenter-crd/templates. `make generate` runs it after crdpatch and
// `make verify` fails when the result differs from what is committed.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: chartcrds <crd-dir> <chart-crds-dir> <crd-chart-templates-dir>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "chartcrds:", err)
		os.Exit(1)
	}
}

// annotationsHook lets the karpenter-crd chart's additionalAnnotations reach
// every CRD's metadata.annotations, after controller-gen's own.
const annotationsHook = `  {{- with .Values.additionalAnnotations }}
    {{- toYaml . | nindent 4 }}
  {{- end }}
`

func run(src, plainDir, templatedDir string) error {
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil {
		return fmt.Errorf("listing %s: %w", src, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", src)
	}
	sort.Strings(files)
	want := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		want[name] = true
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		templated, err := Template(data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := writeIfChanged(filepath.Join(plainDir, name), data); err != nil {
			return err
		}
		if err := writeIfChanged(filepath.Join(templatedDir, name), templated); err != nil {
			return err
		}
	}
	// A CRD removed from the API must leave the charts too.
	for _, dir := range []string{plainDir, templatedDir} {
		old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, f := range old {
			if !want[filepath.Base(f)] {
				if err := os.Remove(f); err != nil {
					return fmt.Errorf("removing stale %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// Template returns crd with the annotations hook inserted at the end of its
// metadata.annotations block. The CRD must not contain template delimiters
// itself: Helm would try to render them.
func Template(crd []byte) ([]byte, error) {
	if bytes.Contains(crd, []byte("{{")) {
		return nil, errors.New("contains \"{{\", which Helm would render as a template")
	}
	lines := strings.SplitAfter(string(crd), "\n")
	inMeta, inAnn := false, false
	var out strings.Builder
	done := false
	for _, l := range lines {
		trimmed := strings.TrimRight(l, "\n")
		if !done {
			switch {
			case trimmed == "metadata:":
				inMeta = true
			case inMeta && trimmed == "  annotations:":
				inAnn = true
			case inAnn && !strings.HasPrefix(trimmed, "    "):
				// First line after the annotation entries.
				out.WriteString(annotationsHook)
				done = true
			case inMeta && !strings.HasPrefix(trimmed, " "):
				inMeta = false
			}
		}
		out.WriteString(l)
	}
	if !done {
		return nil, errors.New("no metadata.annotations block followed by another metadata field")
	}
	return []byte(out.String()), nil
}

func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
