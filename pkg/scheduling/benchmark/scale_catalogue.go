package benchmark

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// The scale catalogue is our own synthetic, EC2-like set of instance types.
// It is not price data: the names and shapes look familiar so that plans are
// easy to read, and the prices follow the formula in ScalePrice so that the
// benchmark's cost figures can be recomputed by hand.

// Label keys the scale catalogue puts on its types, in the AWS provider's
// domain so that NodePool requirements read like real ones.
const (
	LabelInstanceCategory   = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily     = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize       = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU        = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceMemory     = "karpenter.k8s.aws/instance-memory"
	LabelInstanceGPUCount   = "karpenter.k8s.aws/instance-gpu-count"

	// ResourceGPU is the extended resource the GPU types offer.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

	// ScaleCatalogueSize is the number of types ScaleCatalogue returns.
	ScaleCatalogueSize = 700
)

// ScaleWellKnownLabels are the provider keys above. The AWS provider
// declares them well known; the workload passes them in
// Input.WellKnownLabels, as the snapshot builder does for a provider.
var ScaleWellKnownLabels = []string{
	LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGeneration, LabelInstanceSize,
	LabelInstanceCPU, LabelInstanceMemory, LabelInstanceGPUCount,
}

// ScaleZones are the catalogue's zones: every type is offered in each of
// them, on-demand and spot.
var ScaleZones = []string{"us-test-1a", "us-test-1b", "us-test-1c"}

// scaleSizes maps a size suffix to its vCPU count; metal is added per family
// with the family's largest vCPU count.
var scaleSizes = []struct {
	name string
	cpu  int
}{
	{"medium", 1}, {"large", 2}, {"xlarge", 4}, {"2xlarge", 8}, {"4xlarge", 16}, {"8xlarge", 32},
	{"12xlarge", 48}, {"16xlarge", 64}, {"24xlarge", 96}, {"32xlarge", 128}, {"48xlarge", 192},
}

// scaleProcessors: the letter in the family name, the architecture and the
// price factor (AMD ~10% and Graviton ~20% cheaper than Intel, roughly as on
// EC2). Only Graviton families have the 1-vCPU "medium" size.
var scaleProcessors = []struct {
	letter, arch string
	factor       float64
}{
	{"i", "amd64", 1.00}, {"a", "amd64", 0.90}, {"g", "arm64", 0.80},
}

// scaleGenerations: newer generations cost a little more per vCPU.
var scaleGenerations = []struct {
	gen    int
	factor float64
	// maxCPU and variants are per processor letter.
	maxCPU   map[string]int
	variants map[string][]string
}{
	{5, 1.00, map[string]int{"i": 96, "a": 96, "g": 64}, map[string][]string{"i": {"", "d", "n"}, "a": {"", "d"}, "g": {"", "d"}}},
	{6, 1.00, map[string]int{"i": 128, "a": 192, "g": 64}, map[string][]string{"i": {"", "d", "n"}, "a": {""}, "g": {"", "d", "n"}}},
	{7, 1.05, map[string]int{"i": 192, "a": 192, "g": 64}, map[string][]string{"i": {"", "d"}, "a": {""}, "g": {"", "d"}}},
	{8, 1.10, map[string]int{"i": 192, "a": 192, "g": 192}, map[string][]string{"i": {""}, "a": {""}, "g": {"", "d"}}},
}

// scaleCategories: the family letter and its memory per vCPU in GiB.
var scaleCategories = []struct {
	letter    string
	memPerCPU int
}{
	{"c", 2}, {"m", 4}, {"r", 8},
}

// variantFactor prices the family suffixes: local NVMe (d) and enhanced
// networking (n).
var variantFactor = map[string]float64{"": 1.00, "d": 1.12, "n": 1.25}

