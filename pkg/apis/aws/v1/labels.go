package v1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Well-known labels the AWS provider puts on NodeClaims and Nodes. They
// describe the instance type (from DescribeInstanceTypes) or the offering,
// so NodePools and pods may select on them.
const (
	LabelInstanceCategory                     = Group + "/instance-category"
	LabelInstanceFamily                       = Group + "/instance-family"
	LabelInstanceGeneration                   = Group + "/instance-generation"
	LabelInstanceSize                         = Group + "/instance-size"
	LabelInstanceCPU                          = Group + "/instance-cpu"
	LabelInstanceCPUManufacturer              = Group + "/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz    = Group + "/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                       = Group + "/instance-memory"
	LabelInstanceEBSBandwidth                 = Group + "/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth             = Group + "/instance-network-bandwidth"
	LabelInstanceLocalNVME                    = Group + "/instance-local-nvme"
	LabelInstanceHypervisor                   = Group + "/instance-hypervisor"
	LabelInstanceEncryptionInTransitSupported = Group + "/instance-encryption-in-transit-supported"
	LabelInstanceCapabilityFlex               = Group + "/instance-capability-flex"
	LabelInstanceGPUName                      = Group + "/instance-gpu-name"
	LabelInstanceGPUManufacturer              = Group + "/instance-gpu-manufacturer"
	LabelInstanceGPUCount                     = Group + "/instance-gpu-count"
	LabelInstanceGPUMemory                    = Group + "/instance-gpu-memory"
	LabelInstanceAcceleratorName              = Group + "/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer      = Group + "/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount             = Group + "/instance-accelerator-count"
	LabelInstanceTenancy                      = Group + "/instance-tenancy"
	LabelNitroSandbox                         = Group + "/nitro-sandbox"
	LabelCapacityReservationID                = Group + "/capacity-reservation-id"
	LabelCapacityReservationType              = Group + "/capacity-reservation-type"
	LabelCapacityReservationInterruptible     = Group + "/capacity-reservation-interruptible"
	LabelPlacementGroupID                     = Group + "/placement-group-id"
	LabelPlacementGroupPartition              = Group + "/placement-group-partition"
	LabelTopologyZoneID                       = "topology.k8s.aws/zone-id"

	// LabelNodeClass carries the EC2NodeClass name on NodeClaims and Nodes
	// (core derives it as <group>/<lowercase kind>; spelled out here too).
	LabelNodeClass = Group + "/ec2nodeclass"

	// Values of LabelInstanceTenancy.
	InstanceTenancyDefault   = "default"
	InstanceTenancyDedicated = "dedicated"
)

// Annotations and the finalizer the AWS provider manages.
const (
	// AnnotationEC2NodeClassHash is the spec hash stamped on the class and
	// its NodeClaims; differing hashes (same version) mean static drift.
	AnnotationEC2NodeClassHash = Group + "/ec2nodeclass-hash"
	// AnnotationEC2NodeClassHashVersion guards against comparing hashes
	// computed by different algorithms after an upgrade.
	AnnotationEC2NodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	// EC2NodeClassHashVersion is the current hash algorithm version.
	EC2NodeClassHashVersion = "v6"

	// AnnotationRebalanceRecommendation (ours) marks a NodeClaim whose
	// instance EC2 recommended rebalancing, with the time the message
	// arrived; with INTERRUPTION_REPLACE_ON_REBALANCE the provider reports
	// it drifted, so it is replaced, replacement first, under the budgets.
	AnnotationRebalanceRecommendation = Group + "/rebalance-recommendation"

	// AnnotationInstanceTagged marks a NodeClaim whose instance got its
	// post-registration tags.
	AnnotationInstanceTagged = Group + "/tagged"
	// AnnotationClusterNameTaggedCompatibility marks a NodeClaim whose
	// instance got the eks:eks-cluster-name tag added after the fact.
	AnnotationClusterNameTaggedCompatibility = "compatibility." + Group + "/cluster-name-tagged"
	// AnnotationInstanceProfile records the instance profile a NodeClaim
	// launched with, so garbage collection keeps it while in use.
	AnnotationInstanceProfile = Group + "/instance-profile-name"

	// TerminationFinalizer holds an EC2NodeClass until no NodeClaim uses it
	// and its launch templates and instance profile are cleaned up.
	TerminationFinalizer = Group + "/termination"
)

// EC2 tag keys Karpenter writes on the resources it creates.
const (
	EKSClusterNameTagKey          = "eks:eks-cluster-name"
	KubernetesClusterTagKeyPrefix = "kubernetes.io/cluster/"
	NodeClassTagKey               = LabelNodeClass
	NodeClaimTagKey               = "karpenter.sh/nodeclaim"
	NameTagKey                    = "Name"
	// LaunchTemplateNamePrefix prefixes the names of launch templates
	// Karpenter owns, which is how it finds them to clean up.
	LaunchTemplateNamePrefix = Group
)

