package v1beta1_test

import (
	"context"
	"testing"
	"time"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
)

const templateBuffer = `
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata:
  name: test
  namespace: default
spec:
  podTemplateRef:
    name: chunk
  replicas: 3
`

func set(value any, p ...string) func(map[string]any) {
	return func(obj map[string]any) { crdtest.Set(obj, value, p...) }
}

func del(p ...string) func(map[string]any) {
	return func(obj map[string]any) { crdtest.Delete(obj, p...) }
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestCapacityBufferValidationRejects(t *testing.T) {
	kube := env.Client(t)
	scalable := set(map[string]any{"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "spec", "scalableRef")
	for _, tc := range []struct {
		name   string
		mutate []func(map[string]any)
		want   crdtest.WantField
	}{
		{"spec missing", []func(map[string]any){del("spec")}, crdtest.WantField{Field: "spec", Message: "Required value"}},
		{"podTemplateRef without replicas or limits", []func(map[string]any){del("spec", "replicas")},
			crdtest.WantField{Field: "spec", Message: "If podTemplateRef is set, replicas or limits must also be set"}},
		{"podTemplateRef and scalableRef", []func(map[string]any){scalable},
			crdtest.WantField{Field: "spec", Message: "You must define either PodTemplateRef or ScalableRef, but not both"}},
		{"replicas negative", []func(map[string]any){set(int64(-1), "spec", "replicas")},
			crdtest.WantField{Field: "spec.replicas", Message: "should be greater than or equal to 0"}},
		{"percentage negative", []func(map[string]any){del("spec", "podTemplateRef"), scalable, set(int64(-5), "spec", "percentage")},
			crdtest.WantField{Field: "spec.percentage", Message: "should be greater than or equal to 0"}},
		{"podTemplateRef name empty", []func(map[string]any){set("", "spec", "podTemplateRef", "name")},
			crdtest.WantField{Field: "spec.podTemplateRef.name", Message: "should be at least 1 chars long"}},
		{"scalableRef without kind", []func(map[string]any){del("spec", "podTemplateRef"), set(map[string]any{"name": "web"}, "spec", "scalableRef")},
			crdtest.WantField{Field: "spec.scalableRef.kind", Message: "Required value"}},
		{"limits not a quantity", []func(map[string]any){set("lots", "spec", "limits", "cpu")},
			crdtest.WantField{Field: "spec.limits.cpu", Message: "should match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, templateBuffer)
			for _, m := range tc.mutate {
				m(obj.Object)
			}
			crdtest.RequireInvalid(t, crdtest.DryRunCreate(ctx(t), kube, obj), tc.want)
		})
	}
}

func TestCapacityBufferValidationAccepts(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		name   string
		mutate []func(map[string]any)
	}{
		{"pod template and replicas", nil},
		{"pod template and limits", []func(map[string]any){del("spec", "replicas"), set("8", "spec", "limits", "cpu"), set("16Gi", "spec", "limits", "memory")}},
		{"zero replicas", []func(map[string]any){set(int64(0), "spec", "replicas")}},
		{"scalableRef and percentage", []func(map[string]any){del("spec", "podTemplateRef"), del("spec", "replicas"),
			set(map[string]any{"apiGroup": "apps", "kind": "StatefulSet", "name": "db"}, "spec", "scalableRef"), set(int64(20), "spec", "percentage")}},
		{"scalableRef alone", []func(map[string]any){del("spec", "podTemplateRef"), del("spec", "replicas"),
			set(map[string]any{"kind": "Deployment", "name": "web"}, "spec", "scalableRef")}},
		{"neither reference", []func(map[string]any){del("spec", "podTemplateRef")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, templateBuffer)
			for _, m := range tc.mutate {
				m(obj.Object)
			}
			if err := crdtest.DryRunCreate(ctx(t), kube, obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

func TestCapacityBufferDefaults(t *testing.T) {
	kube := env.Client(t)
	obj := crdtest.Object(t, templateBuffer)
	if err := crdtest.DryRunCreate(ctx(t), kube, obj); err != nil {
		t.Fatal(err)
	}
	if got := crdtest.Get(obj.Object, "spec", "provisioningStrategy"); got != v1beta1.ActiveProvisioningStrategy {
		t.Fatalf("spec.provisioningStrategy = %v, want %s", got, v1beta1.ActiveProvisioningStrategy)
	}
}
