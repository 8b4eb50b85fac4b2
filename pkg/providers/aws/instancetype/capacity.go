package instancetype

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// Settings are the provider-wide options that change capacity.
type Settings struct {
	// VMMemoryOverheadPercent (VM_MEMORY_OVERHEAD_PERCENT) is the share of
	// the advertised memory the hypervisor and firmware keep, subtracted
	// until a real node of the type reports its capacity.
	VMMemoryOverheadPercent float64
	// ReservedENIs (RESERVED_ENIS) are network interfaces kept out of the
	// VPC CNI's pod IP pool, so they do not count towards max pods.
	ReservedENIs int
}

// DefaultSettings are upstream's defaults.
func DefaultSettings() Settings {
	return Settings{VMMemoryOverheadPercent: 0.075, ReservedENIs: 0}
}

// Resources is what a node of one instance type offers and what the kubelet
// keeps back. The overhead is kept in its three parts because users
// configure them separately and status output shows them apart.
type Resources struct {
	Capacity          corev1.ResourceList
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Overhead is kube-reserved + system-reserved + the eviction threshold.
func (r Resources) Overhead() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{r.KubeReserved, r.SystemReserved, r.EvictionThreshold} {
		for name, q := range l {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// Allocatable is capacity minus overhead for every capacity resource. As
// upstream it is not clamped: a negative value (Bottlerocket with maxPods
// 110 on a t3.micro) says the configuration does not fit the type.
func (r Resources) Allocatable() corev1.ResourceList {
	overhead := r.Overhead()
	out := make(corev1.ResourceList, len(r.Capacity))
	for name, q := range r.Capacity {
		a := q.DeepCopy()
		if o, ok := overhead[name]; ok {
			a.Sub(o)
		}
		out[name] = a
	}
	return out
}

// Compute derives capacity and overhead of one instance type for one
// EC2NodeClass, as upstream does before a node of the type has registered.
func Compute(info ec2types.InstanceTypeInfo, nodeClass *awsv1.EC2NodeClass, settings Settings) (Resources, error) {
	if err := checkInfo(info); err != nil {
		return Resources{}, err
	}
	fam, err := familyFor(nodeClass.AMIFamily())
	if err != nil {
		return Resources{}, fmt.Errorf("instance type %s: %w", info.InstanceType, err)
	}
	kubelet, err := ParseKubelet(nodeClass.Spec.Kubelet)
	if err != nil {
		return Resources{}, fmt.Errorf("EC2NodeClass %s: %w", nodeClass.Name, err)
	}

	cpu := *info.VCpuInfo.DefaultVCpus
	memory := capacityMemory(info, settings.VMMemoryOverheadPercent)
	storage := ephemeralStorage(info, fam, nodeClass.Spec.BlockDeviceMappings, nodeClass.Spec.InstanceStorePolicy)
	pods := podCount(info, fam, kubelet, settings.ReservedENIs, efaOnlyOnCard0(nodeClass.Spec.NetworkInterfaces))

	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(cpu), resource.DecimalSI),
		corev1.ResourceMemory:           memory,
		corev1.ResourceEphemeralStorage: storage,
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
		awsv1.ResourceAWSPodENI:         *resource.NewQuantity(podENIs(string(info.InstanceType)), resource.DecimalSI),
		awsv1.ResourceNVIDIAGPU:         *resource.NewQuantity(gpus(info, "NVIDIA"), resource.DecimalSI),
		awsv1.ResourceAMDGPU:            *resource.NewQuantity(gpus(info, "AMD"), resource.DecimalSI),
		awsv1.ResourceHabanaGaudi:       *resource.NewQuantity(gpus(info, "Habana"), resource.DecimalSI),
		awsv1.ResourceAWSNeuron:         *resource.NewQuantity(neuronDevices(info), resource.DecimalSI),
		awsv1.ResourceAWSNeuronCore:     *resource.NewQuantity(neuronCores(info), resource.DecimalSI),
		awsv1.ResourceEFA:               *resource.NewQuantity(efas(info, nodeClass.Spec.NetworkInterfaces), resource.DecimalSI),
	}
	if fam.windows && architecture(info) == "amd64" {
		// Windows pods get IPs from the VPC resource controller, which
		// advertises one per secondary address of the primary interface.
		capacity[awsv1.ResourcePrivateIPv4Address] = *resource.NewQuantity(int64(aws32(info.NetworkInfo.Ipv4AddressesPerInterface))-1, resource.DecimalSI)
	}

	// kube-reserved memory follows the pod density the family's bootstrap
	// reserves for, which for AL2/AL2023 is the ENI limit even when maxPods
	// raises or lowers the real density.
	reservedPods := pods
	if fam.eniLimitedMemoryOverhead {
		reservedPods = eniLimitedPods(info, 0)
	}
	kubeReserved := corev1.ResourceList{
		corev1.ResourceCPU:              kubeReservedCPU(int64(cpu) * 1000),
		corev1.ResourceMemory:           *resource.NewQuantity((11*reservedPods+255)<<20, resource.BinarySI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	for name, q := range reservedList(kubelet.KubeReserved) {
		kubeReserved[name] = q
	}

	return Resources{
		Capacity:          capacity,
		KubeReserved:      kubeReserved,
		SystemReserved:    reservedList(kubelet.SystemReserved),
		EvictionThreshold: evictionThreshold(memory, storage, kubelet.EvictionHard),
	}, nil
}

// checkInfo refuses records that lack what every formula needs, so that a
// malformed API answer is an error instead of a nil dereference.
func checkInfo(info ec2types.InstanceTypeInfo) error {
	switch {
	case info.InstanceType == "":
		return fmt.Errorf("instance type record has no InstanceType")
	case info.VCpuInfo == nil || info.VCpuInfo.DefaultVCpus == nil:
		return fmt.Errorf("instance type %s: no VCpuInfo.DefaultVCpus", info.InstanceType)
	case info.MemoryInfo == nil || info.MemoryInfo.SizeInMiB == nil:
		return fmt.Errorf("instance type %s: no MemoryInfo.SizeInMiB", info.InstanceType)
	case info.NetworkInfo == nil || info.NetworkInfo.Ipv4AddressesPerInterface == nil:
		return fmt.Errorf("instance type %s: no NetworkInfo.Ipv4AddressesPerInterface", info.InstanceType)
	case info.ProcessorInfo == nil:
		return fmt.Errorf("instance type %s: no ProcessorInfo", info.InstanceType)
	}
	return nil
}

// capacityMemory is the advertised memory less the Graviton CMA area and
// the VM overhead share, rounded up to whole MiB as upstream does.
func capacityMemory(info ec2types.InstanceTypeInfo, overheadPercent float64) resource.Quantity {
	mib := *info.MemoryInfo.SizeInMiB
	if archs := info.ProcessorInfo.SupportedArchitectures; len(archs) > 0 && archs[0] == ec2types.ArchitectureTypeArm64 {
		// Graviton kernels reserve 64MiB for the contiguous memory allocator.
		mib -= 64
	}
	overheadMiB := int64(math.Ceil(float64(mib<<20) * overheadPercent / 1024 / 1024))
	return *resource.NewQuantity((mib-overheadMiB)<<20, resource.BinarySI)
}

// ephemeralStorage is the size of the volume that holds kubelet's root dir.
func ephemeralStorage(info ec2types.InstanceTypeInfo, fam family, bdms []*awsv1.BlockDeviceMapping, policy *awsv1.InstanceStorePolicy) resource.Quantity {
	if policy != nil && *policy == awsv1.InstanceStorePolicyRAID0 &&
		info.InstanceStorageInfo != nil && info.InstanceStorageInfo.TotalSizeInGB != nil {
		// The RAID0 array of all instance-store disks replaces the EBS
		// volume; EC2 sizes instance store in decimal GB.
		return *resource.NewScaledQuantity(*info.InstanceStorageInfo.TotalSizeInGB, resource.Giga)
	}
	if len(bdms) > 0 {
		for _, bdm := range bdms {
			if bdm != nil && bdm.RootVolume && bdm.EBS != nil && bdm.EBS.VolumeSize != nil {
				return bdm.EBS.VolumeSize.DeepCopy()
			}
		}
		if fam.custom {
			// A custom AMI's layout is unknown; upstream takes the last
			// mapping as the data volume.
			if last := bdms[len(bdms)-1]; last != nil && last.EBS != nil && last.EBS.VolumeSize != nil {
				return last.EBS.VolumeSize.DeepCopy()
			}
			return defaultVolumeSize.DeepCopy()
		}
		for _, bdm := range bdms {
			if bdm != nil && bdm.DeviceName != nil && *bdm.DeviceName == fam.ephemeralDevice &&
				bdm.EBS != nil && bdm.EBS.VolumeSize != nil {
				return bdm.EBS.VolumeSize.DeepCopy()
			}
		}
	}
	if fam.ephemeralDevice != "" {
		return fam.ephemeralDefault.DeepCopy()
	}
	return defaultVolumeSize.DeepCopy()
}

// podCount is the kubelet's max pods: maxPods if set, else the ENI limit for
// families whose CNI hands each pod a VPC address (110 otherwise), capped by
// podsPerCore where the family supports it.
func podCount(info ec2types.InstanceTypeInfo, fam family, kubelet Kubelet, reservedENIs, efaOnly int) int64 {
	var count int64
	switch {
	case kubelet.MaxPods != nil:
		count = int64(*kubelet.MaxPods)
	case fam.eniLimitedPods:
		count = eniLimitedPods(info, reservedENIs+efaOnly)
	default:
		count = 110
	}
	if kubelet.PodsPerCore != nil && *kubelet.PodsPerCore > 0 && fam.podsPerCore {
		count = min(count, int64(*kubelet.PodsPerCore)*int64(*info.VCpuInfo.DefaultVCpus))
	}
	return count
}

// eniLimitedPods is the VPC CNI's pod limit: every usable interface of the
// default network card brings its secondary addresses, plus two host-network
// pods. The CNI uses the default card only, so multi-card types count one
// card, not the instance's total interfaces.
func eniLimitedPods(info ec2types.InstanceTypeInfo, reservedENIs int) int64 {
	enis := int64(aws32(info.NetworkInfo.MaximumNetworkInterfaces))
	cardIndex := int(aws32(info.NetworkInfo.DefaultNetworkCardIndex))
	for _, card := range info.NetworkInfo.NetworkCards {
		if int(aws32(card.NetworkCardIndex)) == cardIndex && card.MaximumNetworkInterfaces != nil {
			enis = int64(*card.MaximumNetworkInterfaces)
			break
		}
	}
	usable := max(enis-int64(reservedENIs), 0)
	if usable == 0 {
		return 0
	}
	return usable*(int64(*info.NetworkInfo.Ipv4AddressesPerInterface)-1) + 2
}

// kubeReservedCPU is the tiered CPU reservation EKS AMIs and Bottlerocket
// configure: 6% of the first core, 1% of the second, 0.5% of cores 3-4 and
// 0.25% of the rest, each tier truncated to whole millicores.
func kubeReservedCPU(milliCPU int64) resource.Quantity {
	tiers := []struct {
		start, end int64
		share      float64
	}{
		{0, 1000, 0.06},
		{1000, 2000, 0.01},
		{2000, 4000, 0.005},
		{4000, 1 << 31, 0.0025},
	}
	var reserved int64
	for _, t := range tiers {
		if milliCPU < t.start {
			break
		}
		span := min(milliCPU, t.end) - t.start
		reserved += int64(float64(span) * t.share)
	}
	return *resource.NewMilliQuantity(reserved, resource.DecimalSI)
}

// evictionThreshold is the memory and disk the kubelet keeps free: 100Mi
// and 10% of the disk by default, evictionHard's values when set.
func evictionThreshold(memory, storage resource.Quantity, hard map[string]string) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceMemory:           resource.MustParse("100Mi"),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(storage.AsApproximateFloat64()/100*10)), resource.DecimalSI),
	}
	for signal, name := range map[string]corev1.ResourceName{
		signalMemoryAvailable: corev1.ResourceMemory,
		signalNodeFSAvailable: corev1.ResourceEphemeralStorage,
	} {
		v, ok := hard[signal]
		if !ok {
			continue
		}
		base := memory
		if name == corev1.ResourceEphemeralStorage {
			base = storage
		}
		// ParseKubelet validated the value.
		s, _ := parseSignal(v)
		out[name] = s.of(base)
	}
	return out
}

