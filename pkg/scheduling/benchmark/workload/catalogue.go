package workload

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Catalogue constants from the spec.
const (
	CatalogueSize     = 400
	CapacityTypeKey   = "karpenter.sh/capacity-type"
	CapacitySpot      = "spot"
	CapacityOnDemand  = "on-demand"
	IntegerLabel      = "integer"
	SizeLabel         = "size"
	SpecialLabel      = "special"
	SizeSmall         = "small"
	SizeLarge         = "large"
	SpecialOptional   = "optional"
	kubeReservedCPUm  = 100
	kubeReservedMemMi = 10
)

// Zones are the catalogue's zones; the last one has no spot capacity.
var Zones = []string{"test-zone-1", "test-zone-2", "test-zone-3"}

// Offering is one way to buy a type: capacity type, zone and hourly price.
type Offering struct {
	CapacityType string
	Zone         string
	Price        float64
	Available    bool
}

// InstanceType is a catalogue entry in a form any solver can adapt: plain
// Kubernetes resource lists and node-selector requirements.
type InstanceType struct {
	Name string
	// K is the type's size: k cores, 2k GiB, 10k pods.
	K        int
	Capacity corev1.ResourceList
	// Overhead is kube-reserved; there is no system-reserved or eviction
	// threshold in this workload.
	Overhead  corev1.ResourceList
	Offerings []Offering
	// Requirements are the labels a node of this type would carry, as
	// requirements: single-valued In for fixed labels, multi-valued In where
	// the node may get any one value (os, zone, capacity type), and
	// DoesNotExist for "special" on small types.
	Requirements []corev1.NodeSelectorRequirement
}

// Allocatable is capacity minus overhead.
func (it InstanceType) Allocatable() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range it.Capacity {
		q = q.DeepCopy()
		if o, ok := it.Overhead[name]; ok {
			q.Sub(o)
		}
		out[name] = q
	}
	return out
}

// CheapestPrice is the lowest price among available offerings, or false if
// none is available.
func (it InstanceType) CheapestPrice() (float64, bool) {
	best, ok := 0.0, false
	for _, o := range it.Offerings {
		if o.Available && (!ok || o.Price < best) {
			best, ok = o.Price, true
		}
	}
	return best, ok
}

// Price is the price the spec gives type k: 0.1 per core plus 0.1 per 1e9
// bytes of memory, i.e. 0.3147483648·k.
func Price(k int) float64 {
	return 0.1*float64(k) + 0.1*float64(int64(2*k)<<30)/1e9
}

// Catalogue returns the 400 instance types, smallest first.
func Catalogue() []InstanceType {
	out := make([]InstanceType, 0, CatalogueSize)
	for k := 1; k <= CatalogueSize; k++ {
		out = append(out, catalogueType(k))
	}
	return out
}

func catalogueType(k int) InstanceType {
	name := fmt.Sprintf("fake-it-%d", k-1)
	price := Price(k)
	offer := func(ct, zone string) Offering {
		return Offering{CapacityType: ct, Zone: zone, Price: price, Available: true}
	}
	size, special := SizeSmall, corev1.NodeSelectorRequirement{Key: SpecialLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	if k > 4 { // large means cpu > 4 and memory > 8Gi; both hold from k = 5
		size = SizeLarge
		special = corev1.NodeSelectorRequirement{Key: SpecialLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{SpecialOptional}}
	}
	in := func(key string, vals ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: vals}
	}
	return InstanceType{
		Name: name,
		K:    k,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(k), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(2*k)<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(int64(10*k), resource.DecimalSI),
		},
		Overhead: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(kubeReservedCPUm, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(kubeReservedMemMi<<20, resource.BinarySI),
		},
		Offerings: []Offering{
			offer(CapacitySpot, Zones[0]),
			offer(CapacitySpot, Zones[1]),
			offer(CapacityOnDemand, Zones[0]),
			offer(CapacityOnDemand, Zones[1]),
			offer(CapacityOnDemand, Zones[2]),
		},
		Requirements: []corev1.NodeSelectorRequirement{
			in(corev1.LabelInstanceTypeStable, name),
			in(corev1.LabelArchStable, "amd64"),
			in(corev1.LabelOSStable, "darwin", "linux", "windows"),
			in(corev1.LabelTopologyZone, Zones...),
			in(CapacityTypeKey, CapacitySpot, CapacityOnDemand),
			in(IntegerLabel, strconv.Itoa(k)),
			in(SizeLabel, size),
			special,
		},
	}
}
