package state

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// podState is what karpenter_pods_state needs of a pod that the node does
// not say: its strings are the pod's own (no copies), and the node's labels
// are read at the scrape. Keeping this instead of a series per pod saves
// the thirteen label pairs each series holds for the pod's life.
type podState struct {
	ownerAPIVersion, ownerKind, ownerName string
	node                                  string
	phase                                 corev1.PodPhase
	ready                                 bool
}

// updatePodStateLocked records what a pod's karpenter_pods_state series is
// computed from.
func (c *Cluster) updatePodStateLocked(nn types.NamespacedName, pod *corev1.Pod) {
	s := podState{node: pod.Spec.NodeName, phase: pod.Status.Phase}
	if len(pod.OwnerReferences) > 0 {
		ref := pod.OwnerReferences[0]
		s.ownerAPIVersion, s.ownerKind, s.ownerName = ref.APIVersion, ref.Kind, ref.Name
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			s.ready = true
		}
	}
	c.podStates[nn] = s
}

// emitPodStates is karpenter_pods_state's source: a series of value 1 per
// pod, with the labels upstream's pod metrics controller sets; the node's
// labels are as the node has them now.
func (c *Cluster) emitPodStates(emit func(float64, ...string)) {
	c.mu.RLock()
	series := make([][]string, 0, len(c.podStates))
	for nn, s := range c.podStates {
		var nodeLabels map[string]string
		if s.node != "" {
			if entry := c.byNameLocked(s.node); entry != nil && entry.Node != nil {
				nodeLabels = entry.Node.Labels
			}
		}
		// As upstream: the API path of the first owner, whatever its kind.
		owner := ""
		if s.ownerKind != "" {
			owner = "/apis/" + s.ownerAPIVersion + "/namespaces/" + nn.Namespace + "/" + strings.ToLower(s.ownerKind) + "s/" + s.ownerName
		}
		series = append(series, []string{
			nn.Name, nn.Namespace, owner, s.node, strconv.FormatBool(s.node != ""),
			nodeLabels[v1.NodePoolLabelKey], nodeLabels[corev1.LabelTopologyZone], nodeLabels[corev1.LabelArchStable],
			nodeLabels[v1.CapacityTypeLabelKey], nodeLabels[corev1.LabelInstanceTypeStable], string(s.phase),
			strconv.FormatBool(s.ready), strconv.FormatBool(nodeLabels[v1.NodePoolLabelKey] != ""),
		})
	}
	c.mu.RUnlock()
	// Emitted outside the lock: the informers need not wait for the scrape.
	for _, lv := range series {
		emit(1, lv...)
	}
}

// publishPodStates makes this cluster the source of karpenter_pods_state.
func (c *Cluster) publishPodStates() { metrics.PodState.SetSource(c.emitPodStates) }