// scaleGPUShapes are the GPU family sizes: vCPU and GPU count; memory is
// 4 GiB per vCPU.
var scaleGPUShapes = []struct {
	size      string
	cpu, gpus int
}{
	{"xlarge", 4, 1}, {"2xlarge", 8, 1}, {"4xlarge", 16, 1}, {"8xlarge", 32, 1},
	{"12xlarge", 48, 4}, {"16xlarge", 64, 1}, {"24xlarge", 96, 4}, {"48xlarge", 192, 8},
}

// Price formula constants, in $/h.
const (
	pricePerCPU    = 0.0316
	pricePerGiB    = 0.0042
	pricePerGPU    = 0.80
	spotMinFactor  = 0.30 // spot costs 30%–55% of on-demand,
	spotSpanFactor = 0.25 // varying by type and zone
	// spotUnavailable is the share of spot offerings marked unavailable.
	spotUnavailable = 0.05
)

// ScalePrice is the on-demand $/h of a shape:
//
//	(0.0316·vCPU + 0.0042·GiB) · processor · generation · variant + 0.80·GPUs
//
// Spot offerings cost spotFraction(type, zone) of that, between 0.30 and
// 0.55, from a hash of the type and zone names so that a type's prices do
// not depend on where it sits in the catalogue. GPU types (g5, g6) pass
// gpus = 0 here and add 0.80 per GPU, times 0.8 for the newer g6.
func ScalePrice(cpu, memGiB, gpus int, procFactor, genFactor, varFactor float64) float64 {
	p := (pricePerCPU*float64(cpu)+pricePerGiB*float64(memGiB))*procFactor*genFactor*varFactor +
		pricePerGPU*float64(gpus)
	return math.Round(p*1e4) / 1e4
}

// unitHash maps strings to [0, 1) deterministically.
func unitHash(parts ...string) float64 {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// scaleMaxPods follows the shape of ENI-limited pod density, capped at the
// kubelet's default of 110.
func scaleMaxPods(cpu int) int {
	switch {
	case cpu <= 1:
		return 8
	case cpu <= 2:
		return 29
	case cpu <= 8:
		return 58
	default:
		return 110
	}
}

// scaleOverhead is kube-reserved plus the eviction threshold, by the
// EKS-style rule: 6% of the first core, 1% of the second, 0.5% of the next
// two and 0.25% of the rest; 11Mi per pod plus 255Mi; 100Mi for eviction.
func scaleOverhead(cpu, maxPods int) corev1.ResourceList {
	milli := 60.0
	if cpu > 1 {
		milli += 10
	}
	if cpu > 2 {
		milli += 5 * float64(min(cpu, 4)-2)
	}
	if cpu > 4 {
		milli += 2.5 * float64(cpu-4)
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(math.Ceil(milli)), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(11*maxPods+255+100)<<20, resource.BinarySI),
	}
}

type scaleShape struct {
	name, category, family, size, arch string
	gen, cpu, memGiB, gpus             int
	price                              float64
}

