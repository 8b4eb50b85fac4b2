package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// active pods are neither finished nor terminating: only they can hold a
// node with do-not-disrupt, and only they need a new home.
func active(p *corev1.Pod) bool { return !terminal(p) && p.DeletionTimestamp.IsZero() }

// Reschedulable reports whether the pod must find another node when its
// node goes: the snapshot builder's rule (snapshot.Reschedulable), so that
// what a decision counts as evicted is what a simulation moves.
func Reschedulable(p *corev1.Pod) bool { return snapshot.Reschedulable(p) }

// evictable pods are the ones drain would evict, so only their PDBs count.
func evictable(p *corev1.Pod) bool {
	return active(p) && !scheduling.IsStaticPod(p) && !scheduling.Tolerates(p.Spec.Tolerations, &v1.DisruptedNoScheduleTaint)
}

// doNotDisrupt reads the pod's karpenter.sh/do-not-disrupt annotation:
// "true" protects the pod while it is active; a duration protects it until
// it is that old. Any other value is invalid and ignored.
func doNotDisrupt(p *corev1.Pod, now time.Time) (blocked bool, until *time.Time, invalid bool) {
	v, ok := p.Annotations[v1.DoNotDisruptAnnotationKey]
	if !ok || !active(p) {
		return false, nil, false
	}
	if v == "true" {
		return true, nil, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return false, nil, true
	}
	end := p.CreationTimestamp.Add(d)
	if now.Before(end) {
		return true, &end, false
	}
	return false, nil, false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
