package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
)

const validOverlay = `
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: test
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["m5"]
`

func req(key, op string, values ...string) map[string]any {
	r := map[string]any{"key": key, "operator": op}
	if values != nil {
		vs := make([]any, len(values))
		for i, v := range values {
			vs[i] = v
		}
		r["values"] = vs
	}
	return r
}

func requirements(reqs ...map[string]any) func(map[string]any) {
	return func(obj map[string]any) {
		list := make([]any, len(reqs))
		for i, r := range reqs {
			list[i] = r
		}
		crdtest.Set(obj, list, "spec", "requirements")
	}
}

func set(value any, p ...string) func(map[string]any) {
	return func(obj map[string]any) { crdtest.Set(obj, value, p...) }
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestNodeOverlayValidationRejects(t *testing.T) {
	kube := env.Client(t)
	const reqs = "spec.requirements"
	for _, tc := range []struct {
		name   string
		mutate []func(map[string]any)
		want   crdtest.WantField
	}{
		{"price not a number", []func(map[string]any){set("cheap", "spec", "price")}, crdtest.WantField{Field: "spec.price", Message: "should match"}},
		{"price negative", []func(map[string]any){set("-1", "spec", "price")}, crdtest.WantField{Field: "spec.price", Message: "should match"}},
		{"priceAdjustment percentage without sign", []func(map[string]any){set("10%", "spec", "priceAdjustment")}, crdtest.WantField{Field: "spec.priceAdjustment", Message: "should match"}},
		{"priceAdjustment below -100%", []func(map[string]any){set("-101%", "spec", "priceAdjustment")}, crdtest.WantField{Field: "spec.priceAdjustment", Message: "should match"}},
		{"priceAdjustment absolute without sign", []func(map[string]any){set("0.5", "spec", "priceAdjustment")}, crdtest.WantField{Field: "spec.priceAdjustment", Message: "should match"}},
		{"price and priceAdjustment", []func(map[string]any){set("1", "spec", "price"), set("+1", "spec", "priceAdjustment")}, crdtest.WantField{Field: "spec", Message: "cannot set both 'price' and 'priceAdjustment'"}},
		{"capacity overrides cpu", []func(map[string]any){set("4", "spec", "capacity", "cpu")}, crdtest.WantField{Field: "spec.capacity", Message: "invalid resource restricted"}},
		{"capacity overrides pods", []func(map[string]any){set("110", "spec", "capacity", "pods"), set("1", "spec", "capacity", "example.com/device")}, crdtest.WantField{Field: "spec.capacity", Message: "invalid resource restricted"}},
		{"capacity not a quantity", []func(map[string]any){set("many", "spec", "capacity", "example.com/device")}, crdtest.WantField{Field: "spec.capacity.example.com/device", Message: "should match"}},
		{"weight zero", []func(map[string]any){set(int64(0), "spec", "weight")}, crdtest.WantField{Field: "spec.weight", Message: "should be greater than or equal to 1"}},
		{"weight above 10000", []func(map[string]any){set(int64(10001), "spec", "weight")}, crdtest.WantField{Field: "spec.weight", Message: "should be less than or equal to 10000"}},
		{"requirements missing", []func(map[string]any){func(obj map[string]any) { crdtest.Delete(obj, "spec", "requirements") }}, crdtest.WantField{Field: reqs, Message: "Required value"}},
		{"NotIn without values", []func(map[string]any){requirements(req("example.com/key", "NotIn"))}, crdtest.WantField{Field: reqs, Message: "requirements with operator 'NotIn' must have a value defined"}},
		{"In without values", []func(map[string]any){requirements(req("example.com/key", "In", []string{}...))}, crdtest.WantField{Field: reqs, Message: "requirements with operator 'In' must have a value defined"}},
		{"Gte with two values", []func(map[string]any){requirements(req("example.com/key", "Gte", "1", "2"))}, crdtest.WantField{Field: reqs, Message: "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"}},
		{"Lt negative", []func(map[string]any){requirements(req("example.com/key", "Lt", "-5"))}, crdtest.WantField{Field: reqs, Message: "must have a single positive integer value"}},
		{"operator unknown", []func(map[string]any){requirements(req("example.com/key", "Like", "a"))}, crdtest.WantField{Field: reqs + "[0].operator", Message: "Unsupported value"}},
		{"key in karpenter.sh", []func(map[string]any){requirements(req("karpenter.sh/custom", "Exists"))}, crdtest.WantField{Field: reqs + "[0].key", Message: `label domain "karpenter.sh" is restricted`}},
		{"key kubernetes.io/hostname", []func(map[string]any){requirements(req("kubernetes.io/hostname", "Exists"))}, crdtest.WantField{Field: reqs + "[0].key", Message: `label "kubernetes.io/hostname" is restricted`}},
		// Overlays accept a shorter list of AWS labels than NodePools do.
		{"key karpenter.k8s.aws/instance-tenancy", []func(map[string]any){requirements(req("karpenter.k8s.aws/instance-tenancy", "In", "default"))}, crdtest.WantField{Field: reqs + "[0].key", Message: `label domain "karpenter.k8s.aws" is restricted`}},
		{"key not a qualified name", []func(map[string]any){requirements(req("-bad-", "Exists"))}, crdtest.WantField{Field: reqs + "[0].key", Message: "should match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validOverlay)
			for _, m := range tc.mutate {
				m(obj.Object)
			}
			crdtest.RequireInvalid(t, crdtest.DryRunCreate(ctx(t), kube, obj), tc.want)
		})
	}
}

func TestNodeOverlayValidationAccepts(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		name   string
		mutate []func(map[string]any)
	}{
		{"requirements only", nil},
		{"price", []func(map[string]any){set("0.0125", "spec", "price"), set(int64(10000), "spec", "weight")}},
		{"percentage increase", []func(map[string]any){set("+10%", "spec", "priceAdjustment")}},
		{"percentage decrease", []func(map[string]any){set("-15.5%", "spec", "priceAdjustment")}},
		{"free", []func(map[string]any){set("-100%", "spec", "priceAdjustment")}},
		{"absolute adjustments", []func(map[string]any){set("-.5", "spec", "priceAdjustment")}},
		{"extended resources", []func(map[string]any){set("1", "spec", "capacity", "example.com/device"), set("2Gi", "spec", "capacity", "hugepages-2Mi")}},
		{"every operator and well-known keys", []func(map[string]any){requirements(
			req("karpenter.sh/nodepool", "In", "default"),
			req("karpenter.sh/capacity-type", "NotIn", "spot"),
			req("node.kubernetes.io/instance-type", "Exists"),
			req("example.com/team", "DoesNotExist"),
			req("karpenter.k8s.aws/instance-cpu", "Gt", "4"),
			req("karpenter.k8s.aws/instance-memory", "Lt", "65536"),
			req("karpenter.k8s.aws/instance-generation", "Gte", "6"),
			req("karpenter.k8s.aws/instance-gpu-count", "Lte", "8"),
		)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validOverlay)
			for _, m := range tc.mutate {
				m(obj.Object)
			}
			if err := crdtest.DryRunCreate(ctx(t), kube, obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

func TestOrderByWeight(t *testing.T) {
	overlay := func(name string, weight *int32) v1alpha1.NodeOverlay {
		return v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOverlaySpec{Weight: weight}}
	}
	list := v1alpha1.NodeOverlayList{Items: []v1alpha1.NodeOverlay{
		overlay("a", nil), overlay("b", new(int32(10))), overlay("c", new(int32(10))), overlay("d", new(int32(1))),
	}}
	list.OrderByWeight()
	var got []string
	for _, o := range list.Items {
		got = append(got, o.Name)
	}
	if want := []string{"c", "b", "d", "a"}; !equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
