package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Operators accepted by a Requirement. Gte and Lte are Karpenter's additions
// to the Kubernetes node-selector operators.
const (
	OpIn           = string(corev1.NodeSelectorOpIn)
	OpNotIn        = string(corev1.NodeSelectorOpNotIn)
	OpExists       = string(corev1.NodeSelectorOpExists)
	OpDoesNotExist = string(corev1.NodeSelectorOpDoesNotExist)
	OpGt           = string(corev1.NodeSelectorOpGt)
	OpLt           = string(corev1.NodeSelectorOpLt)
	OpGte          = "Gte"
	OpLte          = "Lte"
)

// materializeLimit bounds the integer ranges that are turned into explicit
// value sets; a small closed range is cheaper to reason about as a set and
// lets emptiness be decided exactly.
const materializeLimit = 64

// Requirement is the set of values one label key may take. Every operator is
// normalised into one of two shapes so that intersection is a single rule:
//
//   - a finite set (In; DoesNotExist is the empty finite set), or
//   - a complement set: everything except some values, optionally bounded by
//     exclusive integer limits (NotIn, Exists, Gt, Lt, Gte, Lte).
//
// A Requirement is an immutable value: methods never modify the receiver, so
// requirements can be shared between pods, NodeClaims and caches.
type Requirement struct {
	Key string
	// MinValues asks for at least this many distinct values of Key among the
	// instance types a NodeClaim may still launch (0 = no minimum).
	MinValues int

	complement bool
	values     []string // sorted, unique
	hasGT      bool
	gt         int64 // exclusive lower bound, complement sets only
	hasLT      bool
	lt         int64 // exclusive upper bound, complement sets only
}

