package state

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// updatePodMetricLocked keeps one karpenter_pods_state series per pod,
// replacing the old series when any label changes. Node-derived labels are
// as of the pod's last update.
func (c *Cluster) updatePodMetricLocked(nn types.NamespacedName, pod *corev1.Pod) {
	var nodeLabels map[string]string
	if pod.Spec.NodeName != "" {
		if entry := c.byNameLocked(pod.Spec.NodeName); entry != nil && entry.Node != nil {
			nodeLabels = entry.Node.Labels
		}
	}
	// As upstream: the API path of the first owner, whatever its kind.
	owner := ""
	if len(pod.OwnerReferences) > 0 {
		ref := pod.OwnerReferences[0]
		owner = fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", ref.APIVersion, pod.Namespace, strings.ToLower(ref.Kind), ref.Name)
	}
	ready := false
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	lv := []string{
		pod.Name, pod.Namespace, owner, pod.Spec.NodeName, strconv.FormatBool(pod.Spec.NodeName != ""),
		nodeLabels[v1.NodePoolLabelKey], nodeLabels[corev1.LabelTopologyZone], nodeLabels[corev1.LabelArchStable],
		nodeLabels[v1.CapacityTypeLabelKey], nodeLabels[corev1.LabelInstanceTypeStable], string(pod.Status.Phase),
		strconv.FormatBool(ready), strconv.FormatBool(nodeLabels[v1.NodePoolLabelKey] != ""),
	}
	if old, ok := c.podMetricLabels[nn]; ok && !equal(old, lv) {
		metrics.PodState.DeleteLabelValues(old...)
	}
	metrics.PodState.WithLabelValues(lv...).Set(1)
	c.podMetricLabels[nn] = lv
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
