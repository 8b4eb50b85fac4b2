package awslocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Policy is an IAM identity policy document: the statements attached to a
// principal. Name is how denials and the rule-removal proof refer to it.
type Policy struct {
	Name      string      `json:"-"`
	Version   string      `json:"Version,omitempty"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a policy. Action/NotAction and
// Resource/NotResource are exclusive; Condition maps an operator (with its
// optional ForAllValues:/ForAnyValue: prefix and IfExists suffix) to the
// keys it tests and their allowed values.
type Statement struct {
	Sid         string                       `json:"Sid,omitempty"`
	Effect      string                       `json:"Effect"`
	Action      Values                       `json:"Action,omitempty"`
	NotAction   Values                       `json:"NotAction,omitempty"`
	Resource    Values                       `json:"Resource,omitempty"`
	NotResource Values                       `json:"NotResource,omitempty"`
	Condition   map[string]map[string]Values `json:"Condition,omitempty"`
}

// Values is a policy element that JSON writes as one string or a list;
// booleans and numbers in conditions read as their text.
type Values []string

// UnmarshalJSON reads a string, a number, a boolean or a list of them.
func (v *Values) UnmarshalJSON(b []byte) error {
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	one := func(x any) (string, error) {
		switch t := x.(type) {
		case string:
			return t, nil
		case bool:
			return strconv.FormatBool(t), nil
		case float64:
			return strconv.FormatFloat(t, 'f', -1, 64), nil
		default:
			return "", fmt.Errorf("policy value %v: want a string, number or boolean", x)
		}
	}
	switch t := raw.(type) {
	case []any:
		out := make(Values, 0, len(t))
		for _, x := range t {
			s, err := one(x)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		*v = out
	default:
		s, err := one(t)
		if err != nil {
			return err
		}
		*v = Values{s}
	}
	return nil
}

// Label names the statement in messages: its Sid, else its position.
func (s Statement) Label(index int) string {
	if s.Sid != "" {
		return s.Sid
	}
	return "#" + strconv.Itoa(index+1)
}

// ParsePolicy reads a policy document and checks it the way IAM does when a
// policy is attached: known effects and condition operators, Action or
// NotAction, Resource or NotResource.
func ParsePolicy(name string, doc []byte) (Policy, error) {
	var raw struct {
		Version   string          `json:"Version"`
		Statement json.RawMessage `json:"Statement"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return Policy{}, fmt.Errorf("policy %s: %w", name, err)
	}
	p := Policy{Name: name, Version: raw.Version}
	stmts := strings.TrimSpace(string(raw.Statement))
	switch {
	case stmts == "":
		return Policy{}, fmt.Errorf("policy %s: no Statement", name)
	case strings.HasPrefix(stmts, "["):
		if err := json.Unmarshal(raw.Statement, &p.Statement); err != nil {
			return Policy{}, fmt.Errorf("policy %s: %w", name, err)
		}
	default:
		var s Statement
		if err := json.Unmarshal(raw.Statement, &s); err != nil {
			return Policy{}, fmt.Errorf("policy %s: %w", name, err)
		}
		p.Statement = []Statement{s}
	}
	return p, p.Validate()
}

