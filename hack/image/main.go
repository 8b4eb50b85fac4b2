// Command image builds the controller's multi-platform OCI image without a
// container daemon, into an OCI image layout directory that `crane push`,
// `skopeo copy oci:` or `oras` can push to any registry.
//
// No base image can be pulled where this runs, so the base layer is
// assembled here from what distroless/static provides, each file from a
// pinned source so that the same commit gives the same digest on any
// machine:
//
//   - /etc/passwd and /etc/group with root, nonroot (65532) and nobody, and
//     /home/nonroot owned by 65532, as distroless's nonroot variant;
//   - /etc/ssl/certs/ca-certificates.crt: the Mozilla NSS roots of the
//     golang.org/x/crypto/x509roots/fallback module at the version go.sum
//     pins (the bundle Debian's ca-certificates package is made from); the
//     few roots NSS distrusts after a date are left out, since a PEM file
//     cannot carry that constraint;
//   - /usr/share/zoneinfo: the time zone database of the Go toolchain that
//     builds the binary ($GOROOT/lib/time/zoneinfo.zip);
//   - /etc/nsswitch.conf (hosts: files dns), /tmp (1777) and the license.
//
// On top, one layer per platform holds /controller: cmd/controller built
// with CGO_ENABLED=0 and -trimpath, the version and commit stamped in. Every
// tar entry has a fixed owner, mode and time (the commit's), the config's
// creation time is the commit's too, so two builds of one commit give the
// same digest.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
	"golang.org/x/sync/errgroup"
)

// The user the image runs as, distroless's nonroot, which the chart's
// securityContext also names.
const (
	nonrootUID = 65532
	nonrootGID = 65532
	entrypoint = "/controller"
	versionPkg = "github.com/karpenter-go/karpenter/pkg/operator"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "bin/image", "the OCI image layout directory to write (replaced)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch pairs")
	version := fs.String("version", "", "the version stamped into the binary and the image; empty means the chart's appVersion")
	commit := fs.String("commit", "", "the commit stamped into the binary; empty means git's HEAD (with -dirty for local changes)")
	rootFlag := fs.String("root", "", "the repository to build from; empty means the git work tree of the current directory")
	epoch := fs.Int64("epoch", -1, "the time (Unix seconds) of every file and of the config; -1 means HEAD's commit time, or $SOURCE_DATE_EPOCH when set")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := moduleRoot(*rootFlag)
	if err != nil {
		return err
	}
	if *version == "" {
		if *version, err = chartAppVersion(root); err != nil {
			return err
		}
	}
	if *commit == "" {
		if *commit, err = gitOutput(root, "describe", "--always", "--dirty", "--abbrev=40"); err != nil {
			return fmt.Errorf("finding the commit (pass -commit): %w", err)
		}
	}
	created, err := buildTime(root, *epoch)
	if err != nil {
		return err
	}
	var plats []v1.Platform
	for _, p := range strings.Split(*platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName != "linux" || arch == "" {
			return fmt.Errorf("platform %q: want linux/ARCH", p)
		}
		plats = append(plats, v1.Platform{OS: osName, Architecture: arch})
	}

	b := builder{root: root, version: *version, commit: *commit, created: created}
	base, err := b.baseLayer()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "karpenter-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The platforms' builds run at once: each ends in a link, which uses
	// one core.
	imgs := make([]v1.Image, len(plats))
	var g errgroup.Group
	for i, p := range plats {
		g.Go(func() (err error) {
			imgs[i], err = b.image(tmp, base, p)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, p := range plats {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imgs[i], Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.Annotations(idx, b.annotations()).(v1.ImageIndex)

	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	lp, err := layout.Write(*out, empty.Index)
	if err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": b.version,
	})); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (version %s, commit %s, %s)\n", *out, digest, b.version, b.commit, *platforms)
	return nil
}

type builder struct {
	root, version, commit string
	created               time.Time
}

func (b builder) annotations() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "karpenter-go controller",
		"org.opencontainers.image.version":  b.version,
		"org.opencontainers.image.revision": b.commit,
		"org.opencontainers.image.created":  b.created.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// image is the image of one platform: the base layer and the binary.
func (b builder) image(tmp string, base v1.Layer, p v1.Platform) (v1.Image, error) {
	bin := filepath.Join(tmp, "controller-"+p.Architecture)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPkg, b.version, versionPkg, b.commit),
		"-o", bin, "./cmd/controller")
	cmd.Dir = b.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the controller for %s/%s: %w", p.OS, p.Architecture, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var t tarWriter
	t.file(strings.TrimPrefix(entrypoint, "/"), 0o755, data, b.created)
	binLayer, err := t.layer()
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: b.created}, CreatedBy: "hack/image: base files (users, CA roots, zoneinfo)", Comment: "karpenter-go"}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: b.created}, CreatedBy: "hack/image: go build ./cmd/controller", Comment: "karpenter-go"}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = v1.Time{Time: b.created}
	cfg.Author = "karpenter-go"
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonrootUID, nonrootGID),
		Entrypoint: []string{entrypoint},
		WorkingDir: "/",
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: b.annotations(),
	}
	return mutate.ConfigFile(img, cfg)
}

