package v1_test

import (
	"testing"

	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
)

var claimSpec = []string{"spec"}

const claimReqs = "spec.requirements"

func TestNodeClaimValidationRejects(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []invalidCase{
		{"requirement key in karpenter.sh", []mutation{requirements(claimSpec, req("karpenter.sh/custom", "Exists"))}, want(claimReqs+"[0].key", `label domain "karpenter.sh" is restricted`)},
		{"requirement key kubernetes.io/hostname", []mutation{requirements(claimSpec, req("kubernetes.io/hostname", "In", "a"))}, want(claimReqs+"[0].key", `label "kubernetes.io/hostname" is restricted`)},
		{"requirement key in karpenter.k8s.aws", []mutation{requirements(claimSpec, req("karpenter.k8s.aws/custom", "Exists"))}, want(claimReqs+"[0].key", `label domain "karpenter.k8s.aws" is restricted`)},
		{"requirement operator unknown", []mutation{requirements(claimSpec, req("example.com/key", "Has"))}, want(claimReqs+"[0].operator", "Unsupported value")},
		{"requirement In without values", []mutation{requirements(claimSpec, req("example.com/key", "In", []string{}...))}, want(claimReqs, "requirements with operator 'In' must have a value defined")},
		{"requirement Gte negative", []mutation{requirements(claimSpec, req("example.com/key", "Gte", "-3"))}, want(claimReqs, "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")},
		{"minValues above the number of values", []mutation{requirements(claimSpec, withMinValues(req("example.com/key", "In", "a"), 2))}, want(claimReqs, "requirements with 'minValues' must have at least that many values specified in the 'values' field")},
		{"more than 100 requirements", []mutation{manyRequirements(claimSpec, 101)}, want(claimReqs, "Too many")},
		{"requirements missing", []mutation{del("spec", "requirements")}, want(claimReqs, "Required value")},
		{"nodeClassRef kind missing", []mutation{del("spec", "nodeClassRef", "kind")}, want("spec.nodeClassRef.kind", "Required value")},
		{"nodeClassRef group with a version", []mutation{set("karpenter.k8s.aws/v1", "spec", "nodeClassRef", "group")}, want("spec.nodeClassRef.group", "should match '^[^/]*$'")},
		{"nodeClassRef name empty", []mutation{set("", "spec", "nodeClassRef", "name")}, want("spec.nodeClassRef.name", "name may not be empty")},
		{"expireAfter with a space", []mutation{set("1 h", "spec", "expireAfter")}, want("spec.expireAfter", "should match")},
		{"terminationGracePeriod in days", []mutation{set("2d", "spec", "terminationGracePeriod")}, want("spec.terminationGracePeriod", "should match")},
		{"expireAfter past time.Duration", []mutation{set("3000000h", "spec", "expireAfter")}, want("spec.expireAfter", "must be at most 2562047h")},
		{"terminationGracePeriod past time.Duration", []mutation{set("3000000h", "spec", "terminationGracePeriod")}, want("spec.terminationGracePeriod", "must be at most 2562047h")},
		{"resource request not a quantity", []mutation{set("one", "spec", "resources", "requests", "cpu")}, want("spec.resources.requests.cpu", "should match")},
		{"taint effect unknown", []mutation{set([]any{taint("example.com/t", "", "Evict")}, "spec", "taints")}, want("spec.taints[0].effect", "Unsupported value")},
		{"startup taint key empty", []mutation{set([]any{taint("", "", "NoSchedule")}, "spec", "startupTaints")}, want("spec.startupTaints[0].key", "should be at least 1 chars long")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validNodeClaim)
			apply(obj.Object, tc.mutate...)
			crdtest.RequireInvalid(t, crdtest.DryRunCreate(testContext(t), kube, obj), tc.want...)
		})
	}
}

func TestNodeClaimValidationAccepts(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		name   string
		mutate []mutation
	}{
		{"the minimal claim", nil},
		// Unlike a NodePool, a NodeClaim names its pool in its requirements.
		{"requirement on karpenter.sh/nodepool", []mutation{requirements(claimSpec, req("karpenter.sh/nodepool", "In", "default"), req("karpenter.sh/capacity-type", "In", "spot"))}},
		{"resources and durations", []mutation{set("5150m", "spec", "resources", "requests", "cpu"), set("8", "spec", "resources", "requests", "pods"), set("Never", "spec", "expireAfter"), set("48h", "spec", "terminationGracePeriod")}},
		{"taints", []mutation{set([]any{taint("example.com/special-taint", "", "NoSchedule")}, "spec", "taints"), set([]any{taint("example.com/another-taint", "", "NoSchedule")}, "spec", "startupTaints")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crdtest.Object(t, validNodeClaim)
			apply(obj.Object, tc.mutate...)
			if err := crdtest.DryRunCreate(testContext(t), kube, obj); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}
