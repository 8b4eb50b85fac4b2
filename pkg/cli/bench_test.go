package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// syntheticObjects is a cluster of nodes Karpenter nodes (2 CPU each, in
// one amd64-only pool) with podsPerNode pods each and one pending arm64 pod.
func syntheticObjects(nodes, podsPerNode int) *Objects {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := &Objects{Time: now}
	np := v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "amd64-only"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, LastTransitionTime: now}}
	o.NodePools = append(o.NodePools, np)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%05d", i)
		labels := map[string]string{
			v1.NodePoolLabelKey: np.Name, v1.NodeInitializedLabelKey: "true", v1.NodeRegisteredLabelKey: "true",
			corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelInstanceTypeStable: "m5.large",
			corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3),
		}
		nc := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		nc.Status.ProviderID, nc.Status.Capacity, nc.Status.Allocatable = "kwok://"+name, alloc, alloc
		o.NodeClaims = append(o.NodeClaims, nc)
		o.Nodes = append(o.Nodes, corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.NodeSpec{ProviderID: "kwok://" + name},
			Status:     corev1.NodeStatus{Capacity: alloc, Allocatable: alloc},
		})
		for j := 0; j < podsPerNode; j++ {
			p := benchPod(fmt.Sprintf("p-%05d-%02d", i, j), nil)
			p.Spec.NodeName = name
			p.Status.Phase = corev1.PodRunning
			o.Pods = append(o.Pods, *p)
		}
	}
	o.Pods = append(o.Pods, *benchPod("arm", map[string]string{corev1.LabelArchStable: "arm64"}))
	return o
}

func benchPod(name string, selector map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}}},
	}
}

// TestWhyPodSynthetic checks the benchmark's cluster gives the answer the
// benchmark claims to time.
func TestWhyPodSynthetic(t *testing.T) {
	s, err := NewSession(syntheticObjects(50, 10), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.WhyPod(context.Background(), types.NamespacedName{Namespace: "default", Name: "arm"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Phase != "Unschedulable" || len(a.NodePools) != 1 || a.NodePools[0].Key != corev1.LabelArchStable ||
		a.NodePools[0].NodePoolValues != "In [amd64]" || a.NodePools[0].PodValues != "In [arm64]" {
		t.Fatalf("unexpected answer %+v", a)
	}
	if a.Existing == nil || a.Existing.Key != corev1.LabelArchStable {
		t.Fatalf("existing nodes should refuse on the arch label: %+v", a.Existing)
	}
	r, err := s.WhyPod(context.Background(), types.NamespacedName{Namespace: "default", Name: "p-00007-03"})
	if err != nil || r.Phase != "Running" || r.Node != "node-00007" || r.NodePool != "amd64-only" {
		t.Fatalf("running pod: %+v, %v", r, err)
	}
}

// BenchmarkWhyPod times `why pod` on 5,000 nodes and 50,000 pods: Session
// is building the cluster state from the listed objects (once per CLI
// run), Answer one answer on a built session, Total both.
func BenchmarkWhyPod(b *testing.B) {
	o := syntheticObjects(5000, 10)
	nn := types.NamespacedName{Namespace: "default", Name: "arm"}
	ctx := context.Background()
	check := func(b *testing.B, a *PodAnswer, err error) {
		if err != nil || a.Phase != "Unschedulable" {
			b.Fatalf("answer %+v, %v", a, err)
		}
	}
	b.Run("Session", func(b *testing.B) {
		for b.Loop() {
			if _, err := NewSession(o, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Answer", func(b *testing.B) {
		s, err := NewSession(o, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			a, err := s.WhyPod(ctx, nn)
			check(b, a, err)
		}
	})
	b.Run("Total", func(b *testing.B) {
		for b.Loop() {
			s, err := NewSession(o, Options{})
			if err != nil {
				b.Fatal(err)
			}
			a, err := s.WhyPod(ctx, nn)
			check(b, a, err)
		}
	})
}
