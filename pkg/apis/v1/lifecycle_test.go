package v1_test

import (
	"encoding/json"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestNodePoolDefaults reads back what the API server fills into a NodePool
// that leaves every defaulted field out.
func TestNodePoolDefaults(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		name   string
		mutate []mutation
		want   map[string]any // dotted path -> expected value
	}{
		{
			name: "no disruption block",
			want: map[string]any{
				"spec.template.spec.expireAfter":      "720h",
				"spec.disruption.consolidateAfter":    "0s",
				"spec.disruption.consolidationPolicy": "WhenEmptyOrUnderutilized",
				"spec.disruption.budgets":             []any{map[string]any{"nodes": "10%"}},
			},
		},
		{
			name:   "disruption block without policy or budgets",
			mutate: []mutation{set("5m", "spec", "disruption", "consolidateAfter")},
			want: map[string]any{
				"spec.disruption.consolidateAfter":    "5m",
				"spec.disruption.consolidationPolicy": "WhenEmptyOrUnderutilized",
				"spec.disruption.budgets":             []any{map[string]any{"nodes": "10%"}},
			},
		},
		{
			name:   "budget without nodes",
			mutate: []mutation{disruption(map[string]any{"schedule": "@daily", "duration": "1h"})},
			want: map[string]any{
				"spec.disruption.budgets": []any{map[string]any{"nodes": "10%", "schedule": "@daily", "duration": "1h"}},
			},
		},
		{
			name:   "explicit values are kept verbatim",
			mutate: []mutation{set("Never", path(tmplSpec, "expireAfter")...), set("WhenEmpty", "spec", "disruption", "consolidationPolicy"), set("Never", "spec", "disruption", "consolidateAfter")},
			want: map[string]any{
				"spec.template.spec.expireAfter":      "Never",
				"spec.disruption.consolidateAfter":    "Never",
				"spec.disruption.consolidationPolicy": "WhenEmpty",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validNodePool)
			apply(obj.Object, tc.mutate...)
			if err := crdtest.DryRunCreate(testContext(t), kube, obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
			for p, want := range tc.want {
				got, _, _ := unstructured.NestedFieldNoCopy(obj.Object, splitDots(p)...)
				if !jsonEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", p, got, want)
				}
			}
		})
	}
}

func TestNodeClaimDefaults(t *testing.T) {
	kube := env.Client(t)
	obj := crdtest.Object(t, validNodeClaim)
	if err := crdtest.DryRunCreate(testContext(t), kube, obj); err != nil {
		t.Fatalf("rejected: %v", err)
	}
	if got, _, _ := unstructured.NestedString(obj.Object, "spec", "expireAfter"); got != "720h" {
		t.Errorf("spec.expireAfter = %q, want 720h", got)
	}
}

