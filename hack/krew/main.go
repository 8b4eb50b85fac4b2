// Command krew packages the CLI as the kubectl plugin kubectl-karpenter for
// krew: one tar.gz per platform (the binary and the license) and the
// plugin manifest naming each archive's URL and sha256, so that
// `kubectl krew install --manifest=karpenter.yaml` installs it once the
// archives are uploaded under -url. The manifest is generated rather than
// kept in the repository because its checksums are those of the archives
// built here.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

const binName = "kubectl-karpenter"

// manifest is krew's Plugin (krew.googlecontainertools.github.com/v1alpha2).
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	Sha256 string `json:"sha256"`
	Bin    string `json:"bin"`
	Files  []file `json:"files"`
}

type file struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func main() {
	root := flag.String("root", ".", "the repository")
	out := flag.String("out", "bin/krew", "directory for the archives and karpenter.yaml")
	version := flag.String("version", "", "the plugin's version, vX.Y.Z (required)")
	url := flag.String("url", "", "where the archives will be downloadable from, without the file name (required)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "GOOS/GOARCH list")
	flag.Parse()
	if err := run(*root, *out, *version, *url, strings.Split(*platforms, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
}

func run(root, out, version, url string, platforms []string) error {
	if !strings.HasPrefix(version, "v") || url == "" {
		return fmt.Errorf("-version vX.Y.Z and -url are required (got %q, %q)", version, url)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return fmt.Errorf("reading the license: %w", err)
	}
	m := manifest{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"}
	m.Metadata.Name = "karpenter"
	m.Spec.Version = version
	m.Spec.Homepage = "https://github.com/karpenter-go/karpenter"
	m.Spec.ShortDescription = "Explain a Karpenter cluster: pending pods, kept nodes, what-if edits"
	m.Spec.Description = "Read-only answers for a cluster autoscaled by Karpenter: NodePool status,\n" +
		"why a pod is pending or where it would run, why a node is kept, what a NodePool\n" +
		"or Deployment edit would do, and a redacted snapshot for bug reports.\n"
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q is not GOOS/GOARCH", p)
		}
		bin, err := build(root, goos, goarch)
		if err != nil {
			return err
		}
		archive, err := tarGz(map[string][]byte{binName: bin, "LICENSE": license})
		if err != nil {
			return fmt.Errorf("packaging %s: %w", p, err)
		}
		name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", binName, version, goos, goarch)
		if err := os.WriteFile(filepath.Join(out, name), archive, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
		sum := sha256.Sum256(archive)
		pl := platform{URI: strings.TrimSuffix(url, "/") + "/" + name, Sha256: hex.EncodeToString(sum[:]), Bin: binName,
			Files: []file{{From: binName, To: "."}, {From: "LICENSE", To: "."}}}
		pl.Selector.MatchLabels = map[string]string{"os": goos, "arch": goarch}
		m.Spec.Platforms = append(m.Spec.Platforms, pl)
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding the manifest: %w", err)
	}
	path := filepath.Join(out, "karpenter.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing the manifest: %w", err)
	}
	fmt.Println(path)
	return nil
}

// build compiles the CLI for one platform, static and without local paths.
func build(root, goos, goarch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "krew-build-")
	if err != nil {
		return nil, fmt.Errorf("creating a build directory: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, binName)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/karpenter")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building for %s/%s: %w\n%s", goos, goarch, err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	return b, nil
}

// tarGz archives files with fixed owners and times, so that one commit
// gives the same checksums on every machine.
func tarGz(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range []string{binName, "LICENSE"} {
		data, ok := files[name]
		if !ok {
			continue
		}
		mode := int64(0o644)
		if name == binName {
			mode = 0o755
		}
		h := &tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
