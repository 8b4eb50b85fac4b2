package capacitybuffer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
)

func TestReplicas(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	perReplica := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	limits := func(kv ...string) v1beta1.Limits {
		out := v1beta1.Limits{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		spec     v1beta1.CapacityBufferSpec
		workload int32
		want     int32
	}{
		{"replicas", v1beta1.CapacityBufferSpec{Replicas: i32(3)}, -1, 3},
		{"nothing", v1beta1.CapacityBufferSpec{}, -1, 0},
		{"percentage rounds up", v1beta1.CapacityBufferSpec{Percentage: i32(25)}, 10, 3},
		{"percentage at least one", v1beta1.CapacityBufferSpec{Percentage: i32(1)}, 10, 1},
		{"percentage of nothing", v1beta1.CapacityBufferSpec{Percentage: i32(50)}, 0, 0},
		{"percentage ignored for a pod template", v1beta1.CapacityBufferSpec{Percentage: i32(50), Replicas: i32(2)}, -1, 2},
		{"the larger of replicas and percentage", v1beta1.CapacityBufferSpec{Percentage: i32(50), Replicas: i32(2)}, 10, 5},
		{"limits alone", v1beta1.CapacityBufferSpec{Limits: limits("cpu", "9")}, -1, 4},
		{"limits cap replicas", v1beta1.CapacityBufferSpec{Replicas: i32(10), Limits: limits("cpu", "9", "memory", "3Gi")}, -1, 3},
		{"limits above replicas", v1beta1.CapacityBufferSpec{Replicas: i32(2), Limits: limits("cpu", "100")}, -1, 2},
		{"limits on resources not requested", v1beta1.CapacityBufferSpec{Replicas: i32(2), Limits: limits("nvidia.com/gpu", "1")}, -1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Replicas(tc.spec, perReplica, tc.workload); got != tc.want {
				t.Errorf("Replicas = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestVirtualPods(t *testing.T) {
	cb := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "apps", UID: "u"}}
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: "pinned", Containers: []corev1.Container{{Name: "c"}}}}
	pods := VirtualPods(cb, tmpl, 2)
	if len(pods) != 2 || pods[0].UID == pods[1].UID || pods[0].Name == pods[1].Name {
		t.Fatalf("want 2 distinct pods, got %+v", pods)
	}
	p := pods[0]
	if p.Spec.NodeName != "" || *p.Spec.Priority != v1beta1.VirtualPodPriority || p.Namespace != "apps" ||
		p.Annotations[v1beta1.FakePodAnnotationKey] != "true" || p.Annotations[v1beta1.BufferNameAnnotation] != "warm" ||
		p.Annotations[v1beta1.BufferNamespaceAnnotation] != "apps" {
		t.Fatalf("virtual pod %+v", p)
	}
	if tmpl.Spec.NodeName != "pinned" {
		t.Fatal("the template was modified")
	}
}
