package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestManifest packages the host's platform and checks the manifest as
// krew would use it: the archive at the URI's file name has the sha256
// the manifest names, holds the bin and the license, and the bin runs
// (as kubectl runs a plugin) and answers --help with exit 0.
func TestManifest(t *testing.T) {
	out := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	if err := run(root, out, "v0.0.0-test", "https://example.com/releases/v0.0.0-test/", []string{platform}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "karpenter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "karpenter" || m.Spec.Version != "v0.0.0-test" || len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest:\n%s", b)
	}
	p := m.Spec.Platforms[0]
	if p.Selector.MatchLabels["os"] != runtime.GOOS || p.Selector.MatchLabels["arch"] != runtime.GOARCH || p.Bin != binName {
		t.Errorf("platform %+v", p)
	}
	name, ok := strings.CutPrefix(p.URI, "https://example.com/releases/v0.0.0-test/")
	if !ok {
		t.Fatalf("uri %s", p.URI)
	}
	archive, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != p.Sha256 {
		t.Errorf("sha256 of %s differs from the manifest's", name)
	}
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	dir := t.TempDir()
	got := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = true
		if err := os.WriteFile(filepath.Join(dir, h.Name), data, os.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range p.Files {
		if !got[f.From] {
			t.Errorf("the archive lacks %s", f.From)
		}
	}
	cmd := exec.Command(filepath.Join(dir, p.Bin), "--help")
	help, err := cmd.Output()
	if err != nil || !strings.Contains(string(help), "usage: karpenter") {
		t.Errorf("%s --help: %v\n%s", p.Bin, err, help)
	}
	// Same commit, same checksum: a re-run must not invalidate a
	// published manifest.
	again := t.TempDir()
	if err := run(root, again, "v0.0.0-test", "https://example.com/releases/v0.0.0-test/", []string{platform}); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join(again, "karpenter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Errorf("two runs gave different manifests:\n%s\n%s", b, b2)
	}
}
