package state

import (
	corev1 "k8s.io/api/core/v1"
)

func addInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		sum := dst[name]
		sum.Add(q)
		dst[name] = sum
	}
}

// maxInto raises each resource of dst to at least src's.
func maxInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

// podLimits is what a pod may use at most: its containers' limits summed,
// raised to any larger init-container limit (sidecars add to both), plus
// the pod overhead for resources that have a limit.
func podLimits(pod *corev1.Pod) corev1.ResourceList {
	apps := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addInto(apps, pod.Spec.Containers[i].Resources.Limits)
	}
	sidecars, peak := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addInto(sidecars, c.Resources.Limits)
			maxInto(peak, sidecars)
			continue
		}
		step := sidecars.DeepCopy()
		addInto(step, c.Resources.Limits)
		maxInto(peak, step)
	}
	addInto(apps, sidecars)
	maxInto(apps, peak)
	for name, q := range pod.Spec.Overhead {
		if cur, ok := apps[name]; ok {
			cur.Add(q)
			apps[name] = cur
		}
	}
	return apps
}
