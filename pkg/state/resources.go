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