// Validate reports the first malformed statement.
func (p Policy) Validate() error {
	if len(p.Statement) == 0 {
		return fmt.Errorf("policy %s: no statements", p.Name)
	}
	for i, s := range p.Statement {
		where := fmt.Sprintf("policy %s statement %s", p.Name, s.Label(i))
		if s.Effect != "Allow" && s.Effect != "Deny" {
			return fmt.Errorf("%s: Effect %q: want Allow or Deny", where, s.Effect)
		}
		if (len(s.Action) == 0) == (len(s.NotAction) == 0) {
			return fmt.Errorf("%s: exactly one of Action and NotAction is required", where)
		}
		if (len(s.Resource) == 0) == (len(s.NotResource) == 0) {
			return fmt.Errorf("%s: exactly one of Resource and NotResource is required", where)
		}
		for _, a := range append(append(Values{}, s.Action...), s.NotAction...) {
			if a != "*" && !strings.Contains(a, ":") {
				return fmt.Errorf("%s: action %q has no service prefix", where, a)
			}
		}
		for op := range s.Condition {
			if _, err := parseOperator(op); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return nil
}

// AuthRequest is one authorization IAM decides: an action on a resource ARN
// ("*" for actions without resource types), with the request context's
// condition keys (compared case-insensitively; see ContextKey).
type AuthRequest struct {
	Action   string              `json:"action"`
	Resource string              `json:"resource"`
	Context  map[string][]string `json:"context,omitempty"`
}

// ContextKey is the form keys take in AuthRequest.Context: IAM compares
// condition key names without regard to case.
func ContextKey(k string) string { return strings.ToLower(k) }

// key is a stable text of the request, for deduplicating call logs.
func (r AuthRequest) key() string {
	keys := make([]string, 0, len(r.Context))
	for k := range r.Context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(r.Action + " " + r.Resource)
	for _, k := range keys {
		vs := append([]string(nil), r.Context[k]...)
		sort.Strings(vs)
		b.WriteString(" " + k + "=" + strings.Join(vs, ","))
	}
	return b.String()
}

// String is the request as denials print it.
func (r AuthRequest) String() string { return r.Action + " on " + r.Resource }

// Decision is IAM's answer to one AuthRequest.
type Decision struct {
	Allowed bool `json:"allowed"`
	// ExplicitDeny is set when a Deny statement matched; it wins over any
	// Allow.
	ExplicitDeny bool `json:"explicitDeny"`
	// Policy and Statement name the statement that decided: the matching
	// Deny, or the first matching Allow. Both are empty for an implicit
	// deny (no statement allows).
	Policy    string `json:"policy,omitempty"`
	Statement string `json:"statement,omitempty"`
}

// Reason is the end of AWS's denial message.
func (d Decision) Reason(action string) string {
	if d.ExplicitDeny {
		return "with an explicit deny in an identity-based policy"
	}
	return "because no identity-based policy allows the " + action + " action"
}

// Evaluate decides r under the identity policies with IAM's logic for one
// account and no resource, boundary or session policies: an explicit Deny
// wins, else any Allow allows, else the request is implicitly denied.
func Evaluate(policies []Policy, r AuthRequest) Decision {
	ctx := make(map[string][]string, len(r.Context))
	for k, v := range r.Context {
		ctx[ContextKey(k)] = v
	}
	var allow *Decision
	for _, p := range policies {
		for i, s := range p.Statement {
			if !s.matches(r.Action, r.Resource, ctx) {
				continue
			}
			if s.Effect == "Deny" {
				return Decision{ExplicitDeny: true, Policy: p.Name, Statement: s.Label(i)}
			}
			if allow == nil {
				allow = &Decision{Allowed: true, Policy: p.Name, Statement: s.Label(i)}
			}
		}
	}
	if allow != nil {
		return *allow
	}
	return Decision{}
}

func (s Statement) matches(action, resource string, ctx map[string][]string) bool {
	if len(s.Action) > 0 && !anyMatch(s.Action, action, actionMatch) {
		return false
	}
	if len(s.NotAction) > 0 && anyMatch(s.NotAction, action, actionMatch) {
		return false
	}
	if len(s.Resource) > 0 && !anyMatch(s.Resource, resource, arnMatch) {
		return false
	}
	if len(s.NotResource) > 0 && anyMatch(s.NotResource, resource, arnMatch) {
		return false
	}
	for op, keys := range s.Condition {
		o, err := parseOperator(op)
		if err != nil {
			return false // Validate refuses such policies; never match one
		}
		for key, want := range keys {
			got, present := ctx[ContextKey(key)]
			if !o.holds(got, present, want) {
				return false
			}
		}
	}
	return true
}

func anyMatch(patterns Values, s string, match func(pattern, s string) bool) bool {
	for _, p := range patterns {
		if match(p, s) {
			return true
		}
	}
	return false
}

// actionMatch compares "service:Action" names case-insensitively with * and
// ? wildcards.
func actionMatch(pattern, action string) bool {
	return glob(strings.ToLower(pattern), strings.ToLower(action))
}

// arnMatch compares ARNs field by field (partition, service, region,
// account, resource), as IAM does, so a wildcard in the region cannot
// swallow the account; the resource field's wildcards span '/' and ':'.
func arnMatch(pattern, arn string) bool {
	if pattern == "*" {
		return true
	}
	pf, af := strings.SplitN(pattern, ":", 6), strings.SplitN(arn, ":", 6)
	if len(pf) != 6 || len(af) != 6 {
		return false // not an ARN: only "*" matches a resource-less action
	}
	for i := range pf {
		if !glob(pf[i], af[i]) {
			return false
		}
	}
	return true
}

// glob matches * (any run, possibly empty) and ? (one character).
func glob(pattern, s string) bool {
	p, t := []rune(pattern), []rune(s)
	pi, ti := 0, 0
	star, mark := -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// operator is a parsed condition operator.
type operator struct {
	name     string // base name, e.g. StringEquals
	set      string // "", "ForAllValues" or "ForAnyValue"
	ifExists bool
	negated  bool
	cmp      func(want, got string) bool
}

var errUnknownOperator = errors.New("unknown condition operator")

var baseOperators = map[string]struct {
	negated bool
	cmp     func(want, got string) bool
}{
	"StringEquals":              {false, func(w, g string) bool { return w == g }},
	"StringNotEquals":           {true, func(w, g string) bool { return w == g }},
	"StringEqualsIgnoreCase":    {false, strings.EqualFold},
	"StringNotEqualsIgnoreCase": {true, strings.EqualFold},
	"StringLike":                {false, glob},
	"StringNotLike":             {true, glob},
	"ArnEquals":                 {false, func(w, g string) bool { return w == g }},
	"ArnNotEquals":              {true, func(w, g string) bool { return w == g }},
	"ArnLike":                   {false, arnMatch},
	"ArnNotLike":                {true, arnMatch},
	"Bool":                      {false, strings.EqualFold},
	"NumericEquals":             {false, numeric(func(w, g float64) bool { return g == w })},
	"NumericNotEquals":          {true, numeric(func(w, g float64) bool { return g == w })},
	"NumericLessThan":           {false, numeric(func(w, g float64) bool { return g < w })},
	"NumericLessThanEquals":     {false, numeric(func(w, g float64) bool { return g <= w })},
	"NumericGreaterThan":        {false, numeric(func(w, g float64) bool { return g > w })},
	"NumericGreaterThanEquals":  {false, numeric(func(w, g float64) bool { return g >= w })},
	"Null":                      {false, nil},
}

func numeric(f func(want, got float64) bool) func(string, string) bool {
	return func(w, g string) bool {
		wf, err1 := strconv.ParseFloat(w, 64)
		gf, err2 := strconv.ParseFloat(g, 64)
		return err1 == nil && err2 == nil && f(wf, gf)
	}
}

func parseOperator(op string) (operator, error) {
	o := operator{}
	name := op
	if set, rest, ok := strings.Cut(name, ":"); ok {
		if set != "ForAllValues" && set != "ForAnyValue" {
			return o, fmt.Errorf("%w %q", errUnknownOperator, op)
		}
		o.set, name = set, rest
	}
	if base, ok := strings.CutSuffix(name, "IfExists"); ok && base != "" {
		o.ifExists, name = true, base
	}
	b, ok := baseOperators[name]
	if !ok || (name == "Null" && (o.ifExists || o.set != "")) {
		return o, fmt.Errorf("%w %q", errUnknownOperator, op)
	}
	o.name, o.negated, o.cmp = name, b.negated, b.cmp
	return o, nil
}

// holds applies the operator to the request's values of one key (present
// says whether the key is in the request context at all) against the
// policy's values, with IAM's rules for missing keys and multivalued keys.
func (o operator) holds(got []string, present bool, want Values) bool {
	if o.name == "Null" {
		absent := !present || len(got) == 0
		for _, w := range want {
			if strings.EqualFold(w, "true") == absent {
				return true
			}
		}
		return false
	}
	if !present || len(got) == 0 {
		switch {
		case o.set == "ForAllValues":
			return true // vacuously: no value fails
		case o.set == "ForAnyValue":
			return false
		case o.ifExists:
			return true
		default:
			// A negated operator holds for a key the request lacks.
			return o.negated
		}
	}
	matchOne := func(g string) bool {
		for _, w := range want {
			if o.cmp(w, g) {
				return true
			}
		}
		return false
	}
	switch o.set {
	case "ForAllValues":
		for _, g := range got {
			if matchOne(g) == o.negated {
				return false
			}
		}
		return true
	case "ForAnyValue":
		for _, g := range got {
			if matchOne(g) != o.negated {
				return true
			}
		}
		return false
	default:
		// A single-valued key: any of its values (normally one) against
		// any allowed value; a negated operator needs none to match.
		for _, g := range got {
			if matchOne(g) {
				return !o.negated
			}
		}
		return o.negated
	}
}
