package state_test

import (
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func rl(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func nodeClaim(name, pool, providerID string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.NodePoolLabelKey: pool, corev1.LabelTopologyZone: "zone-a",
		}},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			},
			Taints:        []corev1.Taint{{Key: "team", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "startup", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: v1.NodeClaimStatus{
			ProviderID:  providerID,
			Capacity:    rl("4", "16Gi"),
			Allocatable: rl("3800m", "15Gi"),
		},
	}
}

func node(name, pool, providerID string, initialized bool) *corev1.Node {
	labels := map[string]string{corev1.LabelHostname: name}
	if pool != "" {
		labels[v1.NodePoolLabelKey] = pool
		labels[v1.NodeRegisteredLabelKey] = "true"
		if initialized {
			labels[v1.NodeInitializedLabelKey] = "true"
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.NodeSpec{
			ProviderID: providerID,
			Taints:     []corev1.Taint{{Key: "startup", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{Capacity: rl("4", "16Gi"), Allocatable: rl("3", "14Gi")},
	}
}

func pod(ns, name, nodeName, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Now()},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			}}},
		},
	}
}

func daemonSetPod(ns, name, nodeName, ds, cpu string, created time.Time) *corev1.Pod {
	p := pod(ns, name, nodeName, cpu)
	p.CreationTimestamp = metav1.NewTime(created)
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, UID: types.UID("uid-" + ds), Controller: ptr.To(true),
	}}
	return p
}

func daemonSet(ns, name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			},
		},
	}
}
