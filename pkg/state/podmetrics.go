package state

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	owner := ""
	if ref := metav1.GetControllerOf(pod); ref != nil {
		owner = ref.Kind + "/" + ref.Name
	}
	lv := []string{
		pod.Name, pod.Namespace, owner, pod.Spec.NodeName,
		nodeLabels[v1.NodePoolLabelKey], nodeLabels[corev1.LabelTopologyZone], nodeLabels[corev1.LabelArchStable],
		nodeLabels[v1.CapacityTypeLabelKey], nodeLabels[corev1.LabelInstanceTypeStable], string(pod.Status.Phase),
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
