package kwok

import (
	"testing"

	"github.com/stretchr/testify/assert"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// TestEC2LabelsMatchTheAWSProvider keeps the EC2 keys the kwok catalog
// writes equal to the AWS provider's, so that a NodePool selects kwok and
// EC2 nodes alike.
func TestEC2LabelsMatchTheAWSProvider(t *testing.T) {
	assert.ElementsMatch(t, awsv1.WellKnownLabels.UnsortedList(), ec2WellKnownLabels.UnsortedList())
	for property, aws := range map[string]string{
		"category": awsv1.LabelInstanceCategory, "family": awsv1.LabelInstanceFamily, "generation": awsv1.LabelInstanceGeneration,
		"size": awsv1.LabelInstanceSize, "cpu": awsv1.LabelInstanceCPU, "cpu-manufacturer": awsv1.LabelInstanceCPUManufacturer,
		"memory": awsv1.LabelInstanceMemory, "hypervisor": awsv1.LabelInstanceHypervisor, "gpu-name": awsv1.LabelInstanceGPUName,
		"gpu-manufacturer": awsv1.LabelInstanceGPUManufacturer, "gpu-count": awsv1.LabelInstanceGPUCount,
		"gpu-memory": awsv1.LabelInstanceGPUMemory, "accelerator-name": awsv1.LabelInstanceAcceleratorName,
		"accelerator-manufacturer": awsv1.LabelInstanceAcceleratorManufacturer, "accelerator-count": awsv1.LabelInstanceAcceleratorCount,
	} {
		assert.Equal(t, aws, ec2Label(property))
	}
	for kwok, aws := range map[string]string{
		string(resourceNVIDIAGPU): string(awsv1.ResourceNVIDIAGPU), string(resourceAMDGPU): string(awsv1.ResourceAMDGPU),
		string(resourceAWSNeuron): string(awsv1.ResourceAWSNeuron), string(resourceAWSNeuronCore): string(awsv1.ResourceAWSNeuronCore),
	} {
		assert.Equal(t, aws, kwok)
	}
}
