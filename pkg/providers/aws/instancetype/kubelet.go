package instancetype

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// Eviction signals that reduce allocatable.
const (
	signalMemoryAvailable = "memory.available"
	signalNodeFSAvailable = "nodefs.available"
)

// Kubelet is the part of spec.kubelet that shapes capacity and overhead.
// The EC2NodeClass keeps kubelet settings as an open map; only these keys
// matter here, and the rest are ignored.
type Kubelet struct {
	MaxPods        *int32
	PodsPerCore    *int32
	KubeReserved   map[string]string
	SystemReserved map[string]string
	EvictionHard   map[string]string
	// EvictionSoft is parsed for completeness but, as upstream, never
	// lowers allocatable: it is a warning threshold, not a hard floor.
	EvictionSoft map[string]string
}

// ParseKubelet reads the capacity-relevant keys of spec.kubelet. Values must
// be static (integers and quantities): CEL expressions need upstream's
// NodeClassCEL gate, which is off by default and not implemented here.
func ParseKubelet(kc awsv1.KubeletConfiguration) (Kubelet, error) {
	var out Kubelet
	for key, dst := range map[string]**int32{"maxPods": &out.MaxPods, "podsPerCore": &out.PodsPerCore} {
		raw, ok := kc[key]
		if !ok || isNull(raw.Raw) {
			continue
		}
		var n int32
		if err := json.Unmarshal(raw.Raw, &n); err != nil {
			return Kubelet{}, fmt.Errorf("kubelet %s: want an integer, got %s: %w", key, raw.Raw, err)
		}
		if n < 0 {
			return Kubelet{}, fmt.Errorf("kubelet %s: must not be negative, got %d", key, n)
		}
		*dst = &n
	}
	for key, dst := range map[string]*map[string]string{
		"kubeReserved": &out.KubeReserved, "systemReserved": &out.SystemReserved,
		"evictionHard": &out.EvictionHard, "evictionSoft": &out.EvictionSoft,
	} {
		raw, ok := kc[key]
		if !ok || isNull(raw.Raw) {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(raw.Raw, &m); err != nil {
			return Kubelet{}, fmt.Errorf("kubelet %s: want a map of strings, got %s: %w", key, raw.Raw, err)
		}
		*dst = m
	}
	// Validate once here so that the computation can treat values as sound.
	for key, m := range map[string]map[string]string{"kubeReserved": out.KubeReserved, "systemReserved": out.SystemReserved} {
		for _, name := range sortedKeys(m) {
			if _, err := resource.ParseQuantity(m[name]); err != nil {
				return Kubelet{}, fmt.Errorf("kubelet %s[%s]: %w", key, name, err)
			}
		}
	}
	for key, m := range map[string]map[string]string{"evictionHard": out.EvictionHard, "evictionSoft": out.EvictionSoft} {
		for _, signal := range []string{signalMemoryAvailable, signalNodeFSAvailable} {
			if v, ok := m[signal]; ok {
				if _, err := parseSignal(v); err != nil {
					return Kubelet{}, fmt.Errorf("kubelet %s[%s]: %w", key, signal, err)
				}
			}
		}
	}
	return out, nil
}

func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

// reservedList turns a kubeReserved/systemReserved map into resources.
// ParseKubelet has validated every value.
func reservedList(m map[string]string) corev1.ResourceList {
	out := make(corev1.ResourceList, len(m))
	for k, v := range m {
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