// TestTypedRoundTrip checks the Go types against the API server: an object
// built in Go without the defaulted fields gets upstream's defaults, and the
// defaulted durations come back byte for byte ("720h", not "720h0m0s").
func TestTypedRoundTrip(t *testing.T) {
	kube := env.Client(t)
	ctx := testContext(t)
	np := &v1.NodePool{}
	np.Name = "typed-round-trip"
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.SetLabelMap(map[string]string{"team": "a"})
	if err := kube.Create(ctx, np); err != nil {
		t.Fatalf("creating: %v", err)
	}
	t.Cleanup(func() { _ = kube.Delete(ctx, np) })

	got := &v1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if d := got.Spec.Template.Spec.ExpireAfter.Duration; d == nil || *d != 720*time.Hour {
		t.Errorf("expireAfter = %v, want 720h", got.Spec.Template.Spec.ExpireAfter)
	}
	if d := got.Spec.Disruption.ConsolidateAfter.Duration; d == nil || *d != 0 {
		t.Errorf("consolidateAfter = %v, want 0s", got.Spec.Disruption.ConsolidateAfter)
	}
	if got.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("consolidationPolicy = %q", got.Spec.Disruption.ConsolidationPolicy)
	}
	if len(got.Spec.Disruption.Budgets) != 1 || got.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("budgets = %+v, want [{nodes: 10%%}]", got.Spec.Disruption.Budgets)
	}
	raw, err := json.Marshal(got.Spec.Template.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	if spec["expireAfter"] != "720h" {
		t.Errorf("re-encoded expireAfter = %v, want the server's text 720h", spec["expireAfter"])
	}

	// A Never built in Go survives the trip too.
	got.Spec.Template.Spec.ExpireAfter = v1.NeverDuration()
	if err := kube.Update(ctx, got); err != nil {
		t.Fatalf("updating: %v", err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if !got.Spec.Template.Spec.ExpireAfter.IsNever() {
		t.Errorf("expireAfter = %v, want Never", got.Spec.Template.Spec.ExpireAfter)
	}
}

// TestNodePoolScale drives a static pool through the scale subresource, the
// way `kubectl scale nodepool NAME --replicas=3` does.
func TestNodePoolScale(t *testing.T) {
	kube := env.Client(t)
	ctx := testContext(t)
	obj := crdtest.Object(t, validNodePool)
	obj.SetName("scalable")
	apply(obj.Object, static(1))
	if err := kube.Create(ctx, obj); err != nil {
		t.Fatalf("creating: %v", err)
	}
	t.Cleanup(func() { _ = kube.Delete(ctx, obj) })

	np := &v1.NodePool{}
	np.Name = "scalable"
	scale := &autoscalingv1.Scale{}
	if err := kube.SubResource("scale").Get(ctx, np, scale); err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Replicas != 0 {
		t.Errorf("scale = spec %d status %d, want 1 and 0", scale.Spec.Replicas, scale.Status.Replicas)
	}
	// kubectl scale sends a merge patch to the scale subresource.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))
	if err := kube.SubResource("scale").Patch(ctx, np, patch, client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
		t.Fatalf("patching scale: %v", err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if np.Spec.Replicas == nil || *np.Spec.Replicas != 3 {
		t.Errorf("spec.replicas = %v, want 3", np.Spec.Replicas)
	}
	// Updating the Scale object works too.
	if err := kube.SubResource("scale").Get(ctx, np, scale); err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	scale.Spec.Replicas = 4
	if err := kube.SubResource("scale").Update(ctx, np, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("updating scale: %v", err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if np.Spec.Replicas == nil || *np.Spec.Replicas != 4 {
		t.Errorf("spec.replicas = %v, want 4", np.Spec.Replicas)
	}

	// Status replicas come from status.nodes.
	np.Status.Nodes = new(int64(2))
	if err := kube.Status().Update(ctx, np); err != nil {
		t.Fatalf("updating status: %v", err)
	}
	if err := kube.SubResource("scale").Get(ctx, np, scale); err != nil {
		t.Fatalf("getting scale: %v", err)
	}
	if scale.Status.Replicas != 2 {
		t.Errorf("scale status replicas = %d, want 2", scale.Status.Replicas)
	}
}

// TestUpdateRules covers the rules that compare an object with its previous
// version.
func TestUpdateRules(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		name     string
		manifest string
		create   []mutation
		update   []mutation
		want     []crdtest.WantField // nil: the update is accepted
	}{
		{"nodeClassRef group", validNodePool, nil, []mutation{set("karpenter.kwok.sh", path(tmplSpec, "nodeClassRef", "group")...)}, want("spec.template.spec.nodeClassRef", "nodeClassRef.group is immutable")},
		{"nodeClassRef kind", validNodePool, nil, []mutation{set("KWOKNodeClass", path(tmplSpec, "nodeClassRef", "kind")...)}, want("spec.template.spec.nodeClassRef", "nodeClassRef.kind is immutable")},
		{"nodeClassRef name", validNodePool, nil, []mutation{set("other", path(tmplSpec, "nodeClassRef", "name")...)}, nil},
		{"the rest of a NodePool spec", validNodePool, nil, []mutation{requirements(tmplSpec, req("kubernetes.io/arch", "In", "arm64")), set(int64(50), "spec", "weight")}, nil},
		{"dynamic to static", validNodePool, nil, []mutation{static(2)}, want("spec", "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes")},
		{"static to dynamic", validNodePool, []mutation{static(2)}, []mutation{del("spec", "replicas")}, want("spec", "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes")},
		{"static replicas", validNodePool, []mutation{static(2)}, []mutation{static(5)}, nil},
		{"NodeClaim spec", validNodeClaim, nil, []mutation{set([]any{taint("example.com/t", "", "NoSchedule")}, "spec", "taints")}, want("spec", "spec is immutable")},
		{"NodeClaim expireAfter", validNodeClaim, nil, []mutation{set("1h", "spec", "expireAfter")}, want("spec", "spec is immutable")},
		{"NodeClaim metadata", validNodeClaim, nil, []mutation{set("b", "metadata", "labels", "team")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			obj := crdtest.Object(t, tc.manifest)
			obj.SetGenerateName("update-")
			obj.SetName("")
			apply(obj.Object, tc.create...)
			if err := kube.Create(ctx, obj); err != nil {
				t.Fatalf("creating: %v", err)
			}
			t.Cleanup(func() { _ = kube.Delete(ctx, obj) })
			apply(obj.Object, tc.update...)
			err := kube.Update(ctx, obj)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("update rejected: %v", err)
				}
				return
			}
			crdtest.RequireInvalid(t, err, tc.want...)
		})
	}
}

func splitDots(p string) []string {
	var out []string
	start := 0
	for i := range len(p) {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
