package scheduling

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func req(key, op string, vals ...string) Requirement { return NewRequirement(key, op, vals...) }

func TestParseRequirement(t *testing.T) {
	cases := []struct {
		name    string
		key, op string
		vals    []string
		wantOp  string
		wantErr bool
		has     []string
		hasNot  []string
	}{
		{"in", "k", OpIn, []string{"b", "a", "a"}, OpIn, false, []string{"a", "b"}, []string{"c", ""}},
		{"notin", "k", OpNotIn, []string{"a"}, OpNotIn, false, []string{"b", "zz"}, []string{"a"}},
		{"exists", "k", OpExists, nil, OpExists, false, []string{"x", "1"}, nil},
		{"doesnotexist", "k", OpDoesNotExist, nil, OpDoesNotExist, false, nil, []string{"x"}},
		{"gt", "k", OpGt, []string{"4"}, OpGt, false, []string{"5", "100"}, []string{"4", "3", "x"}},
		{"lt", "k", OpLt, []string{"4"}, OpLt, false, []string{"3", "-7"}, []string{"4", "5", "x"}},
		{"gte", "k", OpGte, []string{"4"}, OpGt, false, []string{"4", "5"}, []string{"3"}},
		{"lte", "k", OpLte, []string{"4"}, OpLt, false, []string{"4", "0"}, []string{"5"}},
		{"gt no value", "k", OpGt, nil, "", true, nil, nil},
		{"gt two values", "k", OpGt, []string{"1", "2"}, "", true, nil, nil},
		{"gt not int", "k", OpGt, []string{"a"}, "", true, nil, nil},
		{"lte not int", "k", OpLte, []string{"1.5"}, "", true, nil, nil},
		{"bad operator", "k", "Near", []string{"1"}, "", true, nil, nil},
		{"in empty is empty set", "k", OpIn, nil, OpDoesNotExist, false, nil, []string{"a"}},
		{"beta zone normalised", "failure-domain.beta.kubernetes.io/zone", OpIn, []string{"z"}, OpIn, false, []string{"z"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequirement(tc.key, tc.op, tc.vals, 0)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantOp, r.Operator())
			for _, v := range tc.has {
				assert.True(t, r.Has(v), "should have %q", v)
			}
			for _, v := range tc.hasNot {
				assert.False(t, r.Has(v), "should not have %q", v)
			}
		})
	}
}

func TestNormalizeKey(t *testing.T) {
	cases := map[string]string{
		"failure-domain.beta.kubernetes.io/zone":   LabelZone,
		"failure-domain.beta.kubernetes.io/region": LabelRegion,
		"beta.kubernetes.io/arch":                  LabelArch,
		"beta.kubernetes.io/os":                    LabelOS,
		"beta.kubernetes.io/instance-type":         LabelInstanceType,
		"topology.ebs.csi.aws.com/zone":            LabelZone,
		"example.com/custom":                       "example.com/custom",
		LabelZone:                                  LabelZone,
	}
	for in, want := range cases {
		assert.Equal(t, want, NormalizeKey(in), in)
	}
}

