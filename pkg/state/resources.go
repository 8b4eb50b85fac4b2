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