// ParseRequirement builds a Requirement from API-shaped fields. The key is
// normalised (beta aliases become stable keys). It fails on unknown operators
// and on bound operators whose value is not exactly one integer.
func ParseRequirement(key, operator string, values []string, minValues int) (Requirement, error) {
	r := Requirement{Key: NormalizeKey(key), MinValues: minValues}
	switch operator {
	case OpIn:
		r.values = sortedUnique(values)
	case OpNotIn:
		r.complement = true
		r.values = sortedUnique(values)
	case OpExists:
		r.complement = true
	case OpDoesNotExist:
	case OpGt, OpLt, OpGte, OpLte:
		if len(values) != 1 {
			return Requirement{}, fmt.Errorf("requirement %s %s needs exactly one value, got %d", key, operator, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return Requirement{}, fmt.Errorf("requirement %s %s: value %q is not an integer", key, operator, values[0])
		}
		r.complement = true
		switch operator {
		case OpGt:
			r.hasGT, r.gt = true, n
		case OpGte:
			if n == math.MinInt64 {
				break // everything is >= MinInt64
			}
			r.hasGT, r.gt = true, n-1
		case OpLt:
			r.hasLT, r.lt = true, n
		case OpLte:
			if n == math.MaxInt64 {
				break
			}
			r.hasLT, r.lt = true, n+1
		}
		r = r.normalize()
	default:
		return Requirement{}, fmt.Errorf("requirement %s: unsupported operator %q", key, operator)
	}
	return r, nil
}

// NewRequirement is ParseRequirement for values known to be valid; it panics
// otherwise. Meant for constants and tests.
func NewRequirement(key, operator string, values ...string) Requirement {
	r, err := ParseRequirement(key, operator, values, 0)
	if err != nil {
		panic(err)
	}
	return r
}

// normalize turns small closed integer ranges into finite sets.
func (r Requirement) normalize() Requirement {
	if !r.complement || !r.hasGT || !r.hasLT {
		return r
	}
	if r.lt <= r.gt || r.lt-r.gt-1 <= 0 {
		return Requirement{Key: r.Key, MinValues: r.MinValues}
	}
	if uint64(r.lt-r.gt-1) > materializeLimit {
		return r
	}
	var vals []string
	for v := r.gt + 1; v < r.lt; v++ {
		s := strconv.FormatInt(v, 10)
		if !containsSorted(r.values, s) {
			vals = append(vals, s)
		}
	}
	sort.Strings(vals)
	return Requirement{Key: r.Key, MinValues: r.MinValues, values: vals}
}

// Operator reports the operator that best describes the set.
func (r Requirement) Operator() string {
	if r.complement {
		switch {
		case len(r.values) > 0:
			return OpNotIn
		case r.hasGT:
			return OpGt
		case r.hasLT:
			return OpLt
		}
		return OpExists
	}
	if len(r.values) > 0 {
		return OpIn
	}
	return OpDoesNotExist
}

// Values returns the finite values (In) or the excluded ones (NotIn). The
// slice is shared: do not modify it.
func (r Requirement) Values() []string { return r.values }

// Len is the number of allowed values; complement sets count as unbounded.
func (r Requirement) Len() int {
	if r.complement {
		return math.MaxInt32
	}
	return len(r.values)
}

// IsComplement reports whether the set is "everything except".
func (r Requirement) IsComplement() bool { return r.complement }

// Has reports whether value is in the set.
func (r Requirement) Has(value string) bool {
	if !r.complement {
		return containsSorted(r.values, value)
	}
	return !containsSorted(r.values, value) && r.inBounds(value)
}

func (r Requirement) inBounds(value string) bool {
	if !r.hasGT && !r.hasLT {
		return true
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	return (!r.hasGT || n > r.gt) && (!r.hasLT || n < r.lt)
}

// Any returns one allowed value, chosen deterministically: the smallest of a
// finite set, a value inside the bounds of a bounded set, or a value derived
// from the key for Exists/NotIn. It returns "" for the empty set.
func (r Requirement) Any() string {
	if !r.complement {
		if len(r.values) == 0 {
			return ""
		}
		return r.values[0]
	}
	if r.hasGT || r.hasLT {
		start := int64(0)
		if r.hasGT {
			start = r.gt + 1
		} else if r.lt <= 0 {
			start = r.lt - 1
		}
		for v := start; !r.hasLT || v < r.lt; v++ {
			s := strconv.FormatInt(v, 10)
			if !containsSorted(r.values, s) {
				return s
			}
		}
		return ""
	}
	// A generated value for a custom label the pod only asks to exist. It is
	// derived from the key so that the same snapshot gives the same label.
	for i := 0; ; i++ {
		v := generatedValue(r.Key, i)
		if !containsSorted(r.values, v) {
			return v
		}
	}
}

// generatedValue is a short, label-safe, deterministic value for key.
func generatedValue(key string, salt int) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= uint64(salt)
	h *= 1099511628211
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	for i := range b {
		b[i] = alphabet[h%uint64(len(alphabet))]
		h /= uint64(len(alphabet))
		if h == 0 {
			h = 0x9e3779b97f4a7c15
		}
	}
	b[0] = alphabet[int(b[0])%26] // labels must start alphanumeric; keep it a letter
	return string(b)
}

// Intersect returns the values allowed by both r and o. The key is r's.
func (r Requirement) Intersect(o Requirement) Requirement {
	out := Requirement{Key: r.Key, MinValues: max(r.MinValues, o.MinValues)}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = unionSorted(r.values, o.values)
		out.hasGT, out.gt = r.hasGT || o.hasGT, tighterGT(r, o)
		out.hasLT, out.lt = r.hasLT || o.hasLT, tighterLT(r, o)
		if out.hasGT && out.hasLT && out.lt-out.gt <= 1 {
			return Requirement{Key: r.Key, MinValues: out.MinValues}
		}
		if (out.hasGT || out.hasLT) && len(out.values) > 0 {
			out.values = filterBounds(out.values, out)
		}
		return out.normalize()
	case r.complement:
		out.values = filterBy(o.values, r)
	case o.complement:
		out.values = filterBy(r.values, o)
	default:
		out.values = intersectSorted(r.values, o.values)
	}
	return out
}

// Overlaps reports whether r ∩ o is non-empty, without allocating.
func (r Requirement) Overlaps(o Requirement) bool {
	switch {
	case r.complement && o.complement:
		if r.hasGT || r.hasLT || o.hasGT || o.hasLT {
			return !r.Intersect(o).isEmpty()
		}
		return true
	case r.complement:
		for _, v := range o.values {
			if r.Has(v) {
				return true
			}
		}
		return false
	case o.complement:
		for _, v := range r.values {
			if o.Has(v) {
				return true
			}
		}
		return false
	}
	i, j := 0, 0
	for i < len(r.values) && j < len(o.values) {
		switch {
		case r.values[i] == o.values[j]:
			return true
		case r.values[i] < o.values[j]:
			i++
		default:
			j++
		}
	}
	return false
}

func (r Requirement) isEmpty() bool { return !r.complement && len(r.values) == 0 }

