package state

import (
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// podState is what karpenter_pods_state needs of a pod that the node does
// not say: its strings are the pod's own (no copies), and the node's labels
// are read at the scrape.
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

// podSeriesCache keeps each pod's karpenter_pods_state series between
// scrapes while its labels stay the same, so that a scrape builds label
// pairs only for pods and nodes that changed; the pairs other pods have too
// (namespace, owner, node, node labels, phase) are shared.
type podSeriesCache struct {
	mu     sync.Mutex
	shared metrics.LabelPairs
	byPod  map[types.NamespacedName]podSeries
}

type podSeries struct {
	key    podSeriesKey
	series *metrics.Series
}

// podSeriesKey is everything a pod's series is labelled from.
type podSeriesKey struct {
	state                                            podState
	nodePool, zone, arch, capacityType, instanceType string
}

// emitPodStates is karpenter_pods_state's source: a series of value 1 per
// pod, with the labels upstream's pod metrics controller sets; the node's
// labels are as the node has them now.
func (c *Cluster) emitPodStates(emit func(float64, *metrics.Series)) {
	c.mu.RLock()
	cache := &c.podSeries
	cache.mu.Lock()
	if cache.byPod == nil {
		cache.byPod = map[types.NamespacedName]podSeries{}
	}
	series := make([]*metrics.Series, 0, len(c.podStates))
	for nn, s := range c.podStates {
		key := podSeriesKey{state: s}
		if s.node != "" {
			if entry := c.byNameLocked(s.node); entry != nil && entry.Node != nil {
				labels := entry.Node.Labels
				key.nodePool, key.zone, key.arch = labels[v1.NodePoolLabelKey], labels[corev1.LabelTopologyZone], labels[corev1.LabelArchStable]
				key.capacityType, key.instanceType = labels[v1.CapacityTypeLabelKey], labels[corev1.LabelInstanceTypeStable]
			}
		}
		cached, ok := cache.byPod[nn]
		if !ok || cached.key != key {
			cached = podSeries{key: key, series: podStateSeries(nn, key, &cache.shared)}
			cache.byPod[nn] = cached
		}
		if cached.series != nil {
			series = append(series, cached.series)
		}
	}
	if len(cache.byPod) > len(c.podStates) {
		for nn := range cache.byPod {
			if _, ok := c.podStates[nn]; !ok {
				delete(cache.byPod, nn)
			}
		}
	}
	cache.mu.Unlock()
	c.mu.RUnlock()
	// Emitted outside the lock: the informers need not wait for the scrape.
	for _, s := range series {
		emit(1, s)
	}
}

// podStateSeries builds a pod's series; nil when its labels do not fit.
func podStateSeries(nn types.NamespacedName, key podSeriesKey, shared *metrics.LabelPairs) *metrics.Series {
	s := key.state
	// As upstream: the API path of the first owner, whatever its kind.
	owner := ""
	if s.ownerKind != "" {
		owner = "/apis/" + s.ownerAPIVersion + "/namespaces/" + nn.Namespace + "/" + strings.ToLower(s.ownerKind) + "s/" + s.ownerName
	}
	values := []string{
		nn.Name, nn.Namespace, owner, s.node, strconv.FormatBool(s.node != ""),
		key.nodePool, key.zone, key.arch, key.capacityType, key.instanceType, string(s.phase),
		strconv.FormatBool(s.ready), strconv.FormatBool(key.nodePool != ""),
	}
	series, ok := metrics.PodState.SeriesOf(values, shared, 0)
	if !ok {
		return nil
	}
	return series
}

// publishPodStates makes this cluster the source of karpenter_pods_state.
func (c *Cluster) publishPodStates() { metrics.PodState.SetSeriesSource(c.emitPodStates) }