func TestRequirementIntersect(t *testing.T) {
	cases := []struct {
		name string
		a, b Requirement
		// want describes the result by membership
		has, hasNot []string
		op          string
	}{
		{"in∩in", req("k", OpIn, "a", "b"), req("k", OpIn, "b", "c"), []string{"b"}, []string{"a", "c"}, OpIn},
		{"in∩in disjoint", req("k", OpIn, "a"), req("k", OpIn, "b"), nil, []string{"a", "b"}, OpDoesNotExist},
		{"in∩notin", req("k", OpIn, "a", "b"), req("k", OpNotIn, "a"), []string{"b"}, []string{"a"}, OpIn},
		{"notin∩in", req("k", OpNotIn, "a"), req("k", OpIn, "a", "b"), []string{"b"}, []string{"a"}, OpIn},
		{"notin∩notin", req("k", OpNotIn, "a"), req("k", OpNotIn, "b"), []string{"c"}, []string{"a", "b"}, OpNotIn},
		{"exists∩in", req("k", OpExists), req("k", OpIn, "a"), []string{"a"}, []string{"b"}, OpIn},
		{"exists∩exists", req("k", OpExists), req("k", OpExists), []string{"a"}, nil, OpExists},
		{"exists∩dne", req("k", OpExists), req("k", OpDoesNotExist), nil, []string{"a"}, OpDoesNotExist},
		{"dne∩in", req("k", OpDoesNotExist), req("k", OpIn, "a"), nil, []string{"a"}, OpDoesNotExist},
		{"gt∩lt range", req("k", OpGt, "1"), req("k", OpLt, "4"), []string{"2", "3"}, []string{"1", "4"}, OpIn},
		{"gt∩lt empty", req("k", OpGt, "3"), req("k", OpLt, "4"), nil, []string{"3", "4"}, OpDoesNotExist},
		{"gt∩lt crossed", req("k", OpGt, "10"), req("k", OpLt, "4"), nil, []string{"5"}, OpDoesNotExist},
		{"gt∩lt wide stays bounded", req("k", OpGt, "0"), req("k", OpLt, "1000"), []string{"1", "999"}, []string{"0", "1000"}, OpGt},
		{"gt∩gt", req("k", OpGt, "1"), req("k", OpGt, "5"), []string{"6"}, []string{"5", "2"}, OpGt},
		{"lt∩lt", req("k", OpLt, "10"), req("k", OpLt, "5"), []string{"4"}, []string{"5", "9"}, OpLt},
		{"gt∩in", req("k", OpGt, "2"), req("k", OpIn, "1", "3", "x"), []string{"3"}, []string{"1", "x"}, OpIn},
		{"in∩gte", req("k", OpIn, "4", "5"), req("k", OpGte, "5"), []string{"5"}, []string{"4"}, OpIn},
		{"in∩lte", req("k", OpIn, "4", "5"), req("k", OpLte, "4"), []string{"4"}, []string{"5"}, OpIn},
		{"gte∩lte single", req("k", OpGte, "4"), req("k", OpLte, "4"), []string{"4"}, []string{"3", "5"}, OpIn},
		{"notin∩gt∩lt", req("k", OpNotIn, "2"), req("k", OpGt, "0").Intersect(req("k", OpLt, "4")), []string{"1", "3"}, []string{"2"}, OpIn},
		{"notin∩gt", req("k", OpNotIn, "7"), req("k", OpGt, "5"), []string{"6", "8"}, []string{"7", "5"}, OpNotIn},
		{"dne∩notin", req("k", OpDoesNotExist), req("k", OpNotIn, "a"), nil, []string{"a", "b"}, OpDoesNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.Intersect(tc.b)
			rev := tc.b.Intersect(tc.a)
			assert.Equal(t, tc.op, got.Operator(), got.String())
			for _, v := range tc.has {
				assert.True(t, got.Has(v), "%s should have %q", got, v)
				assert.True(t, rev.Has(v))
			}
			for _, v := range tc.hasNot {
				assert.False(t, got.Has(v), "%s should not have %q", got, v)
				assert.False(t, rev.Has(v))
			}
			assert.Equal(t, !got.isEmpty(), tc.a.Overlaps(tc.b), "Overlaps must agree with Intersect")
		})
	}
}

func TestRequirementMinValuesKeepsLargest(t *testing.T) {
	a, _ := ParseRequirement("k", OpIn, []string{"a", "b", "c"}, 2)
	b, _ := ParseRequirement("k", OpExists, nil, 3)
	assert.Equal(t, 3, a.Intersect(b).MinValues)
	assert.Contains(t, a.String(), "minValues 2")
}

func TestRequirementAny(t *testing.T) {
	assert.Equal(t, "a", req("k", OpIn, "b", "a").Any())
	assert.Equal(t, "", req("k", OpDoesNotExist).Any())
	assert.Equal(t, "5", req("k", OpGt, "4").Any())
	assert.Equal(t, "0", req("k", OpLt, "4").Any())
	assert.Equal(t, "-1", req("k", OpLt, "0").Any())
	g := req("example.com/team", OpExists).Any()
	assert.Len(t, g, 10)
	assert.Equal(t, g, req("example.com/team", OpExists).Any(), "generated values are deterministic")
	excl := req("example.com/team", OpNotIn, g).Any()
	assert.NotEqual(t, g, excl)
	assert.NotEmpty(t, excl)
}