// Extended resources AWS instance types advertise.
const (
	ResourceNVIDIAGPU          corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU             corev1.ResourceName = "amd.com/gpu"
	ResourceAWSNeuron          corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceAWSNeuronCore      corev1.ResourceName = "aws.amazon.com/neuroncore"
	ResourceHabanaGaudi        corev1.ResourceName = "habana.ai/gaudi"
	ResourceAWSPodENI          corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	ResourceEFA                corev1.ResourceName = "vpc.amazonaws.com/efa"
	ResourcePrivateIPv4Address corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"
	ResourceNitroSandbox       corev1.ResourceName = "eks.amazonaws.com/nitro-sandbox"
)

// AMI families accepted by spec.amiFamily.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
)

var (
	// WellKnownLabels are the AWS label keys users may select on even though
	// their domain is restricted. Whoever assembles the full well-known set
	// (core plus providers) unions this in.
	WellKnownLabels = sets.New(
		LabelInstanceCategory,
		LabelInstanceFamily,
		LabelInstanceGeneration,
		LabelInstanceSize,
		LabelInstanceCPU,
		LabelInstanceCPUManufacturer,
		LabelInstanceCPUSustainedClockSpeedMhz,
		LabelInstanceMemory,
		LabelInstanceEBSBandwidth,
		LabelInstanceNetworkBandwidth,
		LabelInstanceLocalNVME,
		LabelInstanceHypervisor,
		LabelInstanceEncryptionInTransitSupported,
		LabelInstanceCapabilityFlex,
		LabelInstanceGPUName,
		LabelInstanceGPUManufacturer,
		LabelInstanceGPUCount,
		LabelInstanceGPUMemory,
		LabelInstanceAcceleratorName,
		LabelInstanceAcceleratorManufacturer,
		LabelInstanceAcceleratorCount,
		LabelInstanceTenancy,
		LabelNitroSandbox,
		LabelCapacityReservationID,
		LabelCapacityReservationType,
		LabelCapacityReservationInterruptible,
		LabelPlacementGroupID,
		LabelPlacementGroupPartition,
		LabelTopologyZoneID,
	)

	// RestrictedLabelDomains are label domains users may not set labels in
	// (other than WellKnownLabels), so only the provider can claim them.
	RestrictedLabelDomains = sets.New(Group)

	// RestrictedTagPatterns match the tag keys Karpenter owns; the CRD
	// refuses them in spec.tags and code building tags can reuse the list.
	RestrictedTagPatterns = []string{
		EKSClusterNameTagKey,
		KubernetesClusterTagKeyPrefix,
		"karpenter.sh/nodepool",
		NodeClaimTagKey,
		NodeClassTagKey,
	}

	// ExoticResources are accelerator resources. Instance types offering
	// them are avoided unless a pod asks for one, since they cost more.
	ExoticResources = sets.New(
		ResourceNVIDIAGPU,
		ResourceAMDGPU,
		ResourceAWSNeuron,
		ResourceAWSNeuronCore,
		ResourceHabanaGaudi,
	)

	// aliasFamilies maps the lowercase family of an alias term to the
	// amiFamily value it implies.
	aliasFamilies = map[string]string{
		"al2":          AMIFamilyAL2,
		"al2023":       AMIFamilyAL2023,
		"bottlerocket": AMIFamilyBottlerocket,
		"windows2019":  AMIFamilyWindows2019,
		"windows2022":  AMIFamilyWindows2022,
		"windows2025":  AMIFamilyWindows2025,
	}
)

// AMIFamilyFromAlias returns the amiFamily an alias such as "al2023@latest"
// implies, or "" when the family is not known.
func AMIFamilyFromAlias(alias string) string {
	family, _, _ := strings.Cut(alias, "@")
	return aliasFamilies[family]
}

// AMIVersionFromAlias returns the version part of an alias, or "" when the
// alias has no "@".
func AMIVersionFromAlias(alias string) string {
	_, version, _ := strings.Cut(alias, "@")
	return version
}

// Alias returns the alias term's value, or "" when the class selects AMIs
// some other way. CEL guarantees an alias term is the only term.
func (in *EC2NodeClass) Alias() string {
	for _, term := range in.Spec.AMISelectorTerms {
		if term.Alias != "" {
			return term.Alias
		}
	}
	return ""
}

// AMIFamily resolves the effective AMI family: spec.amiFamily when set,
// otherwise the family implied by the alias term.
func (in *EC2NodeClass) AMIFamily() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	return AMIFamilyFromAlias(in.Alias())
}
