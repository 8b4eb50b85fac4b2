package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// untolerated returns the first taint that blocks the pod, or nil. With
// preferNoSchedule the soft PreferNoSchedule taints are treated as hard, the
// way Karpenter does until the preference is relaxed.
func untolerated(tols []corev1.Toleration, taints []corev1.Taint, preferNoSchedule bool, skip func(*corev1.Taint) bool) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !preferNoSchedule {
			continue
		}
		if skip != nil && skip(t) {
			continue
		}
		if !Tolerates(tols, t) {
			return t
		}
	}
	return nil
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// ephemeralTaint reports the taints a starting node carries only briefly; a
// Karpenter-managed node that is not initialized yet is judged without them.
func ephemeralTaint(t *corev1.Taint) bool {
	switch {
	case t.Key == corev1.TaintNodeNotReady, t.Key == corev1.TaintNodeUnreachable,
		t.Key == "node.cloudprovider.kubernetes.io/uninitialized", t.Key == "karpenter.sh/unregistered":
		return true
	}
	return strings.HasPrefix(t.Key, "readiness.k8s.io/")
}

// hostPort is one <ip, port, protocol> a pod binds on its node.
type hostPort struct {
	ip    string
	port  int32
	proto corev1.Protocol
}

func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{ip: p.HostIP, port: p.HostPort, proto: proto})
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return out
}

func wildcardIP(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

func (a hostPort) conflicts(b hostPort) bool {
	return a.port == b.port && a.proto == b.proto && (a.ip == b.ip || wildcardIP(a.ip) || wildcardIP(b.ip))
}

func portsConflict(used, add []hostPort) *hostPort {
	for i := range add {
		for _, u := range used {
			if u.conflicts(add[i]) {
				return &add[i]
			}
		}
	}
	return nil
}