// baseLayer holds the files distroless/static provides that the controller
// or a person debugging it can need.
func (b builder) baseLayer() (v1.Layer, error) {
	var t tarWriter
	at := b.created
	for _, d := range []string{"etc", "etc/ssl", "etc/ssl/certs", "home", "usr", "usr/share", "usr/share/doc", "usr/share/doc/karpenter-go", "usr/share/zoneinfo", "var"} {
		t.dir(d, 0o755, 0, 0, at)
	}
	t.dir("root", 0o700, 0, 0, at)
	t.dir("home/nonroot", 0o700, nonrootUID, nonrootGID, at)
	t.dir("tmp", 0o1777, 0, 0, at)
	t.file("etc/passwd", 0o644, []byte(strings.Join([]string{
		"root:x:0:0:root:/root:/sbin/nologin",
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin",
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin", nonrootUID, nonrootGID),
		""}, "\n")), at)
	t.file("etc/group", 0o644, []byte(strings.Join([]string{
		"root:x:0:",
		"nobody:x:65534:",
		fmt.Sprintf("nonroot:x:%d:", nonrootGID),
		""}, "\n")), at)
	t.file("etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"), at)
	certs, n := caBundle()
	if n < 100 {
		return nil, fmt.Errorf("the NSS bundle holds only %d usable roots", n)
	}
	t.file("etc/ssl/certs/ca-certificates.crt", 0o644, certs, at)
	license, err := os.ReadFile(filepath.Join(b.root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	t.file("usr/share/doc/karpenter-go/LICENSE", 0o644, license, at)
	if err := zoneinfo(&t, at); err != nil {
		return nil, err
	}
	return t.layer()
}

// caBundle is the PEM bundle of the NSS roots that carry no extra
// constraint, and how many it holds.
func caBundle() ([]byte, int) {
	var buf bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		n++
	}
	return buf.Bytes(), n
}

// zoneinfo adds the Go toolchain's time zone database under
// /usr/share/zoneinfo, where Go's time package and other programs look.
func zoneinfo(t *tarWriter, at time.Time) error {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		return fmt.Errorf("the Go toolchain's zoneinfo: %w", err)
	}
	defer zr.Close()
	files := slices.Clone(zr.File)
	slices.SortFunc(files, func(a, b *zip.File) int { return strings.Compare(a.Name, b.Name) })
	// Directories first, sorted (a parent sorts before its children), so
	// every entry's parent precedes it.
	var dirs []string
	for _, f := range files {
		for d := path.Dir(path.Join("usr/share/zoneinfo", f.Name)); d != "usr/share/zoneinfo"; d = path.Dir(d) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		t.dir(d, 0o755, 0, 0, at)
	}
	for _, f := range files {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		t.file(path.Join("usr/share/zoneinfo", f.Name), 0o644, data, at)
	}
	return nil
}

// tarWriter writes a layer's tar with fixed owners and times, in the order
// the entries are added.
type tarWriter struct {
	buf bytes.Buffer
	w   *tar.Writer
	err error
}

func (t *tarWriter) header(h *tar.Header) {
	if t.w == nil {
		t.w = tar.NewWriter(&t.buf)
	}
	h.Format = tar.FormatPAX
	if t.err == nil {
		t.err = t.w.WriteHeader(h)
	}
}

func (t *tarWriter) dir(name string, mode int64, uid, gid int, at time.Time) {
	t.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: at})
}

func (t *tarWriter) file(name string, mode int64, data []byte, at time.Time) {
	t.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: at})
	if t.err == nil {
		_, t.err = t.w.Write(data)
	}
}

// layer closes the tar and returns it as a gzip-compressed OCI layer.
func (t *tarWriter) layer() (v1.Layer, error) {
	if t.w == nil {
		t.w = tar.NewWriter(&t.buf)
	}
	if t.err == nil {
		t.err = t.w.Close()
	}
	if t.err != nil {
		return nil, fmt.Errorf("writing a layer: %w", t.err)
	}
	data := t.buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// buildTime is the time every entry and the config carry: -epoch, else
// $SOURCE_DATE_EPOCH, else HEAD's commit time.
func buildTime(root string, epoch int64) (time.Time, error) {
	if epoch < 0 {
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
			}
			epoch = v
		} else {
			out, err := gitOutput(root, "log", "-1", "--format=%ct")
			if err != nil {
				return time.Time{}, fmt.Errorf("HEAD's commit time (pass -epoch): %w", err)
			}
			if epoch, err = strconv.ParseInt(out, 10, 64); err != nil {
				return time.Time{}, fmt.Errorf("HEAD's commit time %q: %w", out, err)
			}
		}
	}
	return time.Unix(epoch, 0).UTC(), nil
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// chartAppVersion is charts/karpenter's appVersion, the tag the chart
// deploys by default.
func chartAppVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "karpenter", "Chart.yaml"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "appVersion:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`), nil
		}
	}
	return "", fmt.Errorf("no appVersion in charts/karpenter/Chart.yaml")
}

// moduleRoot is the repository's root: this tool is a module of its own
// (its dependencies stay out of the controller's go.mod), so the root is
// the git work tree's, which `make image` passes as -root anyway.
func moduleRoot(root string) (string, error) {
	if root == "" {
		var err error
		if root, err = gitOutput(".", "rev-parse", "--show-toplevel"); err != nil {
			return "", fmt.Errorf("finding the repository (pass -root): %w", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(b), "module github.com/karpenter-go/karpenter\n") {
		return "", fmt.Errorf("%s is not the karpenter-go repository (no go.mod of github.com/karpenter-go/karpenter)", root)
	}
	return filepath.Abs(root)
}
