package nodeclass

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Kubelet validation reasons: upstream's for fields a family drops and for
// values that do not parse; ours for reserves no instance type can hold.
const (
	ReasonUnsupportedKubeletConfiguration = "UnsupportedKubeletConfiguration"
	ReasonInvalidKubeletConfiguration     = "InvalidKubeletConfiguration"
	ReasonKubeletReservedExceedsCapacity  = "KubeletReservedExceedsCapacity"
)

// ConditionTypeFieldsSupported says whether every field the class sets
// acts on every instance type it can launch; False names the field and the
// types it cannot act on. Ready does not wait for it: the other types
// still launch.
const ConditionTypeFieldsSupported = "FieldsSupported"

// managedKubeletFields are the kubelet keys Karpenter itself renders into
// every family's bootstrap (upstream's ParsedKubeletConfig). Other keys
// reach the node only where the raw configuration is passed through.
var managedKubeletFields = map[string]bool{
	"clusterDNS": true, "maxPods": true, "podsPerCore": true, "systemReserved": true, "kubeReserved": true,
	"evictionHard": true, "evictionSoft": true, "evictionSoftGracePeriod": true, "evictionMaxPodGracePeriod": true,
	"imageGCHighThresholdPercent": true, "imageGCLowThresholdPercent": true, "cpuCFSQuota": true,
}

// passesKubeletThrough are the families whose bootstrap carries the whole
// kubelet map (AL2023's nodeadm NodeConfig; Custom, whose user data is the
// user's).
var passesKubeletThrough = map[string]bool{awsv1.AMIFamilyAL2023: true, awsv1.AMIFamilyCustom: true}

// validateKubelet checks spec.kubelet against the class's AMI family: a key
// the family would silently drop, or a value that does not parse, is a
// reason for ValidationSucceeded=False ("" when it is fine).
func validateKubelet(nc *awsv1.EC2NodeClass) (reason, message string) {
	family := nc.AMIFamily()
	if !passesKubeletThrough[family] {
		var dropped []string
		for key := range nc.Spec.Kubelet {
			if !managedKubeletFields[key] {
				dropped = append(dropped, key)
			}
		}
		if family == awsv1.AMIFamilyBottlerocket {
			// Bottlerocket's settings have no pods-per-core knob.
			if _, ok := nc.Spec.Kubelet["podsPerCore"]; ok {
				dropped = append(dropped, "podsPerCore")
			}
		}
		if len(dropped) > 0 {
			sort.Strings(dropped)
			return ReasonUnsupportedKubeletConfiguration, fmt.Sprintf(
				"spec.kubelet fields %s are not applied by the %s AMI family (only AL2023 and Custom pass kubelet fields Karpenter does not manage through)",
				strings.Join(dropped, ", "), family)
		}
	}
	if _, err := instancetype.ParseKubelet(nc.Spec.Kubelet); err != nil {
		return ReasonInvalidKubeletConfiguration, fmt.Sprintf("spec.kubelet: %v", err)
	}
	return "", ""
}

// InstanceTypes lists the instance types a class can launch
// (instancetypes.Provider).
type InstanceTypes interface {
	List(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]*scheduling.InstanceType, error)
}

// reservedFit finds the instance types whose kubelet reserves (kube- and
// system-reserved and the hard eviction thresholds) leave no CPU or memory
// for pods. all is true when that is every type the class lists.
func reservedFit(its []*scheduling.InstanceType) (tooSmall []string, all bool) {
	for _, it := range its {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			capacity, ok := it.Capacity[name]
			if !ok {
				continue
			}
			overhead := it.Overhead[name]
			if capacity.Cmp(overhead) <= 0 {
				tooSmall = append(tooSmall, it.Name)
				break
			}
		}
	}
	sort.Strings(tooSmall)
	return tooSmall, len(its) > 0 && len(tooSmall) == len(its)
}

// fieldsSupported sets ConditionTypeFieldsSupported from what the class's
// fields cannot act on; reserves that fit no type at all fail validation
// instead (returned as reason and message).
func (c *Controller) fieldsSupported(ctx context.Context, nc *awsv1.EC2NodeClass) (reason, message string, err error) {
	if c.opts.InstanceTypes == nil {
		return "", "", nil
	}
	its, err := c.opts.InstanceTypes.List(ctx, nc)
	if err != nil {
		return "", "", fmt.Errorf("listing instance types: %w", err)
	}
	tooSmall, all := reservedFit(its)
	reserves := "spec.kubelet kubeReserved, systemReserved and evictionHard"
	switch {
	case all:
		setFalse(nc, ConditionTypeFieldsSupported, ReasonKubeletReservedExceedsCapacity,
			fmt.Sprintf("%s leave no CPU or memory for pods on any of the %d instance types", reserves, len(its)))
		return ReasonKubeletReservedExceedsCapacity, fmt.Sprintf("%s exceed the capacity of every instance type, the smallest included", reserves), nil
	case len(tooSmall) > 0:
		setFalse(nc, ConditionTypeFieldsSupported, ReasonKubeletReservedExceedsCapacity,
			fmt.Sprintf("%s leave no CPU or memory for pods on %d of %d instance types: %s",
				reserves, len(tooSmall), len(its), prettySlice(tooSmall, 10)))
	default:
		setTrue(nc, ConditionTypeFieldsSupported)
	}
	return "", "", nil
}