// signal is an eviction threshold: a share of capacity or an absolute
// quantity.
type signal struct {
	percent   float64
	isPercent bool
	quantity  resource.Quantity
}

func parseSignal(v string) (signal, error) {
	if strings.HasSuffix(v, "%") {
		p, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil || p < 0 || p > 100 {
			return signal{}, fmt.Errorf("want a percentage between 0%% and 100%%, got %q", v)
		}
		// The kubelet reads 100% as "threshold disabled".
		if p == 100 {
			p = 0
		}
		return signal{percent: p, isPercent: true}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return signal{}, fmt.Errorf("want a percentage or a quantity, got %q: %w", v, err)
	}
	return signal{quantity: q}, nil
}

func (s signal) of(capacity resource.Quantity) resource.Quantity {
	if !s.isPercent {
		return s.quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(math.Ceil(capacity.AsApproximateFloat64()/100*s.percent)), resource.DecimalSI)
}

func gpus(info ec2types.InstanceTypeInfo, manufacturer string) int64 {
	var n int64
	if info.GpuInfo != nil {
		for _, g := range info.GpuInfo.Gpus {
			if g.Manufacturer != nil && *g.Manufacturer == manufacturer {
				n += int64(aws32(g.Count))
			}
		}
	}
	return n
}

func neuronDevices(info ec2types.InstanceTypeInfo) int64 {
	var n int64
	if info.NeuronInfo != nil {
		for _, d := range info.NeuronInfo.NeuronDevices {
			n += int64(aws32(d.Count))
		}
	}
	return n
}

