package kwok

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The catalog mirrors EC2 instance types, and labels them with the EC2
// provider's keys (karpenter.k8s.aws/...), so that NodePools and pods
// written for EC2NodeClass pools select kwok nodes the same way. The keys
// are spelled out here rather than imported, so that the simulated provider
// does not depend on the AWS provider's API; a test checks that they stay
// equal to the AWS provider's.
const ec2Group = "karpenter.k8s.aws"

// ec2Label is the EC2 provider's instance label karpenter.k8s.aws/instance-<property>.
func ec2Label(property string) string { return ec2Group + "/instance-" + property }

// Extended resources of the catalog's accelerated EC2 types.
const (
	resourceNVIDIAGPU     corev1.ResourceName = "nvidia.com/gpu"
	resourceAMDGPU        corev1.ResourceName = "amd.com/gpu"
	resourceAWSNeuron     corev1.ResourceName = "aws.amazon.com/neuron"
	resourceAWSNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore"
)

// ec2WellKnownLabels are the EC2 provider's well-known label keys: pods on a
// kwok cluster may select on them as on an EC2 one.
var ec2WellKnownLabels = func() sets.Set[string] {
	out := sets.New("topology.k8s.aws/zone-id", ec2Group+"/nitro-sandbox", ec2Group+"/capacity-reservation-id",
		ec2Group+"/capacity-reservation-type", ec2Group+"/capacity-reservation-interruptible",
		ec2Group+"/placement-group-id", ec2Group+"/placement-group-partition")
	for _, property := range []string{"category", "family", "generation", "size", "cpu", "cpu-manufacturer",
		"cpu-sustained-clock-speed-mhz", "memory", "ebs-bandwidth", "network-bandwidth", "local-nvme", "hypervisor",
		"encryption-in-transit-supported", "capability-flex", "gpu-name", "gpu-manufacturer", "gpu-count", "gpu-memory",
		"accelerator-name", "accelerator-manufacturer", "accelerator-count", "tenancy"} {
		out.Insert(ec2Label(property))
	}
	return out
}()
