package charts_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The OCI image layout hack/image writes, as far as the tests read it.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
}

type ociIndex struct {
	MediaType   string            `json:"mediaType"`
	Manifests   []ociDescriptor   `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// ociImage is one platform's image of a layout.
type ociImage struct {
	platform ociPlatform
	manifest ociManifest
	config   ociConfig
}

const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// buildImage runs `make image`'s command into dir and returns the digest it
// reports.
func buildImage(t testing.TB, dir string) string {
	t.Helper()
	digest, err := buildImageErr(repoRoot(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

func buildImageErr(root, dir string) (string, error) {
	cmd := exec.Command("go", "run", "-C", filepath.Join(root, "hack", "image"), ".", "-root", root, "-out", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the image: %w\n%s", err, stderr.String())
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || !strings.HasPrefix(f[1], "sha256:") {
		return "", fmt.Errorf("hack/image printed %q, want the layout and its digest", out)
	}
	return f[1], nil
}

// blob reads a blob of the layout, checking its digest.
func blob(t testing.TB, dir string, d ociDescriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: content does not match its descriptor", d.Digest)
	}
	return b
}

func decodeJSON(t testing.TB, b []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// readLayout returns the layout's top index entry (the image index) and
// its images by architecture.
func readLayout(t testing.TB, dir string) (ociDescriptor, map[string]ociImage) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top ociIndex
	decodeJSON(t, b, &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != ociIndexType {
		t.Fatalf("index.json: want one image index, got %+v", top.Manifests)
	}
	var idx ociIndex
	decodeJSON(t, blob(t, dir, top.Manifests[0]), &idx)
	images := map[string]ociImage{}
	for _, m := range idx.Manifests {
		if m.MediaType != ociManifestType || m.Platform == nil {
			t.Fatalf("image index entry %+v: want an OCI manifest with a platform", m)
		}
		img := ociImage{platform: *m.Platform}
		decodeJSON(t, blob(t, dir, m), &img.manifest)
		decodeJSON(t, blob(t, dir, img.manifest.Config), &img.config)
		images[m.Platform.Architecture] = img
	}
	return top.Manifests[0], images
}

// unpack extracts an image's layers into a new directory, in order, the way
// a container runtime lays out its root filesystem, and returns it.
func unpack(t testing.TB, dir string, img ociImage) string {
	t.Helper()
	rootfs := filepath.Join(t.TempDir(), "rootfs-"+img.platform.Architecture)
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range img.manifest.Layers {
		if l.MediaType != ociLayerType {
			t.Fatalf("layer %s has media type %s, want %s", l.Digest, l.MediaType, ociLayerType)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob(t, dir, l)))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(rootfs, filepath.FromSlash(h.Name))
			if !strings.HasPrefix(name, rootfs+string(filepath.Separator)) {
				t.Fatalf("layer entry %q escapes the root", h.Name)
			}
			mode := os.FileMode(h.Mode & 0o777)
			if h.Mode&0o1000 != 0 {
				mode |= os.ModeSticky
			}
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(name, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, data, 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("layer entry %q: unexpected type %c", h.Name, h.Typeflag)
			}
			// Owner and mode as the layer says (chown needs root; the
			// sandbox that relies on them runs only as root).
			if os.Geteuid() == 0 {
				if err := os.Lchown(name, h.Uid, h.Gid); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(name, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rootfs
}

// builtImage is the image hack/image builds from the work tree, built once
// per test binary: the image test and the upstream values test both run
// the controller from it.
// TestMain removes its directory.
var builtImage struct {
	once   sync.Once
	tmp    string
	dir    string
	digest string
	err    error
}

func theImage(t testing.TB) (dir, digest string) {
	t.Helper()
	builtImage.once.Do(func() {
		if builtImage.tmp, builtImage.err = os.MkdirTemp("", "karpenter-image-test-"); builtImage.err != nil {
			return
		}
		builtImage.dir = filepath.Join(builtImage.tmp, "image")
		builtImage.digest, builtImage.err = buildImageErr(repoRoot(t), builtImage.dir)
	})
	if builtImage.err != nil {
		t.Fatal(builtImage.err)
	}
	return builtImage.dir, builtImage.digest
}

// hostRootfs is the unpacked image of the machine's architecture.
func hostRootfs(t testing.TB) (string, ociImage) {
	t.Helper()
	dir, _ := theImage(t)
	_, images := readLayout(t, dir)
	img, ok := images[runtime.GOARCH]
	if !ok {
		t.Fatalf("the image has no %s variant", runtime.GOARCH)
	}
	return unpack(t, dir, img), img
}

// TestImage: `make image` gives the same digest twice; the layout holds an
// amd64 and an arm64 image of the controller, each a static binary of its
// architecture at /controller, run as 65532:65532, on a base with the
// nonroot user, CA roots and time zones; and the host's image runs the
// controller, as the chart's ServiceAccount, as the user and with the
// read-only root filesystem the chart's securityContext asks for.
func TestImage(t *testing.T) {
	dir, digest := theImage(t)
	if again := buildImage(t, filepath.Join(t.TempDir(), "again")); again != digest {
		t.Errorf("two builds of one tree: %s, then %s", digest, again)
	}
	top, images := readLayout(t, dir)
	if d := "sha256:" + strings.TrimPrefix(digest, "sha256:"); top.Digest != d {
		t.Errorf("index.json points at %s, hack/image reported %s", top.Digest, d)
	}
	version := appVersion(t)
	if got := top.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("the layout names the image %q, want the chart's appVersion %q", got, version)
	}
	arches := []string{}
	for a := range images {
		arches = append(arches, a)
	}
	slices.Sort(arches)
	if !slices.Equal(arches, []string{"amd64", "arm64"}) {
		t.Fatalf("architectures %v, want amd64 and arm64", arches)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, arch := range arches {
		img := images[arch]
		t.Run(arch, func(t *testing.T) {
			c := img.config
			if c.OS != "linux" || c.Architecture != arch || img.platform.OS != "linux" {
				t.Errorf("config platform %s/%s, index platform %+v", c.OS, c.Architecture, img.platform)
			}
			if c.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532 (nonroot)", c.Config.User)
			}
			if !slices.Equal(c.Config.Entrypoint, []string{"/controller"}) {
				t.Errorf("entrypoint %q, want [/controller]", c.Config.Entrypoint)
			}
			if c.Config.Labels["org.opencontainers.image.version"] != version || c.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
				t.Errorf("labels %v", c.Config.Labels)
			}
			if len(c.RootFS.DiffIDs) != len(img.manifest.Layers) || len(img.manifest.Layers) != 2 {
				t.Errorf("%d layers, %d diff IDs: want the base and the binary", len(img.manifest.Layers), len(c.RootFS.DiffIDs))
			}
			rootfs := unpack(t, dir, img)
			checkBinary(t, filepath.Join(rootfs, "controller"), machines[arch])
			checkBase(t, rootfs)
		})
	}
	if t.Failed() {
		return
	}
	t.Run("runs on the control plane as the chart says", func(t *testing.T) {
		rootfs, img := hostRootfs(t)
		ctx, cp, kube, _ := chartCluster(t)
		const ns = "karpenter"
		values := []string{"--set", "kwok.enabled=true"}
		helm(t, kube, append([]string{"install", "karpenter", chartDir(t, "karpenter"), "--namespace", ns, "--create-namespace"}, values...)...)
		logPath := startController(ctx, t, cp, ns, values, nil, &imageRun{rootfs: rootfs, image: img})
		time.Sleep(3 * time.Second)
		noForbidden(t, logPath)
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		commit := img.config.Config.Labels["org.opencontainers.image.revision"]
		if first := strings.SplitN(string(b), "\n", 2)[0]; !strings.Contains(first, `"version":"`+version+`"`) || commit == "" || !strings.Contains(first, `"commit":"`+commit+`"`) {
			t.Errorf("the first log line does not name version %s and commit %s: %s", version, commit, first)
		}
	})
}

// checkBinary: the controller is a static ELF executable of the machine.
func checkBinary(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("/controller mode %v", st.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("/controller: %v", err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("/controller is a %v %v, want an executable for %v", f.Machine, f.Type, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("/controller is dynamically linked: no loader in a distroless base")
		}
	}
}

// checkBase: what distroless/static's nonroot variant gives a program.
func checkBase(t *testing.T, rootfs string) {
	t.Helper()
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(rootfs, rel))
		if err != nil {
			t.Error(err)
		}
		return b
	}
	if passwd := string(read("etc/passwd")); !strings.Contains(passwd, "\nnonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", passwd)
	}
	if group := string(read("etc/group")); !strings.Contains(group, "\nnonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot 65532:\n%s", group)
	}
	pool, n, rest := x509.NewCertPool(), 0, read("etc/ssl/certs/ca-certificates.crt")
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("CA bundle: %v", err)
		}
		if !c.IsCA {
			t.Errorf("CA bundle holds %s, not a CA", c.Subject)
		}
		pool.AddCert(c)
		n++
	}
	if n < 100 || len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("CA bundle: %d certificates, %d bytes left over", n, len(rest))
	}
	if _, err := time.LoadLocationFromTZData("Europe/Berlin", read("usr/share/zoneinfo/Europe/Berlin")); err != nil {
		t.Errorf("zoneinfo: %v", err)
	}
	if st, err := os.Stat(filepath.Join(rootfs, "tmp")); err != nil || st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v, want 1777", st.Mode(), err)
	}
	if len(read("usr/share/doc/karpenter-go/LICENSE")) < 10000 {
		t.Error("the license is missing from the image")
	}
}

// appVersion is the chart's appVersion, the tag the image is named by.
func appVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t, "karpenter"), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "appVersion:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	t.Fatal("no appVersion in Chart.yaml")
	return ""
}
