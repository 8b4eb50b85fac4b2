package v1_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
)

type mutation func(obj map[string]any)

func set(value any, p ...string) mutation {
	return func(obj map[string]any) { crdtest.Set(obj, value, p...) }
}

func del(p ...string) mutation {
	return func(obj map[string]any) { crdtest.Delete(obj, p...) }
}

func label(key, value string) mutation {
	return set(value, path(tmplLabels, key)...)
}

// requirements replaces the template's (or NodeClaim's) requirements.
func requirements(at []string, reqs ...map[string]any) mutation {
	list := make([]any, len(reqs))
	for i, r := range reqs {
		list[i] = r
	}
	return set(list, path(at, "requirements")...)
}

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

func withMinValues(r map[string]any, n int) map[string]any {
	r["minValues"] = n
	return r
}

func taint(key, value, effect string) map[string]any {
	t := map[string]any{"key": key, "effect": effect}
	if value != "" {
		t["value"] = value
	}
	return t
}

func budgets(bs ...map[string]any) mutation {
	list := make([]any, len(bs))
	for i, b := range bs {
		list[i] = b
	}
	return set(list, "spec", "disruption", "budgets")
}

// disruption sets a disruption block that is valid apart from the budgets.
func disruption(budgetList ...map[string]any) mutation {
	return func(obj map[string]any) {
		crdtest.Set(obj, "0s", "spec", "disruption", "consolidateAfter")
		budgets(budgetList...)(obj)
	}
}

func manyLabels(n int) mutation {
	return func(obj map[string]any) {
		labels := map[string]any{}
		for i := range n {
			labels[fmt.Sprintf("example.com/label-%d", i)] = "x"
		}
		crdtest.Set(obj, labels, tmplLabels...)
	}
}

func manyRequirements(at []string, n int) mutation {
	reqs := make([]map[string]any, n)
	for i := range reqs {
		reqs[i] = req(fmt.Sprintf("example.com/key-%d", i), "Exists")
	}
	return requirements(at, reqs...)
}

func static(replicas int) mutation {
	return set(int64(replicas), "spec", "replicas")
}

func apply(obj map[string]any, ms ...mutation) {
	for _, m := range ms {
		m(obj)
	}
}

type invalidCase struct {
	name   string
	mutate []mutation
	want   []crdtest.WantField
}

func want(field, message string) []crdtest.WantField {
	return []crdtest.WantField{{Field: field, Message: message}}
}

const (
	reqField  = "spec.template.spec.requirements"
	reqs0     = reqField + "[0]"
	labelsFld = "spec.template.metadata.labels"
)

