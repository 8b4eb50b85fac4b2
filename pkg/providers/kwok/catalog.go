package kwok

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Names of the built-in catalogs.
const (
	// CatalogDefault is AWS-shaped: c/m/r families plus GPU and Neuron types,
	// labelled with the karpenter.k8s.aws well-known labels.
	CatalogDefault = "default"
	// CatalogUpstreamKWOK reproduces upstream Karpenter's kwok provider
	// catalog (same names, resources and prices) for like-for-like
	// comparisons.
	CatalogUpstreamKWOK = "upstream-kwok"
)

//go:embed catalogs/*.json
var catalogFS embed.FS

var catalogFiles = map[string]string{
	CatalogDefault:      "catalogs/default.json",
	CatalogUpstreamKWOK: "catalogs/upstream-kwok.json",
}

// CatalogEntry is one instance type in a catalog file. A catalog file is a
// JSON array of entries:
//
//	[{
//	  "name": "m7g.large",
//	  "architecture": "arm64",
//	  "operatingSystems": ["linux"],
//	  "resources": {"cpu": "2", "memory": "8Gi", "pods": "29", "ephemeral-storage": "20Gi"},
//	  "overhead": {"cpu": "70m", "memory": "674Mi"},
//	  "labels": {"karpenter.k8s.aws/instance-family": "m7g"},
//	  "requirements": [{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "DoesNotExist"}],
//	  "offerings": [{"zone": "test-zone-a", "capacityType": "spot", "price": 0.05}]
//	}]
//
// Only name, architecture, resources (cpu, memory) and offerings are
// required. Defaults: operatingSystems [linux], pods 110, overhead 100m CPU
// and 10Mi memory (upstream kwok's kube-reserved), offering available true.
// Labels become single-valued requirements of the type; the
// karpenter.kwok.sh/instance-{size,family,cpu,memory} labels are derived from
// the name and resources when absent, as upstream kwok does. Field names
// match case-insensitively, so upstream kwok's own files (offerings with
// "Zone"/"CapacityType" or with a "Requirements" list) load unchanged.
type CatalogEntry struct {
	Name             string                           `json:"name"`
	Architecture     string                           `json:"architecture"`
	OperatingSystems []string                         `json:"operatingSystems,omitempty"`
	Resources        corev1.ResourceList              `json:"resources"`
	Overhead         corev1.ResourceList              `json:"overhead,omitempty"`
	Labels           map[string]string                `json:"labels,omitempty"`
	Requirements     []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
	Offerings        []CatalogOffering                `json:"offerings"`
}

// CatalogOffering is one (zone, capacity type) way to buy an entry. Zone and
// capacity type may instead be given as In requirements, upstream's newer
// format; other requirements become the offering's extra labels.
type CatalogOffering struct {
	Zone                string                           `json:"zone,omitempty"`
	CapacityType        string                           `json:"capacityType,omitempty"`
	Price               float64                          `json:"price"`
	Available           *bool                            `json:"available,omitempty"`
	ReservationID       string                           `json:"reservationID,omitempty"`
	ReservationCapacity int                              `json:"reservationCapacity,omitempty"`
	Requirements        []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
}

// LoadCatalog returns a built-in catalog by name.
func LoadCatalog(name string) ([]*cloudprovider.InstanceType, error) {
	file, ok := catalogFiles[name]
	if !ok {
		return nil, fmt.Errorf("unknown kwok catalog %q (want %q or %q)", name, CatalogDefault, CatalogUpstreamKWOK)
	}
	raw, err := catalogFS.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading built-in catalog %s: %w", name, err)
	}
	its, err := ParseCatalog(raw)
	if err != nil {
		return nil, fmt.Errorf("built-in catalog %s: %w", name, err)
	}
	return its, nil
}

// LoadCatalogFile reads a catalog from a JSON file.
func LoadCatalogFile(path string) ([]*cloudprovider.InstanceType, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading instance types file: %w", err)
	}
	its, err := ParseCatalog(raw)
	if err != nil {
		return nil, fmt.Errorf("instance types file %s: %w", path, err)
	}
	return its, nil
}

// ParseCatalog decodes and validates a catalog.
func ParseCatalog(raw []byte) ([]*cloudprovider.InstanceType, error) {
	var entries []CatalogEntry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("decoding catalog: %w", err)
	}
	seen := make(map[string]bool, len(entries))
	out := make([]*cloudprovider.InstanceType, 0, len(entries))
	for i := range entries {
		it, err := entries[i].instanceType()
		if err != nil {
			return nil, fmt.Errorf("entry %d (%q): %w", i, entries[i].Name, err)
		}
		if seen[it.Name] {
			return nil, fmt.Errorf("entry %d: duplicate instance type %q", i, it.Name)
		}
		seen[it.Name] = true
		out = append(out, it)
	}
	return out, nil
}

// MarshalCatalog renders entries one per line: compact enough to embed and
// still diffable per instance type.
func MarshalCatalog(entries []CatalogEntry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i := range entries {
		line, err := json.Marshal(&entries[i])
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", entries[i].Name, err)
		}
		b.Write(line)
		if i < len(entries)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes(), nil
}

