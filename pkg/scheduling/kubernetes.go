package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// The rules below are Kubernetes' own, in one place: the solver,
// disruption, drain and the providers all decide with them, so that none
// disagrees with the kube-scheduler or the kubelet.

// TolerationComparisonOperators is whether tolerations with the Lt and Gt
// operators match numerically, as the kube-scheduler's
// TaintTolerationComparisonOperators feature gate decides. The gate is
// alpha and off by default in the Kubernetes release this project builds
// against, so such a toleration tolerates nothing, as the kube-scheduler
// then decides.
const TolerationComparisonOperators = false

// Tolerates reports whether the tolerations cover the taint, by
// corev1.Toleration.ToleratesTaint.
func Tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, TolerationComparisonOperators) {
			return true
		}
	}
	return false
}

// IsStaticPod reports whether the kubelet runs the pod from a manifest (a
// mirror pod, owned by its Node): it is tied to its node, never moved,
// evicted or planned for elsewhere.
func IsStaticPod(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return IsOwnedBy(p, "Node")
}

// IsOwnedBy reports whether one of the pod's owners is of the kind.
func IsOwnedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

// NodeReady reports whether the Node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Fits reports whether requests fit in allocatable, resource by resource,
// as the kubelet admits a pod: a resource the node does not have fits only
// a zero request.
func Fits(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		a, ok := allocatable[name]
		if !ok {
			if q.IsZero() {
				continue
			}
			return false
		}
		if q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}