// negative reports whether the requirement is satisfied by an absent label
// (NotIn or DoesNotExist); two negative requirements never conflict.
func (r Requirement) negative() bool {
	if r.complement {
		return !r.hasGT && !r.hasLT && len(r.values) > 0
	}
	return len(r.values) == 0
}

// String renders the requirement the way a user would write it, shortening
// long value lists so that "why" messages stay readable.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	b.WriteByte(' ')
	op := r.Operator()
	switch op {
	case OpIn, OpNotIn:
		b.WriteString(op)
		b.WriteByte(' ')
		b.WriteString(formatValues(r.values))
	case OpExists, OpDoesNotExist:
		b.WriteString(op)
	default:
		if len(r.values) > 0 {
			b.WriteString("NotIn " + formatValues(r.values) + " ")
		}
		parts := []string{}
		if r.hasGT {
			parts = append(parts, "Gt "+strconv.FormatInt(r.gt, 10))
		}
		if r.hasLT {
			parts = append(parts, "Lt "+strconv.FormatInt(r.lt, 10))
		}
		b.WriteString(strings.Join(parts, " "))
	}
	if r.MinValues > 0 {
		fmt.Fprintf(&b, " minValues %d", r.MinValues)
	}
	return b.String()
}

// formatValues prints at most five values, then a count of the rest.
func formatValues(vals []string) string {
	const show = 5
	if len(vals) <= show {
		return "[" + strings.Join(vals, " ") + "]"
	}
	return fmt.Sprintf("[%s and %d others]", strings.Join(vals[:show], " "), len(vals)-show)
}

// NodeSelectorRequirement converts back to the API shape. Bounded sets are
// rendered with Gt/Lt; a bounded set that also excludes values cannot be
// expressed by one API requirement and yields two.
func (r Requirement) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	op := r.Operator()
	switch op {
	case OpIn, OpDoesNotExist, OpExists:
		return []corev1.NodeSelectorRequirement{{Key: r.Key, Operator: corev1.NodeSelectorOperator(op), Values: cloneStrings(r.values)}}
	}
	var out []corev1.NodeSelectorRequirement
	if len(r.values) > 0 {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpNotIn, Values: cloneStrings(r.values)})
	}
	if r.hasGT {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(r.gt, 10)}})
	}
	if r.hasLT {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(r.lt, 10)}})
	}
	return out
}

// Equal reports whether two requirements describe the same set.
func (r Requirement) Equal(o Requirement) bool {
	if r.Key != o.Key || r.complement != o.complement || r.MinValues != o.MinValues || len(r.values) != len(o.values) {
		return false
	}
	if r.hasGT != o.hasGT || (r.hasGT && r.gt != o.gt) || r.hasLT != o.hasLT || (r.hasLT && r.lt != o.lt) {
		return false
	}
	for i := range r.values {
		if r.values[i] != o.values[i] {
			return false
		}
	}
	return true
}

func tighterGT(a, b Requirement) int64 {
	switch {
	case a.hasGT && b.hasGT:
		return max(a.gt, b.gt)
	case a.hasGT:
		return a.gt
	}
	return b.gt
}

func tighterLT(a, b Requirement) int64 {
	switch {
	case a.hasLT && b.hasLT:
		return min(a.lt, b.lt)
	case a.hasLT:
		return a.lt
	}
	return b.lt
}

func filterBounds(vals []string, r Requirement) []string {
	var out []string
	for _, v := range vals {
		if r.inBounds(v) {
			out = append(out, v)
		}
	}
	return out
}

// filterBy keeps the values of a finite set that the complement set c allows.
func filterBy(vals []string, c Requirement) []string {
	var out []string
	for _, v := range vals {
		if c.Has(v) {
			out = append(out, v)
		}
	}
	return out
}

func sortedUnique(vals []string) []string {
	if len(vals) == 0 {
		return nil
	}
	out := cloneStrings(vals)
	sort.Strings(out)
	n := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[n-1] {
			out[n] = out[i]
			n++
		}
	}
	return out[:n]
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func containsSorted(vals []string, v string) bool {
	if len(vals) < 8 {
		for _, x := range vals {
			if x == v {
				return true
			}
		}
		return false
	}
	i := sort.SearchStrings(vals, v)
	return i < len(vals) && vals[i] == v
}

func intersectSorted(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, a[i])
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return out
}

func unionSorted(a, b []string) []string {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}
