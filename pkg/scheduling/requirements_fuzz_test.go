package scheduling

import (
	"strconv"
	"testing"
)

var fuzzOps = []string{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt, OpGte, OpLte}

// fuzzReq turns fuzzer bytes into a valid requirement over a small universe of
// values, so that intersections actually collide.
func fuzzReq(op uint8, a, b uint8) Requirement {
	o := fuzzOps[int(op)%len(fuzzOps)]
	var vals []string
	switch o {
	case OpIn, OpNotIn:
		vals = []string{strconv.Itoa(int(a % 10)), strconv.Itoa(int(b % 10))}
	case OpGt, OpLt, OpGte, OpLte:
		vals = []string{strconv.Itoa(int(a%12) - 1)}
	}
	return NewRequirement("k", o, vals...)
}

// universe of probe values: integers around the range plus a non-integer.
var probes = func() []string {
	out := []string{"x", "", "-5", "100"}
	for i := -2; i < 14; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}()

// FuzzRequirementAlgebra checks set laws by probing membership.
func FuzzRequirementAlgebra(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(2), uint8(1), uint8(2), uint8(3), uint8(4), uint8(5), uint8(6))
	f.Add(uint8(4), uint8(3), uint8(0), uint8(5), uint8(8), uint8(0), uint8(1), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, o1, a1, b1, o2, a2, b2, o3, a3, b3 uint8) {
		x, y, z := fuzzReq(o1, a1, b1), fuzzReq(o2, a2, b2), fuzzReq(o3, a3, b3)
		xy, yx := x.Intersect(y), y.Intersect(x)
		xx := x.Intersect(x)
		xyz1, xyz2 := xy.Intersect(z), x.Intersect(y.Intersect(z))
		for _, v := range probes {
			want := x.Has(v) && y.Has(v)
			if xy.Has(v) != want {
				t.Fatalf("%s ∩ %s = %s; Has(%q)=%v want %v", x, y, xy, v, xy.Has(v), want)
			}
			if yx.Has(v) != xy.Has(v) {
				t.Fatalf("not commutative on %q: %s vs %s", v, xy, yx)
			}
			if xx.Has(v) != x.Has(v) {
				t.Fatalf("not idempotent on %q: %s vs %s", v, x, xx)
			}
			if xyz1.Has(v) != xyz2.Has(v) {
				t.Fatalf("not associative on %q", v)
			}
			if xy.Has(v) && !x.Has(v) {
				t.Fatalf("intersection larger than operand")
			}
		}
		if xy.isEmpty() == x.Overlaps(y) && !(xy.complement) {
			t.Fatalf("Overlaps(%s,%s)=%v but intersection %s", x, y, x.Overlaps(y), xy)
		}
		// A∩B compatible with A unless the intersection is empty.
		a, ab := NewRequirements(x), NewRequirements(xy)
		if !xy.isEmpty() {
			if err := a.Compatible(ab, "node", false); err != nil {
				t.Fatalf("%s should be compatible with %s: %v", x, xy, err)
			}
		}
		// Any is a member.
		if v := xy.Any(); v != "" && !xy.Has(v) {
			t.Fatalf("Any()=%q not in %s", v, xy)
		}
		// String never panics and round-trips through the API shape.
		back, err := RequirementsFromNodeSelector(xy.NodeSelectorRequirements())
		if err != nil {
			t.Fatalf("round trip of %s: %v", xy, err)
		}
		for _, v := range probes {
			if back.Get("k").Has(v) != xy.Has(v) {
				t.Fatalf("round trip of %s changed membership of %q: %s", xy, v, back.Get("k"))
			}
		}
	})
}

// FuzzParseRequirement must never panic and must reject malformed input.
func FuzzParseRequirement(f *testing.F) {
	f.Add("k", "In", "a", "b")
	f.Add("beta.kubernetes.io/arch", "Gt", "12", "")
	f.Add("k", "Lte", "-9223372036854775808", "")
	f.Add("k", "Gte", "9223372036854775807", "")
	f.Fuzz(func(t *testing.T, key, op, v1, v2 string) {
		vals := []string{v1}
		if v2 != "" {
			vals = append(vals, v2)
		}
		r, err := ParseRequirement(key, op, vals, 0)
		if err != nil {
			return
		}
		_ = r.String()
		_ = r.Any()
		if r.Operator() == OpIn && !r.Has(v1) {
			t.Fatalf("In requirement lost its value")
		}
		if x := r.Intersect(r); x.Operator() != r.Operator() && !(r.Operator() == OpIn && x.Operator() == OpIn) {
			t.Fatalf("self-intersection changed operator %s → %s", r, x)
		}
	})
}
