package v1_test

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

func TestNillableDurationJSON(t *testing.T) {
	for _, tc := range []struct {
		in       string
		wantDur  *time.Duration
		never    bool
		wantJSON string
	}{
		{in: `"720h"`, wantDur: new(720 * time.Hour), wantJSON: `"720h"`},
		{in: `"1h30m"`, wantDur: new(90 * time.Minute), wantJSON: `"1h30m"`},
		{in: `"0s"`, wantDur: new(time.Duration(0)), wantJSON: `"0s"`},
		{in: `"Never"`, never: true, wantJSON: `"Never"`},
		{in: `null`, wantJSON: `null`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var d v1.NillableDuration
			if err := json.Unmarshal([]byte(tc.in), &d); err != nil {
				t.Fatal(err)
			}
			if (d.Duration == nil) != (tc.wantDur == nil) || (d.Duration != nil && *d.Duration != *tc.wantDur) {
				t.Errorf("duration = %v, want %v", d.Duration, tc.wantDur)
			}
			if d.IsNever() != tc.never {
				t.Errorf("IsNever = %v, want %v", d.IsNever(), tc.never)
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.wantJSON {
				t.Errorf("marshalled %s, want %s", out, tc.wantJSON)
			}
		})
	}
	for _, bad := range []string{`"1d"`, `5`, `"soon"`} {
		var d v1.NillableDuration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
}

// TestNillableDurationOmitted checks that an unset duration is left out of
// the JSON (so the API server defaults it) in both encoders Kubernetes
// clients use, while Never and values are written.
func TestNillableDurationOmitted(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    v1.NillableDuration
		want any // nil: field absent
	}{
		{"unset", v1.NillableDuration{}, nil},
		{"never", v1.NeverDuration(), "Never"},
		{"value", v1.NewNillableDuration(90 * time.Minute), "1h30m0s"},
		{"parsed", v1.MustParseNillableDuration("90m"), "90m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := v1.NodeClaimTemplateSpec{ExpireAfter: tc.d}
			raw, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			var viaJSON map[string]any
			if err := json.Unmarshal(raw, &viaJSON); err != nil {
				t.Fatal(err)
			}
			viaConverter, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
			if err != nil {
				t.Fatal(err)
			}
			for name, m := range map[string]map[string]any{"json": viaJSON, "converter": viaConverter} {
				got, ok := m["expireAfter"]
				if tc.want == nil && ok {
					t.Errorf("%s: expireAfter = %v, want it omitted", name, got)
				}
				if tc.want != nil && got != tc.want {
					t.Errorf("%s: expireAfter = %v, want %v", name, got, tc.want)
				}
			}
		})
	}
}

func TestIsRestrictedLabel(t *testing.T) {
	for key, restricted := range map[string]bool{
		"karpenter.sh/nodepool":            false, // well known
		"karpenter.sh/capacity-type":       false,
		"topology.kubernetes.io/zone":      false,
		"karpenter.sh/custom":              true,
		"team.karpenter.sh/custom":         true,
		"kubernetes.io/hostname":           true,
		"example.com/team":                 false,
		"notkarpenter.sh/custom":           false, // the runtime check is stricter than CEL's endsWith
		"node.kubernetes.io/instance-type": false,
	} {
		if got := v1.IsRestrictedLabel(key) != nil; got != restricted {
			t.Errorf("IsRestrictedLabel(%q) restricted = %v, want %v", key, got, restricted)
		}
	}
}

func TestHasKnownValues(t *testing.T) {
	ok := v1.NodeSelectorRequirementWithMinValues{Key: v1.CapacityTypeLabelKey, Operator: "In", Values: []string{"spot", "foo"}}
	if err := v1.HasKnownValues(ok); err != nil {
		t.Errorf("spot is known: %v", err)
	}
	bad := v1.NodeSelectorRequirementWithMinValues{Key: v1.CapacityTypeLabelKey, Operator: "In", Values: []string{"foo"}}
	if err := v1.HasKnownValues(bad); err == nil {
		t.Error("foo is not a capacity type")
	}
	other := v1.NodeSelectorRequirementWithMinValues{Key: "example.com/x", Operator: "In", Values: []string{"foo"}}
	if err := v1.HasKnownValues(other); err != nil {
		t.Errorf("no known values for custom keys: %v", err)
	}
}