// ScaleCatalogue returns the 700 instance types of the scale benchmark,
// families in a fixed order: 684 general-purpose types (c, m, r categories
// with 2, 4 and 8 GiB per vCPU; generations 5–8; Intel, AMD and Graviton;
// plain, d and n variants; 1 to 192 vCPUs plus metal) and 16 GPU types
// (g5 and g6, 1 to 8 nvidia.com/gpu). Each has an on-demand and a spot
// offering in each of ScaleZones; about 5% of the spot ones are unavailable.
func ScaleCatalogue() []workload.InstanceType {
	var shapes []scaleShape
	for _, cat := range scaleCategories {
		for _, g := range scaleGenerations {
			for _, p := range scaleProcessors {
				for _, v := range g.variants[p.letter] {
					letter := p.letter
					if g.gen == 5 && letter == "i" {
						letter = "" // c5, m5, r5 rather than c5i
					}
					family := fmt.Sprintf("%s%d%s%s", cat.letter, g.gen, letter, v)
					maxCPU := g.maxCPU[p.letter]
					add := func(size string, cpu int) {
						mem := cpu * cat.memPerCPU
						shapes = append(shapes, scaleShape{
							name: family + "." + size, category: cat.letter, family: family, size: size,
							arch: p.arch, gen: g.gen, cpu: cpu, memGiB: mem,
							price: ScalePrice(cpu, mem, 0, p.factor, g.factor, variantFactor[v]),
						})
					}
					for _, s := range scaleSizes {
						if (s.cpu == 1 && p.arch != "arm64") || s.cpu > maxCPU {
							continue
						}
						add(s.name, s.cpu)
					}
					add("metal", maxCPU)
				}
			}
		}
	}
	for _, g := range []struct {
		family string
		gen    int
		factor float64
	}{{"g5", 5, 1.0}, {"g6", 6, 0.8}} {
		for _, s := range scaleGPUShapes {
			mem := 4 * s.cpu
			shapes = append(shapes, scaleShape{
				name: g.family + "." + s.size, category: "g", family: g.family, size: s.size, arch: "amd64",
				gen: g.gen, cpu: s.cpu, memGiB: mem, gpus: s.gpus,
				price: ScalePrice(s.cpu, mem, 0, 1, 1, 1) + math.Round(pricePerGPU*g.factor*float64(s.gpus)*1e4)/1e4,
			})
		}
	}
	out := make([]workload.InstanceType, 0, len(shapes))
	for _, s := range shapes {
		out = append(out, s.instanceType())
	}
	return out
}

func (s scaleShape) instanceType() workload.InstanceType {
	maxPods := scaleMaxPods(s.cpu)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(s.cpu), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(s.memGiB)<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	if s.gpus > 0 {
		capacity[ResourceGPU] = *resource.NewQuantity(int64(s.gpus), resource.DecimalSI)
	}
	var offs []workload.Offering
	zones := map[string]bool{}
	cts := map[string]bool{}
	for _, z := range ScaleZones {
		offs = append(offs, workload.Offering{CapacityType: scheduling.CapacityTypeOnDemand, Zone: z, Price: s.price, Available: true})
		spot := math.Round(s.price*(spotMinFactor+spotSpanFactor*unitHash(s.name, z, "price"))*1e4) / 1e4
		avail := unitHash(s.name, z, "available") >= spotUnavailable
		offs = append(offs, workload.Offering{CapacityType: scheduling.CapacityTypeSpot, Zone: z, Price: spot, Available: avail})
		zones[z] = true
		cts[scheduling.CapacityTypeOnDemand] = true
		if avail {
			cts[scheduling.CapacityTypeSpot] = true
		}
	}
	in := func(key string, vals ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: vals}
	}
	reqs := []corev1.NodeSelectorRequirement{
		in(corev1.LabelInstanceTypeStable, s.name),
		in(corev1.LabelArchStable, s.arch),
		in(corev1.LabelOSStable, "linux"),
		in(corev1.LabelTopologyZone, sortedKeys(zones)...),
		in(scheduling.LabelCapacityType, sortedKeys(cts)...),
		in(LabelInstanceCategory, s.category),
		in(LabelInstanceFamily, s.family),
		in(LabelInstanceGeneration, strconv.Itoa(s.gen)),
		in(LabelInstanceSize, s.size),
		in(LabelInstanceCPU, strconv.Itoa(s.cpu)),
		in(LabelInstanceMemory, strconv.Itoa(s.memGiB*1024)),
	}
	if s.gpus > 0 {
		reqs = append(reqs, in(LabelInstanceGPUCount, strconv.Itoa(s.gpus)))
	}
	return workload.InstanceType{
		Name:         s.name,
		K:            s.cpu,
		Capacity:     capacity,
		Overhead:     scaleOverhead(s.cpu, maxPods),
		Offerings:    offs,
		Requirements: reqs,
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
