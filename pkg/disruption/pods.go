package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// active pods are neither finished nor terminating: only they can hold a
// node with do-not-disrupt, and only they need a new home.
func active(p *corev1.Pod) bool { return !terminal(p) && p.DeletionTimestamp.IsZero() }

func ownedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

func static(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return ownedBy(p, "Node")
}

// toleratesDisrupted: such pods are meant to stay until the node goes, so
// drain leaves them and they need no new home.
func toleratesDisrupted(p *corev1.Pod) bool {
	t := v1.DisruptedNoScheduleTaint
	for _, tol := range p.Spec.Tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if tol.Key != "" && tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

// Reschedulable reports whether the pod must find another node when its
// node goes: active, not a DaemonSet or static pod, and not tolerating the
// disrupted taint.
func Reschedulable(p *corev1.Pod) bool {
	return active(p) && !ownedBy(p, "DaemonSet") && !static(p) && !toleratesDisrupted(p)
}

// evictable pods are the ones drain would evict, so only their PDBs count.
func evictable(p *corev1.Pod) bool {
	return active(p) && !static(p) && !toleratesDisrupted(p)
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
