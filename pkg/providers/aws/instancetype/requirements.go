package instancetype

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Zone is one availability zone an instance type may launch in: EC2 offers
// the type there and a subnet of the EC2NodeClass covers it.
type Zone struct {
	Name string
	// ID is the zone ID (use1-az1); empty when the subnet status lacks it.
	ID string
}

// familyScheme splits a type name into category, an optional high-memory
// "-<n>tb" part and generation: "m5.large" is m/5, "u-6tb1.metal" is u/1.
var familyScheme = regexp.MustCompile(`(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`)

// Requirements are the labels a node of this type carries, as requirements:
// single values for facts about the type, value sets for the zones and
// capacity types it can be bought in, and empty sets (DoesNotExist) for keys
// that do not apply, so that a pod requiring one never lands on the type.
// reservations are the capacity reservations resolved for the class; only
// those for this type count.
func Requirements(info ec2types.InstanceTypeInfo, amiFamily, region string, zones []Zone, reservations []awsv1.CapacityReservation) (scheduling.Requirements, error) {
	if err := checkInfo(info); err != nil {
		return nil, err
	}
	fam, err := familyFor(amiFamily)
	if err != nil {
		return nil, fmt.Errorf("instance type %s: %w", info.InstanceType, err)
	}
	name := string(info.InstanceType)
	values := map[string][]string{}
	set := func(key string, vals ...string) { values[key] = append(values[key], vals...) }

	// Well-known Kubernetes labels.
	set(scheduling.LabelInstanceType, name)
	arch := architecture(info)
	set(scheduling.LabelArch, arch)
	switch {
	case !fam.windows:
		set(scheduling.LabelOS, string(corev1.Linux))
	case arch == "amd64":
		set(scheduling.LabelOS, string(corev1.Windows))
	default:
		// Windows AMIs exist for amd64 only: no OS fits, so no pod does.
		set(scheduling.LabelOS)
	}
	if fam.windows {
		set(scheduling.LabelWindowsBuild, fam.windowsBuild)
	}
	set(scheduling.LabelRegion, region)
	set(scheduling.LabelWindowsBuild)
	var zoneIDs []string
	for _, z := range zones {
		set(scheduling.LabelZone, z.Name)
		if z.ID != "" {
			zoneIDs = append(zoneIDs, z.ID)
		}
	}
	set(scheduling.LabelZone)

	// Capacity types the type is sold as, plus reserved when a reservation
	// of the class holds it.
	for _, uc := range info.SupportedUsageClasses {
		if uc == ec2types.UsageClassTypeOnDemand || uc == ec2types.UsageClassTypeSpot {
			set(scheduling.LabelCapacityType, string(uc))
		}
	}
	set(scheduling.LabelReservationID)
	set(awsv1.LabelCapacityReservationType)
	for _, r := range reservations {
		if r.InstanceType != name {
			continue
		}
		if len(values[scheduling.LabelReservationID]) == 0 {
			set(scheduling.LabelCapacityType, scheduling.CapacityTypeReserved)
		}
		set(scheduling.LabelReservationID, r.ID)
		rt := r.ReservationType
		if rt == "" {
			rt = awsv1.CapacityReservationTypeDefault
		}
		set(awsv1.LabelCapacityReservationType, string(rt))
	}
	set(scheduling.LabelCapacityType)
	if len(zoneIDs) > 0 {
		set(awsv1.LabelTopologyZoneID, zoneIDs...)
	}

	// Facts about the type. Keys that may not apply start empty.
	for _, key := range []string{
		awsv1.LabelInstanceCategory, awsv1.LabelInstanceGeneration, awsv1.LabelInstanceFamily,
		awsv1.LabelInstanceSize, awsv1.LabelInstanceLocalNVME, awsv1.LabelInstanceNetworkBandwidth,
		awsv1.LabelInstanceEBSBandwidth, awsv1.LabelInstanceGPUName, awsv1.LabelInstanceGPUManufacturer,
		awsv1.LabelInstanceGPUCount, awsv1.LabelInstanceGPUMemory, awsv1.LabelInstanceAcceleratorName,
		awsv1.LabelInstanceAcceleratorManufacturer, awsv1.LabelInstanceAcceleratorCount,
	} {
		set(key)
	}
	set(awsv1.LabelInstanceCPU, fmt.Sprint(*info.VCpuInfo.DefaultVCpus))
	set(awsv1.LabelInstanceMemory, fmt.Sprint(*info.MemoryInfo.SizeInMiB))
	// Bare-metal types have no hypervisor; EC2 leaves the field empty and
	// the label is then the empty string, as upstream.
	set(awsv1.LabelInstanceHypervisor, string(info.Hypervisor))
	set(awsv1.LabelInstanceEncryptionInTransitSupported, fmt.Sprint(info.NetworkInfo.EncryptionInTransitSupported != nil && *info.NetworkInfo.EncryptionInTransitSupported))
	set(awsv1.LabelInstanceTenancy, awsv1.InstanceTenancyDefault, awsv1.InstanceTenancyDedicated)
	set(awsv1.LabelInstanceCPUManufacturer, kebab(derefString(info.ProcessorInfo.Manufacturer)))
	var ghz float64
	if info.ProcessorInfo.SustainedClockSpeedInGhz != nil {
		ghz = *info.ProcessorInfo.SustainedClockSpeedInGhz
	}
	// Whole MHz so that Gt/Lt requirements can compare it.
	set(awsv1.LabelInstanceCPUSustainedClockSpeedMhz, fmt.Sprint(int(math.Round(ghz*1000))))

	if m := familyScheme.FindStringSubmatch(name); len(m) == 4 {
		set(awsv1.LabelInstanceCategory, m[1])
		set(awsv1.LabelInstanceGeneration, m[3])
	}
	familyName, size, ok := strings.Cut(name, ".")
	if ok && !strings.Contains(size, ".") {
		set(awsv1.LabelInstanceFamily, familyName)
		set(awsv1.LabelInstanceSize, size)
	}
	set(awsv1.LabelInstanceCapabilityFlex, fmt.Sprint(strings.Contains(familyName, "-flex")))
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		set(awsv1.LabelInstanceLocalNVME, fmt.Sprint(*s.TotalSizeInGB))
	}
	if mbps, ok := networkBandwidthMbps(info); ok {
		set(awsv1.LabelInstanceNetworkBandwidth, fmt.Sprint(mbps))
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil && e.EbsOptimizedSupport == ec2types.EbsOptimizedSupportDefault && e.EbsOptimizedInfo.MaximumBandwidthInMbps != nil {
		set(awsv1.LabelInstanceEBSBandwidth, fmt.Sprint(*e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	// GPU and accelerator labels describe a single device kind; types that
	// mix kinds get none rather than a misleading one.
	if info.GpuInfo != nil && len(info.GpuInfo.Gpus) == 1 {
		g := info.GpuInfo.Gpus[0]
		set(awsv1.LabelInstanceGPUName, kebab(derefString(g.Name)))
		set(awsv1.LabelInstanceGPUManufacturer, kebab(derefString(g.Manufacturer)))
		set(awsv1.LabelInstanceGPUCount, fmt.Sprint(aws32(g.Count)))
		if g.MemoryInfo != nil {
			set(awsv1.LabelInstanceGPUMemory, fmt.Sprint(aws32(g.MemoryInfo.SizeInMiB)))
		}
	}
	if a := info.InferenceAcceleratorInfo; a != nil && len(a.Accelerators) == 1 && info.NeuronInfo == nil {
		acc := a.Accelerators[0]
		set(awsv1.LabelInstanceAcceleratorName, kebab(derefString(acc.Name)))
		set(awsv1.LabelInstanceAcceleratorManufacturer, kebab(derefString(acc.Manufacturer)))
		set(awsv1.LabelInstanceAcceleratorCount, fmt.Sprint(aws32(acc.Count)))
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) == 1 {
		d := n.NeuronDevices[0]
		set(awsv1.LabelInstanceAcceleratorName, kebab(derefString(d.Name)))
		set(awsv1.LabelInstanceAcceleratorManufacturer, "aws")
		set(awsv1.LabelInstanceAcceleratorCount, fmt.Sprint(aws32(d.Count)))
	}

	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	reqs := scheduling.NewRequirements()
	for _, k := range keys {
		reqs.Add(scheduling.NewRequirement(k, scheduling.OpIn, values[k]...))
	}
	return reqs, nil
}

// architecture maps the first EC2 architecture Kubernetes knows to its
// kubernetes.io/arch value (i386+x86_64 types are amd64).
func architecture(info ec2types.InstanceTypeInfo) string {
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		switch a {
		case ec2types.ArchitectureTypeX8664:
			return "amd64"
		case ec2types.ArchitectureTypeArm64:
			return "arm64"
		}
	}
	// Unknown: keep EC2's spelling so errors show what was seen.
	return fmt.Sprint(info.ProcessorInfo.SupportedArchitectures)
}

// networkBandwidthMbps is the type's baseline network bandwidth, summed
// over its network cards. Upstream reads it from a table generated from the
// EC2 documentation; DescribeInstanceTypes carries the same baseline figures.
func networkBandwidthMbps(info ec2types.InstanceTypeInfo) (int64, bool) {
	var gbps float64
	found := false
	for _, c := range info.NetworkInfo.NetworkCards {
		if c.BaselineBandwidthInGbps != nil {
			gbps += *c.BaselineBandwidthInGbps
			found = true
		}
	}
	return int64(math.Round(gbps * 1000)), found
}

// kebab lowercases and joins words with dashes ("Radeon Pro V520" becomes
// "radeon-pro-v520"), the form label values take.
func kebab(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, " ", "-"))
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
