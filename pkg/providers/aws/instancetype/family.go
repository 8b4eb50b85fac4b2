package instancetype

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// family holds what an AMI family changes about capacity and overhead. The
// flags mirror upstream's per-family feature flags.
type family struct {
	name string
	// eniLimitedPods: without maxPods, pods come from the ENI limits;
	// otherwise the kubelet's default of 110 applies.
	eniLimitedPods bool
	// podsPerCore: kubelet podsPerCore caps pods (Bottlerocket's settings
	// have no such knob, so it ignores it).
	podsPerCore bool
	// eniLimitedMemoryOverhead: kube-reserved memory is sized from the
	// ENI-limited pod count (with no reserved ENIs), whatever maxPods says,
	// because that is what the family's bootstrap reserves on the node.
	eniLimitedMemoryOverhead bool
	// ephemeralDevice is the block device holding kubelet's root dir, and
	// ephemeralDefault its size when the EC2NodeClass does not say.
	ephemeralDevice  string
	ephemeralDefault resource.Quantity
	// windows families run only amd64 types and advertise Windows build
	// and PrivateIPv4Address.
	windows      bool
	windowsBuild string
	custom       bool
}

// defaultVolumeSize is upstream's default EBS volume (and ephemeral-storage)
// size when a family defines no ephemeral device.
var defaultVolumeSize = resource.MustParse("20Gi")

func familyFor(amiFamily string) (family, error) {
	switch amiFamily {
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023:
		return family{
			name: amiFamily, eniLimitedPods: true, podsPerCore: true, eniLimitedMemoryOverhead: true,
			ephemeralDevice: "/dev/xvda", ephemeralDefault: resource.MustParse("20Gi"),
		}, nil
	case awsv1.AMIFamilyBottlerocket:
		// Bottlerocket's root volume /dev/xvda (4Gi) holds the OS only;
		// kubelet and containers live on the data volume /dev/xvdb.
		return family{
			name: amiFamily, eniLimitedPods: true,
			ephemeralDevice: "/dev/xvdb", ephemeralDefault: resource.MustParse("20Gi"),
		}, nil
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return family{
			name: amiFamily, podsPerCore: true,
			ephemeralDevice: "/dev/sda1", ephemeralDefault: resource.MustParse("50Gi"),
			windows: true, windowsBuild: windowsBuilds[amiFamily],
		}, nil
	case awsv1.AMIFamilyCustom:
		return family{
			name: amiFamily, eniLimitedPods: true, podsPerCore: true, eniLimitedMemoryOverhead: true,
			custom: true,
		}, nil
	case "":
		return family{}, fmt.Errorf("the EC2NodeClass names no AMI family (no amiFamily and no alias term)")
	default:
		return family{}, fmt.Errorf("unknown AMI family %q", amiFamily)
	}
}

// windowsBuilds are the node.kubernetes.io/windows-build values of each
// Windows family.
var windowsBuilds = map[string]string{
	awsv1.AMIFamilyWindows2019: "10.0.17763",
	awsv1.AMIFamilyWindows2022: "10.0.20348",
	awsv1.AMIFamilyWindows2025: "10.0.26100",
}