func TestNodePoolValidationRejects(t *testing.T) {
	kube := env.Client(t)
	awsRestricted := `label domain "karpenter.k8s.aws" is restricted`
	for _, tc := range []invalidCase{
		// Template labels.
		{"label in karpenter.sh", []mutation{label("karpenter.sh/custom", "x")}, want(labelsFld, `label domain "karpenter.sh" is restricted`)},
		{"label in a karpenter.sh subdomain", []mutation{label("team.karpenter.sh/custom", "x")}, want(labelsFld, `label domain "karpenter.sh" is restricted`)},
		{"label in a domain that merely ends in karpenter.sh", []mutation{label("notkarpenter.sh/custom", "x")}, want(labelsFld, `label domain "karpenter.sh" is restricted`)},
		{"label karpenter.sh/nodepool", []mutation{label("karpenter.sh/nodepool", "x")}, want(labelsFld, `label "karpenter.sh/nodepool" is restricted`)},
		{"label kubernetes.io/hostname", []mutation{label("kubernetes.io/hostname", "x")}, want(labelsFld, `label "kubernetes.io/hostname" is restricted`)},
		{"label in karpenter.k8s.aws", []mutation{label("karpenter.k8s.aws/custom", "x")}, want(labelsFld, awsRestricted)},
		{"label karpenter.k8s.aws/instance-type-like but unknown", []mutation{label("karpenter.k8s.aws/instance-foo", "x")}, want(labelsFld, awsRestricted)},
		{"label value with spaces", []mutation{label("example.com/team", "not valid")}, want(labelsFld+".example.com/team", "should match")},
		{"label value too long", []mutation{label("example.com/team", strings.Repeat("a", 64))}, want(labelsFld+".example.com/team", "Too long")},
		{"label value ending in a dash", []mutation{label("example.com/team", "team-")}, want(labelsFld+".example.com/team", "should match")},
		{"more than 100 labels", []mutation{manyLabels(101)}, want(labelsFld, "Too many")},

		// Requirements.
		{"requirement key in karpenter.sh", []mutation{requirements(tmplSpec, req("karpenter.sh/custom", "Exists"))}, want(reqs0+".key", `label domain "karpenter.sh" is restricted`)},
		{"requirement key karpenter.sh/nodepool", []mutation{requirements(tmplSpec, req("karpenter.sh/nodepool", "In", "default"))}, want(reqs0+".key", `label "karpenter.sh/nodepool" is restricted`)},
		{"requirement key kubernetes.io/hostname", []mutation{requirements(tmplSpec, req("kubernetes.io/hostname", "Exists"))}, want(reqs0+".key", `label "kubernetes.io/hostname" is restricted`)},
		{"requirement key in karpenter.k8s.aws", []mutation{requirements(tmplSpec, req("karpenter.k8s.aws/custom", "Exists"))}, want(reqs0+".key", awsRestricted)},
		{"requirement key not a qualified name", []mutation{requirements(tmplSpec, req("not a key", "Exists"))}, want(reqs0+".key", "should match")},
		{"requirement key too long", []mutation{requirements(tmplSpec, req("example.com/"+strings.Repeat("k", 305), "Exists"))}, want(reqs0+".key", "Too long")},
		{"requirement operator unknown", []mutation{requirements(tmplSpec, req("example.com/key", "Equals", "a"))}, want(reqs0+".operator", "Unsupported value")},
		{"requirement value not a string", []mutation{requirements(tmplSpec, map[string]any{"key": "example.com/key", "operator": "Gt", "values": []any{int64(2)}})}, want(reqs0+".values[0]", "must be of type string")},
		{"requirement In without values", []mutation{requirements(tmplSpec, req("example.com/key", "In", []string{}...))}, want(reqField, "requirements with operator 'In' must have a value defined")},
		{"requirement Gt with two values", []mutation{requirements(tmplSpec, req("example.com/key", "Gt", "1", "2"))}, want(reqField, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")},
		{"requirement Lt negative", []mutation{requirements(tmplSpec, req("example.com/key", "Lt", "-1"))}, want(reqField, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")},
		{"requirement Gte without values", []mutation{requirements(tmplSpec, req("example.com/key", "Gte", []string{}...))}, want(reqField, "must have a single positive integer value")},
		{"requirement Lte with two values", []mutation{requirements(tmplSpec, req("example.com/key", "Lte", "3", "4"))}, want(reqField, "must have a single positive integer value")},
		{"minValues zero", []mutation{requirements(tmplSpec, withMinValues(req("example.com/key", "In", "a"), 0))}, want(reqs0+".minValues", "should be greater than or equal to 1")},
		{"minValues above 50", []mutation{requirements(tmplSpec, withMinValues(req("example.com/key", "Exists"), 51))}, want(reqs0+".minValues", "should be less than or equal to 50")},
		{"minValues above the number of values", []mutation{requirements(tmplSpec, withMinValues(req("example.com/key", "In", "a", "b"), 3))}, want(reqField, "requirements with 'minValues' must have at least that many values specified in the 'values' field")},
		{"more than 100 requirements", []mutation{manyRequirements(tmplSpec, 101)}, want(reqField, "Too many")},
		{"requirements missing", []mutation{del(path(tmplSpec, "requirements")...)}, want(reqField, "Required value")},

		// nodeClassRef.
		{"nodeClassRef missing", []mutation{del(path(tmplSpec, "nodeClassRef")...)}, want("spec.template.spec.nodeClassRef", "Required value")},
		{"nodeClassRef group missing", []mutation{del(path(tmplSpec, "nodeClassRef", "group")...)}, want("spec.template.spec.nodeClassRef.group", "Required value")},
		{"nodeClassRef group empty", []mutation{set("", path(tmplSpec, "nodeClassRef", "group")...)}, want("spec.template.spec.nodeClassRef.group", "group may not be empty")},
		{"nodeClassRef group with a version", []mutation{set("karpenter.k8s.aws/v1", path(tmplSpec, "nodeClassRef", "group")...)}, want("spec.template.spec.nodeClassRef.group", "should match '^[^/]*$'")},
		{"nodeClassRef kind empty", []mutation{set("", path(tmplSpec, "nodeClassRef", "kind")...)}, want("spec.template.spec.nodeClassRef.kind", "kind may not be empty")},
		{"nodeClassRef name empty", []mutation{set("", path(tmplSpec, "nodeClassRef", "name")...)}, want("spec.template.spec.nodeClassRef.name", "name may not be empty")},

		// Durations.
		{"expireAfter in days", []mutation{set("30d", path(tmplSpec, "expireAfter")...)}, want("spec.template.spec.expireAfter", "should match")},
		{"expireAfter lowercase never", []mutation{set("never", path(tmplSpec, "expireAfter")...)}, want("spec.template.spec.expireAfter", "should match")},
		{"terminationGracePeriod Never", []mutation{set("Never", path(tmplSpec, "terminationGracePeriod")...)}, want("spec.template.spec.terminationGracePeriod", "should match")},
		{"terminationGracePeriod fractional", []mutation{set("1.5h", path(tmplSpec, "terminationGracePeriod")...)}, want("spec.template.spec.terminationGracePeriod", "should match")},
		{"expireAfter past time.Duration", []mutation{set("3000000h", path(tmplSpec, "expireAfter")...)}, want("spec.template.spec.expireAfter", "must be at most 2562047h")},
		{"terminationGracePeriod past time.Duration", []mutation{set("3000000h", path(tmplSpec, "terminationGracePeriod")...)}, want("spec.template.spec.terminationGracePeriod", "must be at most 2562047h")},

		// Taints (the key/value patterns and effect enum come from the CRD post-processor).
		{"taint without effect", []mutation{set([]any{map[string]any{"key": "example.com/taint"}}, path(tmplSpec, "taints")...)}, want("spec.template.spec.taints[0].effect", "Required value")},
		{"taint effect unknown", []mutation{set([]any{taint("example.com/taint", "", "NoRun")}, path(tmplSpec, "taints")...)}, want("spec.template.spec.taints[0].effect", "Unsupported value")},
		{"taint key empty", []mutation{set([]any{taint("", "", "NoSchedule")}, path(tmplSpec, "taints")...)}, want("spec.template.spec.taints[0].key", "should be at least 1 chars long")},
		{"taint key not a qualified name", []mutation{set([]any{taint("bad key", "", "NoSchedule")}, path(tmplSpec, "taints")...)}, want("spec.template.spec.taints[0].key", "should match")},
		{"startup taint value not a label value", []mutation{set([]any{taint("example.com/taint", "not valid", "NoSchedule")}, path(tmplSpec, "startupTaints")...)}, want("spec.template.spec.startupTaints[0].value", "should match")},

		// Disruption.
		{"consolidateAfter missing from a disruption block", []mutation{set(map[string]any{"consolidationPolicy": "WhenEmpty"}, "spec", "disruption")}, want("spec.disruption.consolidateAfter", "Required value")},
		{"consolidateAfter past time.Duration", []mutation{set("3000000h", "spec", "disruption", "consolidateAfter")}, want("spec.disruption.consolidateAfter", "must be at most 2562047h")},
		{"consolidateAfter summing past time.Duration", []mutation{set("2000000h2000000h", "spec", "disruption", "consolidateAfter")}, want("spec.disruption.consolidateAfter", "must be at most 2562047h")},
		{"consolidateAfter past the bound", []mutation{set("2562047h1m", "spec", "disruption", "consolidateAfter")}, want("spec.disruption.consolidateAfter", "must be at most 2562047h")},
		{"budget duration past time.Duration", []mutation{disruption(map[string]any{"nodes": "0", "schedule": "@daily", "duration": "3000000h"})}, want("spec.disruption.budgets[0].duration", "must be at most 2562047h")},
		{"consolidateAfter in days", []mutation{set("1d", "spec", "disruption", "consolidateAfter")}, want("spec.disruption.consolidateAfter", "should match")},
		{"consolidationPolicy from v1beta1", []mutation{set("0s", "spec", "disruption", "consolidateAfter"), set("WhenUnderutilized", "spec", "disruption", "consolidationPolicy")}, want("spec.disruption.consolidationPolicy", "Unsupported value")},
		{"budget nodes above 100%", []mutation{disruption(map[string]any{"nodes": "101%"})}, want("spec.disruption.budgets[0].nodes", "should match")},
		{"budget nodes negative", []mutation{disruption(map[string]any{"nodes": "-1"})}, want("spec.disruption.budgets[0].nodes", "should match")},
		{"budget schedule without duration", []mutation{disruption(map[string]any{"nodes": "0", "schedule": "@daily"})}, want("spec.disruption.budgets", "'schedule' must be set with 'duration'")},
		{"budget duration without schedule", []mutation{disruption(map[string]any{"nodes": "0", "duration": "10m"})}, want("spec.disruption.budgets", "'schedule' must be set with 'duration'")},
		{"budget duration in seconds", []mutation{disruption(map[string]any{"nodes": "0", "schedule": "@daily", "duration": "30s"})}, want("spec.disruption.budgets[0].duration", "should match")},
		{"budget schedule with three fields", []mutation{disruption(map[string]any{"nodes": "0", "schedule": "0 9 *", "duration": "1h"})}, want("spec.disruption.budgets[0].schedule", "should match")},
		{"budget reason unknown", []mutation{disruption(map[string]any{"nodes": "1", "reasons": []any{"Expired"}})}, want("spec.disruption.budgets[0].reasons[0]", "Unsupported value")},
		{"budget reasons duplicated", []mutation{disruption(map[string]any{"nodes": "1", "reasons": []any{"Empty", "Empty"}})}, want("spec.disruption.budgets[0].reasons[1]", "Duplicate value")},
		{"more than 50 budgets", []mutation{func(obj map[string]any) {
			bs := make([]map[string]any, 51)
			for i := range bs {
				bs[i] = map[string]any{"nodes": "1"}
			}
			disruption(bs...)(obj)
		}}, want("spec.disruption.budgets", "Too many")},

		// Weight, limits and static pools.
		{"weight zero", []mutation{set(int64(0), "spec", "weight")}, want("spec.weight", "should be greater than or equal to 1")},
		{"weight above 100", []mutation{set(int64(101), "spec", "weight")}, want("spec.weight", "should be less than or equal to 100")},
		{"limit not a quantity", []mutation{set("lots", "spec", "limits", "cpu")}, want("spec.limits.cpu", "should match")},
		{"replicas negative", []mutation{static(-1)}, want("spec.replicas", "should be greater than or equal to 0")},
		{"static pool with weight", []mutation{static(1), set(int64(10), "spec", "weight")}, want("spec", "'weight' is not supported on static NodePools")},
		{"static pool with a cpu limit", []mutation{static(1), set("10", "spec", "limits", "cpu")}, want("spec", "only 'limits.nodes' is supported on static NodePools")},
		{"static pool with nodes and memory limits", []mutation{static(1), set("10", "spec", "limits", "nodes"), set("1Gi", "spec", "limits", "memory")}, want("spec", "only 'limits.nodes' is supported on static NodePools")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validNodePool)
			apply(obj.Object, tc.mutate...)
			crdtest.RequireInvalid(t, crdtest.DryRunCreate(testContext(t), kube, obj), tc.want...)
		})
	}
}

func TestNodePoolValidationAccepts(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		name   string
		mutate []mutation
	}{
		{"the minimal pool", nil},
		{"well-known karpenter.sh labels", []mutation{label("karpenter.sh/capacity-type", "spot")}},
		{"kubernetes.io labels", []mutation{label("kubernetes.io/arch", "amd64"), label("node.kubernetes.io/instance-type", "m5.large"), label("kubernetes.io/team", "a")}},
		{"well-known AWS labels", []mutation{label("karpenter.k8s.aws/instance-family", "m5"), label("karpenter.k8s.aws/instance-tenancy", "default"), label("karpenter.k8s.aws/placement-group-id", "pg-123")}},
		{"a domain that merely ends in karpenter.sh text", []mutation{label("notkarpenter.shx/team", "a")}},
		{"an empty label value", []mutation{label("example.com/empty", "")}},
		{"100 labels", []mutation{manyLabels(100)}},
		{"100 requirements", []mutation{manyRequirements(tmplSpec, 100)}},
		{"every operator", []mutation{requirements(tmplSpec,
			req("example.com/in", "In", "a"),
			req("example.com/notin", "NotIn", "a"),
			req("example.com/notin-empty", "NotIn"),
			req("example.com/exists", "Exists"),
			req("example.com/dne", "DoesNotExist"),
			req("example.com/gt", "Gt", "0"),
			req("example.com/lt", "Lt", "10"),
			req("example.com/gte", "Gte", "8"),
			req("example.com/lte", "Lte", "+16"),
		)}},
		{"requirement values that are not label values", []mutation{requirements(tmplSpec, req("example.com/key", "In", "not a label value!"))}},
		{"requirement on karpenter.sh/capacity-type with minValues", []mutation{requirements(tmplSpec, withMinValues(req("karpenter.sh/capacity-type", "In", "spot", "on-demand"), 2))}},
		{"minValues on Exists", []mutation{requirements(tmplSpec, withMinValues(req("karpenter.k8s.aws/instance-family", "Exists"), 5))}},
		{"durations", []mutation{set("Never", path(tmplSpec, "expireAfter")...), set("1h30m", path(tmplSpec, "terminationGracePeriod")...)}},
		{"durations at the bound", []mutation{set("2562047h", path(tmplSpec, "expireAfter")...), set("2562047h", path(tmplSpec, "terminationGracePeriod")...), set("2562047h", "spec", "disruption", "consolidateAfter")}},
		{"taints", []mutation{
			set([]any{taint("example.com/gpu", "true", "NoSchedule"), taint("dedicated", "", "PreferNoSchedule")}, path(tmplSpec, "taints")...),
			set([]any{taint("node.cilium.io/agent-not-ready", "", "NoExecute")}, path(tmplSpec, "startupTaints")...),
		}},
		{"consolidateAfter Never with Balanced", []mutation{set("Never", "spec", "disruption", "consolidateAfter"), set("Balanced", "spec", "disruption", "consolidationPolicy")}},
		{"scheduled budgets", []mutation{disruption(
			map[string]any{"nodes": "0", "schedule": "@daily", "duration": "10m", "reasons": []any{"Drifted", "Underutilized"}},
			map[string]any{"nodes": "100%", "schedule": "0 9 * * mon-fri", "duration": "8h30m"},
			map[string]any{"nodes": "5", "schedule": "@hourly", "duration": "1h0m0s"},
		)}},
		{"50 budgets", []mutation{func(obj map[string]any) {
			bs := make([]map[string]any, 50)
			for i := range bs {
				bs[i] = map[string]any{"nodes": "1"}
			}
			disruption(bs...)(obj)
		}}},
		{"weight bounds", []mutation{set(int64(100), "spec", "weight")}},
		{"limits", []mutation{set("100", "spec", "limits", "cpu"), set("1000Gi", "spec", "limits", "memory"), set(int64(10), "spec", "limits", "nodes")}},
		{"static pool", []mutation{static(0), set(int64(15), "spec", "limits", "nodes")}},
		{"static pool with empty limits", []mutation{static(3), set(map[string]any{}, "spec", "limits")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validNodePool)
			apply(obj.Object, tc.mutate...)
			if err := crdtest.DryRunCreate(testContext(t), kube, obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}
