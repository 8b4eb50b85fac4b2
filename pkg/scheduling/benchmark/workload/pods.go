package workload

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Label keys and values the workload uses. "my-affininity" is misspelled on
// purpose: it is the key upstream's pods carry.
const (
	Namespace        = "default"
	ClusterLabel     = "testing/cluster"
	ClusterValue     = "unspecified"
	MyLabel          = "my-label"
	MyAffinityLabel  = "my-affininity"
	AppLabel         = "app"
	AppValue         = "nginx"
	ZoneKey          = corev1.LabelTopologyZone
	HostnameKey      = corev1.LabelHostname
	PreferredZone    = "test-zone-1"
	containerName    = "app"
	preferZoneWeight = 1
	antiZoneWeight   = 10
	antiHostWeight   = 1
)

// Build turns records into pods. Only UIDs, names and timestamps come from
// outside the seeded stream, so Build never changes what later cases draw.
func (s *Stream) Build(recs []Record) []*corev1.Pod {
	out := make([]*corev1.Pod, len(recs))
	for i, r := range recs {
		out[i] = s.pod(r)
	}
	return out
}

func (s *Stream) pod(r Record) *corev1.Pod {
	uid, err := uuid.NewRandomFromReader(s.uidReader())
	if err != nil {
		// Only a failing custom reader gets here; crypto/rand does not fail.
		panic(fmt.Sprintf("workload: generating pod UID: %v", err))
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "bench-" + uid.String(),
			Namespace:         Namespace,
			UID:               types.UID(uid.String()),
			CreationTimestamp: metav1.NewTime(s.now().Truncate(time.Second)), // API timestamps have 1s resolution
			Labels:            map[string]string{ClusterLabel: ClusterValue},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: containerName,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(r.CPUMilli, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(r.MemMi<<20, resource.BinarySI),
				}},
			}},
		},
	}
	switch r.Group {
	case Generic:
		p.Labels[MyLabel] = r.Label
	case SpreadZone, SpreadHostname:
		p.Labels[MyLabel] = r.Label
		key := ZoneKey
		if r.Group == SpreadHostname {
			key = HostnameKey
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     matchLabels(MyLabel, r.Selector),
		}}
	case AffinityZone:
		p.Labels[MyAffinityLabel] = r.Label
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: matchLabels(MyAffinityLabel, r.Label), TopologyKey: ZoneKey},
			},
		}}
	case AntiHostname:
		p.Labels[AppLabel] = AppValue
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: matchLabels(AppLabel, AppValue), TopologyKey: HostnameKey},
			},
		}}
	case Preference:
		p.Labels[AppLabel] = AppValue
		p.Spec.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
					Weight: preferZoneWeight,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: ZoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{PreferredZone}},
					}},
				}},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
					{Weight: antiZoneWeight, PodAffinityTerm: corev1.PodAffinityTerm{
						LabelSelector: matchLabels(AppLabel, AppValue), TopologyKey: ZoneKey}},
					{Weight: antiHostWeight, PodAffinityTerm: corev1.PodAffinityTerm{
						LabelSelector: matchLabels(AppLabel, AppValue), TopologyKey: HostnameKey}},
				},
			},
		}
	}
	return p
}

func matchLabels(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}
