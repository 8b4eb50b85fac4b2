package awslocal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// AMI families whose public SSM parameters the front serves.
const (
	FamilyAL2023       = "al2023"
	FamilyAL2          = "al2"
	FamilyBottlerocket = "bottlerocket"
	FamilyWindows2019  = "windows2019"
	FamilyWindows2022  = "windows2022"
	FamilyWindows2025  = "windows2025"
)

// Owners of the published images. They stand for the accounts AWS
// publishes EKS-optimized, Bottlerocket and Windows images from; nothing in
// the local AWS checks them beyond DescribeImages' owner filter.
const (
	ownerEKS          = "602401143452"
	ownerBottlerocket = "092701018921"
	ownerWindows      = "801119661308"
)

// The initial releases of every series are dated firstRelease and one
// month later, so version pinning has an older release to pin.
var firstRelease = time.Date(2025, 11, 1, 10, 0, 0, 0, time.UTC)

// Image is one released AMI of a series.
type Image struct {
	ID                string    `json:"id"`
	Name              string    `json:"name"`
	Family            string    `json:"family"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	Arch              string    `json:"arch"`
	Variant           string    `json:"variant,omitempty"`
	Version           string    `json:"version"`
	CreationDate      time.Time `json:"creationDate"`
	// Parameter is the "latest" parameter of the series (recommended /
	// latest / Windows' only one); VersionParameter pins this release
	// ("" for Windows, which publishes latest only).
	Parameter        string `json:"parameter"`
	VersionParameter string `json:"versionParameter,omitempty"`
}

// Series names one line of releases: a family, Kubernetes version,
// architecture and variant (AL2023: standard, nvidia, neuron; AL2: "" or
// gpu; Bottlerocket: "" or nvidia; Windows: "").
type Series struct {
	Family            string `json:"family"`
	KubernetesVersion string `json:"kubernetesVersion"`
	Arch              string `json:"arch"`
	Variant           string `json:"variant,omitempty"`
}

func (s Series) String() string {
	return strings.Join([]string{s.Family, s.KubernetesVersion, s.Arch, s.Variant}, "/")
}

type series struct {
	Series
	releases []Image
}

type catalog struct {
	mu     sync.Mutex
	series map[Series]*series
	order  []Series
}

func newCatalog(versions []string) *catalog {
	c := &catalog{series: map[Series]*series{}}
	for _, k8s := range versions {
		var all []Series
		for _, arch := range []string{"x86_64", "arm64"} {
			all = append(all, Series{FamilyAL2023, k8s, arch, "standard"}, Series{FamilyAL2023, k8s, arch, "nvidia"})
		}
		all = append(all,
			Series{FamilyAL2023, k8s, "x86_64", "neuron"},
			Series{FamilyAL2, k8s, "x86_64", ""}, Series{FamilyAL2, k8s, "arm64", ""}, Series{FamilyAL2, k8s, "x86_64", "gpu"},
			Series{FamilyBottlerocket, k8s, "x86_64", ""}, Series{FamilyBottlerocket, k8s, "arm64", ""},
			Series{FamilyBottlerocket, k8s, "x86_64", "nvidia"}, Series{FamilyBottlerocket, k8s, "arm64", "nvidia"},
			Series{FamilyWindows2019, k8s, "x86_64", ""}, Series{FamilyWindows2022, k8s, "x86_64", ""}, Series{FamilyWindows2025, k8s, "x86_64", ""},
		)
		for _, s := range all {
			ser := &series{Series: s}
			for i := range 2 {
				ser.releases = append(ser.releases, s.release(i, firstRelease.AddDate(0, i, 0)))
			}
			c.series[s] = ser
			c.order = append(c.order, s)
		}
	}
	return c
}

// release builds the n-th release of the series, dated at.
func (s Series) release(n int, at time.Time) Image {
	img := Image{Family: s.Family, KubernetesVersion: s.KubernetesVersion, Arch: s.Arch, Variant: s.Variant, CreationDate: at}
	date := at.Format("20060102")
	switch s.Family {
	case FamilyAL2023:
		img.Version = "v" + date
		img.Name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-v%s", s.Arch, s.Variant, s.KubernetesVersion, date)
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", s.KubernetesVersion, s.Arch, s.Variant)
		img.Parameter, img.VersionParameter = base+"recommended/image_id", base+img.Name+"/image_id"
	case FamilyAL2:
		img.Version = "v" + date
		dir, kind := "amazon-linux-2", ""
		switch {
		case s.Variant == "gpu":
			dir, kind = "amazon-linux-2-gpu", "gpu-"
		case s.Arch == "arm64":
			dir, kind = "amazon-linux-2-arm64", "arm64-"
		}
		img.Name = fmt.Sprintf("amazon-eks-%snode-%s-v%s", kind, s.KubernetesVersion, date)
		base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/", s.KubernetesVersion, dir)
		img.Parameter, img.VersionParameter = base+"recommended/image_id", base+img.Name+"/image_id"
	case FamilyBottlerocket:
		img.Version = fmt.Sprintf("1.%d.0", 49+n)
		flavor := "aws-k8s-" + s.KubernetesVersion
		if s.Variant == "nvidia" {
			flavor += "-nvidia"
		}
		commit := shortHash(flavor + s.Arch + img.Version)[:8]
		img.Name = fmt.Sprintf("bottlerocket-%s-%s-v%s-%s", flavor, s.Arch, img.Version, commit)
		base := fmt.Sprintf("/aws/service/bottlerocket/%s/%s/", flavor, s.Arch)
		img.Parameter, img.VersionParameter = base+"latest/image_id", base+img.Version+"/image_id"
	default: // Windows
		year := strings.TrimPrefix(s.Family, "windows")
		img.Version = at.Format("2006.01.02")
		img.Name = fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s-%s", year, s.KubernetesVersion, img.Version)
		img.Parameter = fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, s.KubernetesVersion)
	}
	img.ID = "ami-" + shortHash(img.Name)[:17]
	return img
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// motoSpec is the image in moto's own amis.json shape.
func (img Image) motoSpec() map[string]any {
	spec := map[string]any{
		"ami_id":              img.ID,
		"name":                img.Name,
		"state":               "available",
		"public":              true,
		"sriov":               "simple",
		"root_device_type":    "ebs",
		"root_device_name":    "/dev/xvda",
		"image_type":          "machine",
		"platform":            nil,
		"architecture":        img.Arch,
		"virtualization_type": "hvm",
		"hypervisor":          "xen",
		"creation_date":       img.CreationDate.UTC().Format("2006-01-02T15:04:05.000Z"),
	}
	switch img.Family {
	case FamilyAL2023:
		spec["owner_id"] = ownerEKS
		spec["description"] = fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, variant: %s)", img.KubernetesVersion, img.Variant)
	case FamilyAL2:
		spec["owner_id"] = ownerEKS
		spec["description"] = fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)", img.KubernetesVersion)
	case FamilyBottlerocket:
		spec["owner_id"] = ownerBottlerocket
		spec["description"] = "bottlerocket-" + strings.TrimPrefix(img.Name, "bottlerocket-")
	default:
		spec["owner_id"] = ownerWindows
		spec["platform"] = "windows"
		spec["root_device_name"] = "/dev/sda1"
		spec["description"] = fmt.Sprintf("Microsoft Windows Server %s Core optimized for EKS and provided by Amazon (k8s: %s)", strings.TrimPrefix(img.Family, "windows"), img.KubernetesVersion)
	}
	spec["image_location"] = "amazon/" + img.Name
	return spec
}

func (c *catalog) motoImages() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for _, s := range c.order {
		for _, img := range c.series[s].releases {
			out = append(out, img.motoSpec())
		}
	}
	return out
}

// Images lists every release the front has published, oldest first within
// each series.
func (l *Local) Images() []Image {
	c := l.front.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Image
	for _, s := range c.order {
		out = append(out, c.series[s].releases...)
	}
	return out
}

// LatestImage is the release the series' latest parameter points at.
func (l *Local) LatestImage(s Series) (Image, bool) {
	c := l.front.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	ser, ok := c.series[s]
	if !ok {
		return Image{}, false
	}
	return ser.releases[len(ser.releases)-1], true
}

// PublishImage releases a newer image of the series: it registers the image
// in moto (every region) and moves the series' latest parameter to it, as
// AWS does when it ships a new EKS-optimized AMI.
func (l *Local) PublishImage(ctx context.Context, s Series) (Image, error) {
	return l.front.publish(ctx, s)
}

func (f *front) publish(ctx context.Context, s Series) (Image, error) {
	c := f.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	ser, ok := c.series[s]
	if !ok {
		return Image{}, fmt.Errorf("no image series %s (known families: al2023 standard|nvidia|neuron, al2 \"\"|gpu, bottlerocket \"\"|nvidia, windows2019|2022|2025)", s)
	}
	last := ser.releases[len(ser.releases)-1]
	// Names carry the release date; keep them unique and increasing even
	// when two releases land on the same day.
	at := time.Now().UTC().Truncate(time.Second)
	if !at.After(last.CreationDate.AddDate(0, 0, 1)) {
		at = last.CreationDate.AddDate(0, 0, 1)
	}
	img := s.release(len(ser.releases), at)
	body, err := json.Marshal(img.motoSpec())
	if err != nil {
		return Image{}, fmt.Errorf("encoding image %s: %w", img.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.sidecar+"/images", bytes.NewReader(body))
	if err != nil {
		return Image{}, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return Image{}, fmt.Errorf("registering image %s in moto: %w", img.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return Image{}, fmt.Errorf("registering image %s in moto: %d %s", img.Name, resp.StatusCode, msg)
	}
	ser.releases = append(ser.releases, img)
	return img, nil
}

// param is one public SSM parameter.
type param struct {
	Name     string
	Value    string
	Version  int
	Modified time.Time
}

// params lists every parameter the catalog serves, sorted by name.
func (c *catalog) params() []param {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []param
	for _, s := range c.order {
		rs := c.series[s].releases
		latest := rs[len(rs)-1]
		out = append(out, param{latest.Parameter, latest.ID, len(rs), latest.CreationDate})
		for i, r := range rs {
			if r.VersionParameter != "" {
				out = append(out, param{r.VersionParameter, r.ID, 1, rs[i].CreationDate})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *catalog) lookup(name string) (param, bool) {
	ps := c.params()
	i := sort.Search(len(ps), func(i int) bool { return ps[i].Name >= name })
	if i < len(ps) && ps[i].Name == name {
		return ps[i], true
	}
	return param{}, false
}