func TestNodeClassLabelKey(t *testing.T) {
	got := v1.NodeClassLabelKey(schema.GroupKind{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass"})
	if got != "karpenter.k8s.aws/ec2nodeclass" {
		t.Errorf("got %q", got)
	}
}

func TestNodeClaimConditionsConvert(t *testing.T) {
	nc := &v1.NodeClaim{}
	nc.SetConditions(nil)
	if nc.GetConditions() != nil {
		t.Error("nil conditions should stay nil")
	}
	in := []v1.Condition{{Type: v1.ConditionTypeLaunched, Status: "True", Reason: ""}}
	nc.Status.Conditions = in
	got := nc.GetConditions()
	got[0].Reason = "Changed"
	if nc.Status.Conditions[0].Reason != "" {
		t.Error("GetConditions must return a copy")
	}
	nc.SetConditions(got)
	if nc.Status.Conditions[0].Reason != "Changed" {
		t.Error("SetConditions did not store the conditions")
	}
}

// TestDurationClamp: a stored duration the CRD pattern accepted but
// time.ParseDuration refuses (out of range) decodes as MaxDuration, so one
// such object cannot fail the informers' list of every NodePool or NodeClaim.
func TestDurationClamp(t *testing.T) {
	for _, in := range []string{"3000000h", "2000000h2000000h", "2562047h1m", "99999999999999999999s"} {
		t.Run(in, func(t *testing.T) {
			var nd v1.NillableDuration
			if err := json.Unmarshal([]byte(`"`+in+`"`), &nd); err != nil {
				t.Fatalf("NillableDuration: %v", err)
			}
			if nd.Duration == nil || *nd.Duration != v1.MaxDuration {
				t.Errorf("NillableDuration = %v, want %v", nd.Duration, v1.MaxDuration)
			}
			if out, _ := json.Marshal(nd); string(out) != `"`+in+`"` {
				t.Errorf("NillableDuration marshalled %s, want the stored text back", out)
			}
			var d v1.Duration
			if err := json.Unmarshal([]byte(`"`+in+`"`), &d); err != nil {
				t.Fatalf("Duration: %v", err)
			}
			if d.Duration != v1.MaxDuration {
				t.Errorf("Duration = %v, want %v", d.Duration, v1.MaxDuration)
			}
		})
	}
	for _, bad := range []string{`"1d"`, `"h"`, `".h"`, `"3000000"`, `5`} {
		var nd v1.NillableDuration
		if err := json.Unmarshal([]byte(bad), &nd); err == nil {
			t.Errorf("NillableDuration %s decoded without error", bad)
		}
		var d v1.Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Duration %s decoded without error", bad)
		}
	}
	var d v1.Duration
	if err := json.Unmarshal([]byte(`"1h30m"`), &d); err != nil || d.Duration != 90*time.Minute {
		t.Errorf("Duration 1h30m = %v, %v", d.Duration, err)
	}
	if out, _ := json.Marshal(d); string(out) != `"1h30m0s"` {
		t.Errorf("Duration marshalled %s, want metav1.Duration's form", out)
	}

	// Whole objects, as an informer decodes them.
	pool := []byte(`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"p"},"spec":{
		"disruption":{"consolidateAfter":"3000000h","budgets":[{"nodes":"0","schedule":"@daily","duration":"3000000h"}]},
		"template":{"spec":{"expireAfter":"3000000h","terminationGracePeriod":"3000000h","requirements":[],
			"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"d"}}}}}`)
	var np v1.NodePool
	if err := json.Unmarshal(pool, &np); err != nil {
		t.Fatalf("NodePool: %v", err)
	}
	if got := *np.Spec.Disruption.ConsolidateAfter.Duration; got != v1.MaxDuration {
		t.Errorf("consolidateAfter = %v", got)
	}
	if got := np.Spec.Disruption.Budgets[0].Duration.Duration; got != v1.MaxDuration {
		t.Errorf("budget duration = %v", got)
	}
	if got := *np.Spec.Template.Spec.ExpireAfter.Duration; got != v1.MaxDuration {
		t.Errorf("expireAfter = %v", got)
	}
	if got := np.Spec.Template.Spec.TerminationGracePeriod.Duration; got != v1.MaxDuration {
		t.Errorf("terminationGracePeriod = %v", got)
	}
	claim := []byte(`{"apiVersion":"karpenter.sh/v1","kind":"NodeClaim","metadata":{"name":"c"},"spec":{
		"expireAfter":"3000000h","terminationGracePeriod":"3000000h","requirements":[],
		"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"d"}}}`)
	var nc v1.NodeClaim
	if err := json.Unmarshal(claim, &nc); err != nil {
		t.Fatalf("NodeClaim: %v", err)
	}
	if *nc.Spec.ExpireAfter.Duration != v1.MaxDuration || nc.Spec.TerminationGracePeriod.Duration != v1.MaxDuration {
		t.Errorf("NodeClaim durations = %v, %v", nc.Spec.ExpireAfter.Duration, nc.Spec.TerminationGracePeriod)
	}
}