func TestRequirementString(t *testing.T) {
	assert.Equal(t, "k In [a b]", req("k", OpIn, "b", "a").String())
	assert.Equal(t, "k NotIn [a]", req("k", OpNotIn, "a").String())
	assert.Equal(t, "k Exists", req("k", OpExists).String())
	assert.Equal(t, "k DoesNotExist", req("k", OpDoesNotExist).String())
	assert.Equal(t, "k Gt 4", req("k", OpGt, "4").String())
	assert.Equal(t, "k Gt 3", req("k", OpGte, "4").String())
	assert.Equal(t, "k In [a b c d e and 2 others]", req("k", OpIn, "a", "b", "c", "d", "e", "f", "g").String())
}

func TestRequirementsCompatible(t *testing.T) {
	arch := func(op string, v ...string) Requirements { return NewRequirements(req(LabelArch, op, v...)) }
	custom := func(op string, v ...string) Requirements { return NewRequirements(req("example.com/team", op, v...)) }
	cases := []struct {
		name    string
		node    Requirements
		pod     Requirements
		allowWK bool
		wantErr string // substring; "" means compatible
	}{
		{"same value", arch(OpIn, "amd64"), arch(OpIn, "amd64"), false, ""},
		{"different value", arch(OpIn, "amd64"), arch(OpIn, "arm64"), false, "kubernetes.io/arch In [arm64] not in NodePool's [amd64]"},
		{"pod notin node in", arch(OpIn, "amd64"), arch(OpNotIn, "amd64"), false, "conflicts"},
		{"pod notin other", arch(OpIn, "amd64"), arch(OpNotIn, "arm64"), false, ""},
		{"pod exists node in", arch(OpIn, "amd64"), arch(OpExists), false, ""},
		{"pod dne node in", arch(OpIn, "amd64"), arch(OpDoesNotExist), false, "conflicts"},
		{"pod dne node dne", arch(OpDoesNotExist), arch(OpDoesNotExist), false, ""},
		{"pod notin node dne", arch(OpDoesNotExist), arch(OpNotIn, "x"), false, ""},
		{"pod in node dne", arch(OpDoesNotExist), arch(OpIn, "x"), false, "has no value"},
		{"pod notin node notin same", arch(OpNotIn, "x"), arch(OpNotIn, "x"), false, ""},
		{"node notin pod in excluded", arch(OpNotIn, "x"), arch(OpIn, "x"), false, "conflicts with NodePool's kubernetes.io/arch NotIn [x]"},
		{"undefined well-known allowed", Requirements{}, arch(OpIn, "amd64"), true, ""},
		{"undefined well-known denied", Requirements{}, arch(OpIn, "amd64"), false, "does not have known values"},
		{"undefined custom in", Requirements{}, custom(OpIn, "a"), true, `label "example.com/team" does not have known values`},
		{"undefined custom exists", Requirements{}, custom(OpExists), true, "does not have known values"},
		{"undefined custom notin ok", Requirements{}, custom(OpNotIn, "a"), true, ""},
		{"undefined custom dne ok", Requirements{}, custom(OpDoesNotExist), true, ""},
		{"custom exists vs exists", custom(OpExists), custom(OpIn, "a"), false, ""},
		{"gt vs in", NewRequirements(req("cpu", OpIn, "2", "4")), NewRequirements(req("cpu", OpGt, "3")), false, ""},
		{"gt vs in none", NewRequirements(req("cpu", OpIn, "2", "4")), NewRequirements(req("cpu", OpGt, "4")), false, "cpu Gt 4 not in"},
		{"gt vs lt", NewRequirements(req("cpu", OpLt, "4")), NewRequirements(req("cpu", OpGt, "8")), false, "conflicts"},
		{"empty pod", arch(OpIn, "amd64"), Requirements{}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.node.Compatible(tc.pod, "NodePool", tc.allowWK)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestRequirementsFromNodeSelectorAndLabels(t *testing.T) {
	r, err := RequirementsFromNodeSelector([]corev1.NodeSelectorRequirement{
		{Key: "beta.kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
		{Key: LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}},
		{Key: "example.com/team", Operator: corev1.NodeSelectorOpExists},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"arm64"}, r.Get(LabelArch).Values())
	assert.Equal(t, OpExists, r.Get("unconstrained").Operator())
	assert.False(t, r.Has("unconstrained"))

	_, err = RequirementsFromNodeSelector([]corev1.NodeSelectorRequirement{{Key: "a", Operator: "Bogus"}})
	assert.Error(t, err)

	l := r.Labels()
	assert.NotContains(t, l, LabelArch, "well-known labels are left to the provider")
	assert.Len(t, l["example.com/team"], 10, "exists keys get a generated value")

	mv := 2
	r2, err := RequirementsFromMinValues([]RequirementWithMinValues{{Key: LabelInstanceType, Operator: OpIn, Values: []string{"a", "b"}, MinValues: &mv}})
	require.NoError(t, err)
	assert.Equal(t, 2, r2.Get(LabelInstanceType).MinValues)

	fromLabels := RequirementsFromLabels(map[string]string{"a": "1", "failure-domain.beta.kubernetes.io/zone": "z"})
	assert.True(t, fromLabels.Get(LabelZone).Has("z"))
	assert.Equal(t, map[string]string{"a": "1"}, fromLabels.Labels())
}

func TestRestrictedLabels(t *testing.T) {
	for key, restricted := range map[string]bool{
		"karpenter.sh/capacity-type":          true,
		"karpenter.sh/custom":                 true,
		"karpenter.k8s.aws/instance-family":   true,
		"kubernetes.io/hostname":              true,
		"node.kubernetes.io/exclude-from-lb":  false,
		"node-restriction.kubernetes.io/team": false,
		"example.com/team":                    false,
		"team":                                false,
		"sub.kubernetes.io/x":                 true,
		"kops.k8s.io/instancegroup":           false,
	} {
		assert.Equal(t, restricted, isRestrictedNodeLabel(key, defaultWellKnownLabels), key)
	}
	// A provider's well-known key outside the restricted domains is
	// restricted only in a solve that declares it.
	assert.False(t, isRestrictedNodeLabel("example.com/instance-family", defaultWellKnownLabels))
	assert.True(t, isRestrictedNodeLabel("example.com/instance-family", wellKnownSet([]string{"example.com/instance-family"})))
}

func TestNodeSelectorRoundTrip(t *testing.T) {
	for _, r := range []Requirement{
		req("k", OpIn, "a", "b"), req("k", OpNotIn, "a"), req("k", OpExists), req("k", OpDoesNotExist),
		req("k", OpGt, "3"), req("k", OpLt, "3"), req("k", OpGt, "3").Intersect(req("k", OpLt, "300")),
		req("k", OpNotIn, "7").Intersect(req("k", OpGt, "3")),
	} {
		back, err := RequirementsFromNodeSelector(r.NodeSelectorRequirements())
		require.NoError(t, err)
		assert.True(t, back.Get("k").Equal(r), "%s became %s", r, back.Get("k"))
	}
}

func TestRequirementsStringSorted(t *testing.T) {
	r := NewRequirements(req("b", OpExists), req("a", OpIn, "x"))
	assert.Equal(t, "a In [x], b Exists", r.String())
	assert.True(t, strings.HasPrefix(r.Intersect(NewRequirements(req("a", OpIn, "y"))).String(), "a DoesNotExist"))
}

// TestIntersectMatrix checks every pair of a representative set of
// requirements against membership: v ∈ a∩b ⇔ v ∈ a ∧ v ∈ b, and the
// compatibility rule (an empty intersection is only compatible when both
// sides are satisfied by an absent label).
func TestIntersectMatrix(t *testing.T) {
	set := []Requirement{
		req("k", OpIn, "1"), req("k", OpIn, "1", "5"), req("k", OpIn, "x"), req("k", OpNotIn, "1"), req("k", OpNotIn, "1", "x"),
		req("k", OpExists), req("k", OpDoesNotExist), req("k", OpGt, "2"), req("k", OpLt, "3"), req("k", OpGte, "5"),
		req("k", OpLte, "1"), req("k", OpGt, "0").Intersect(req("k", OpLt, "100")),
	}
	for _, a := range set {
		for _, b := range set {
			a, b := a, b
			t.Run(a.String()+" ∩ "+b.String(), func(t *testing.T) {
				ab := a.Intersect(b)
				for _, v := range probes {
					require.Equal(t, a.Has(v) && b.Has(v), ab.Has(v), "value %q in %s", v, ab)
				}
				err := NewRequirements(a).Compatible(NewRequirements(b), "node", false)
				want := !ab.isEmpty() || (a.negative() && b.negative())
				assert.Equal(t, want, err == nil, "compatible(%s, %s): %v", a, b, err)
			})
		}
	}
}