var (
	// awsSizeRe and familySepRe derive the kwok size/family labels the way
	// upstream kwok does: AWS-style names give their size suffix, others
	// fall back to the CPU count.
	awsSizeRe   = regexp.MustCompile(`^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$`)
	familySepRe = regexp.MustCompile(`[.-]`)
)

func (e *CatalogEntry) instanceType() (*cloudprovider.InstanceType, error) {
	if e.Name == "" {
		return nil, fmt.Errorf("name is required")
	}
	if e.Architecture == "" {
		return nil, fmt.Errorf("architecture is required")
	}
	cpu, okCPU := e.Resources[corev1.ResourceCPU]
	mem, okMem := e.Resources[corev1.ResourceMemory]
	if !okCPU || !okMem {
		return nil, fmt.Errorf("resources need cpu and memory")
	}
	if len(e.Offerings) == 0 {
		return nil, fmt.Errorf("at least one offering is required")
	}
	oses := e.OperatingSystems
	if len(oses) == 0 {
		oses = []string{string(corev1.Linux)}
	}

	capacity := e.Resources.DeepCopy()
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse("110")
	}
	overhead := e.Overhead.DeepCopy()
	if overhead == nil {
		overhead = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("10Mi"),
		}
	}

	offerings := make([]cloudprovider.Offering, 0, len(e.Offerings))
	zones, capacityTypes := map[string]bool{}, map[string]bool{}
	for j := range e.Offerings {
		o, err := e.Offerings[j].offering()
		if err != nil {
			return nil, fmt.Errorf("offering %d: %w", j, err)
		}
		zones[o.Zone], capacityTypes[o.CapacityType] = true, true
		offerings = append(offerings, o)
	}

	reqs := scheduling.NewRequirements(
		scheduling.NewRequirement(scheduling.LabelInstanceType, scheduling.OpIn, e.Name),
		scheduling.NewRequirement(scheduling.LabelArch, scheduling.OpIn, e.Architecture),
		scheduling.NewRequirement(scheduling.LabelOS, scheduling.OpIn, oses...),
		scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, keys(zones)...),
		scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, keys(capacityTypes)...),
	)
	labels := map[string]string{
		kwokv1alpha1.LabelInstanceSize:   kwokSize(e.Name, cpu.String()),
		kwokv1alpha1.LabelInstanceFamily: kwokFamily(e.Name),
		kwokv1alpha1.LabelInstanceCPU:    cpu.String(),
		kwokv1alpha1.LabelInstanceMemory: mem.String(),
	}
	for k, v := range e.Labels {
		labels[k] = v
	}
	for _, k := range sortedKeys(labels) {
		reqs.Add(scheduling.NewRequirement(k, scheduling.OpIn, labels[k]))
	}
	extra, err := scheduling.RequirementsFromNodeSelector(e.Requirements)
	if err != nil {
		return nil, fmt.Errorf("requirements: %w", err)
	}
	for _, k := range extra.Keys() {
		reqs.Add(extra[k])
	}

	return &cloudprovider.InstanceType{
		Name:         e.Name,
		Requirements: reqs,
		Offerings:    offerings,
		Capacity:     capacity,
		Overhead:     overhead,
	}, nil
}

func (c *CatalogOffering) offering() (cloudprovider.Offering, error) {
	o := cloudprovider.Offering{
		Zone:                c.Zone,
		CapacityType:        c.CapacityType,
		Price:               c.Price,
		Available:           c.Available == nil || *c.Available,
		ReservationID:       c.ReservationID,
		ReservationCapacity: c.ReservationCapacity,
	}
	if len(c.Requirements) > 0 {
		reqs, err := scheduling.RequirementsFromNodeSelector(c.Requirements)
		if err != nil {
			return o, fmt.Errorf("requirements: %w", err)
		}
		// Zone, capacity type and reservation have fields of their own in the
		// solver's Offering; lift them out of the requirement list.
		for key, field := range map[string]*string{
			scheduling.LabelZone:          &o.Zone,
			scheduling.LabelCapacityType:  &o.CapacityType,
			scheduling.LabelReservationID: &o.ReservationID,
		} {
			if r, ok := reqs[key]; ok {
				if *field == "" && r.Operator() == scheduling.OpIn && len(r.Values()) == 1 {
					*field = r.Values()[0]
				}
				delete(reqs, key)
			}
		}
		if len(reqs) > 0 {
			o.Requirements = reqs
		}
	}
	switch {
	case o.Zone == "":
		return o, fmt.Errorf("zone is required")
	case o.CapacityType == "":
		return o, fmt.Errorf("capacity type is required")
	case o.Price < 0:
		return o, fmt.Errorf("price must not be negative")
	case o.CapacityType == scheduling.CapacityTypeReserved && o.ReservationID == "":
		return o, fmt.Errorf("reserved offerings need a reservationID")
	}
	return o, nil
}

func kwokSize(name, cpu string) string {
	if m := awsSizeRe.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return cpu
}

func kwokFamily(name string) string {
	parts := familySepRe.Split(name, 2)
	if len(parts) < 2 {
		return name[:1]
	}
	return parts[0]
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