// neuronCores counts the cores of the first device kind, as upstream does
// (no type mixes Neuron device kinds).
func neuronCores(info ec2types.InstanceTypeInfo) int64 {
	if info.NeuronInfo == nil || len(info.NeuronInfo.NeuronDevices) == 0 {
		return 0
	}
	d := info.NeuronInfo.NeuronDevices[0]
	if d.CoreInfo == nil {
		return 0
	}
	return int64(aws32(d.Count)) * int64(aws32(d.CoreInfo.Count))
}

// efas is the EFA device count: the type's maximum, or, when the class lays
// out its interfaces, the EFA-only interfaces it asks for.
func efas(info ec2types.InstanceTypeInfo, nis []*awsv1.NetworkInterface) int64 {
	if len(nis) > 0 {
		var n int64
		for _, ni := range nis {
			if ni != nil && ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
				n++
			}
		}
		return n
	}
	if info.NetworkInfo != nil && info.NetworkInfo.EfaInfo != nil {
		return int64(aws32(info.NetworkInfo.EfaInfo.MaximumEfaInterfaces))
	}
	return 0
}

// efaOnlyOnCard0 counts the EFA-only interfaces that take interface slots
// of the card the CNI allocates pod addresses from.
func efaOnlyOnCard0(nis []*awsv1.NetworkInterface) int {
	n := 0
	for _, ni := range nis {
		if ni != nil && ni.InterfaceType == awsv1.InterfaceTypeEFAOnly && ni.NetworkCardIndex == 0 {
			n++
		}
	}
	return n
}

func aws32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
