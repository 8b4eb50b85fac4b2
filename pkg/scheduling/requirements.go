package scheduling

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Requirements maps a label key to the values it may take. A missing key is
// unconstrained. Methods that return Requirements never alias the receiver's
// map, but Add modifies the receiver in place.
type Requirements map[string]Requirement

// NewRequirements collects requirements, intersecting those on the same key.
func NewRequirements(reqs ...Requirement) Requirements {
	out := make(Requirements, len(reqs))
	out.Add(reqs...)
	return out
}

// RequirementsFromNodeSelector parses nodeSelector-style requirements.
func RequirementsFromNodeSelector(reqs []corev1.NodeSelectorRequirement) (Requirements, error) {
	out := make(Requirements, len(reqs))
	for _, r := range reqs {
		req, err := ParseRequirement(r.Key, string(r.Operator), r.Values, 0)
		if err != nil {
			return nil, err
		}
		out.Add(req)
	}
	return out, nil
}

// RequirementWithMinValues is the shape of a NodePool requirement
// (karpenter.sh/v1 NodeSelectorRequirementWithMinValues); callers copy their
// API objects into it so that the solver does not depend on the API package.
type RequirementWithMinValues struct {
	Key       string
	Operator  string
	Values    []string
	MinValues *int
}

// RequirementsFromMinValues parses NodePool-style requirements.
func RequirementsFromMinValues(reqs []RequirementWithMinValues) (Requirements, error) {
	out := make(Requirements, len(reqs))
	for _, r := range reqs {
		mv := 0
		if r.MinValues != nil {
			mv = *r.MinValues
		}
		req, err := ParseRequirement(r.Key, r.Operator, r.Values, mv)
		if err != nil {
			return nil, err
		}
		out.Add(req)
	}
	return out, nil
}

// RequirementsFromLabels makes one single-valued In requirement per label.
func RequirementsFromLabels(labels map[string]string) Requirements {
	out := make(Requirements, len(labels))
	for k, v := range labels {
		out.Add(NewRequirement(k, OpIn, v))
	}
	return out
}

// Add intersects each requirement into r.
func (r Requirements) Add(reqs ...Requirement) {
	for _, req := range reqs {
		if old, ok := r[req.Key]; ok {
			req = old.Intersect(req)
		}
		r[req.Key] = req
	}
}

// Has reports whether key is constrained.
func (r Requirements) Has(key string) bool {
	_, ok := r[key]
	return ok
}

// Get returns the requirement for key, or Exists when key is unconstrained.
func (r Requirements) Get(key string) Requirement {
	if req, ok := r[key]; ok {
		return req
	}
	return Requirement{Key: key, complement: true}
}

// Keys returns the constrained keys, sorted.
func (r Requirements) Keys() []string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Copy returns a shallow copy; requirements are immutable so this is enough.
func (r Requirements) Copy() Requirements {
	out := make(Requirements, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

// Intersect returns r ∩ o as a new map.
func (r Requirements) Intersect(o Requirements) Requirements {
	out := r.Copy()
	for _, k := range o.Keys() {
		out.Add(o[k])
	}
	return out
}

// Equal reports whether both describe the same constraints.
func (r Requirements) Equal(o Requirements) bool {
	if len(r) != len(o) {
		return false
	}
	for k, v := range r {
		ov, ok := o[k]
		if !ok || !v.Equal(ov) {
			return false
		}
	}
	return true
}

// IncompatibleError explains why a pod's requirements cannot be met by a
// node, NodePool or instance type. Its message is meant for people.
type IncompatibleError struct {
	Key string
	Msg string
	// Owner names the node side ("NodePool", "node"); Node and Pod are the
	// two requirements on Key (Node is nil when Undefined: the node side
	// has no value for a key only the pod requires).
	Owner     string
	Node, Pod *Requirement
	Undefined bool
}

func (e *IncompatibleError) Error() string { return e.Msg }

// Compatible checks that the requirements pod can be met together with r
// (the node side). owner names the node side in the message ("NodePool",
// "node", "instance type"). For keys only the pod constrains:
//   - NotIn and DoesNotExist always pass (an absent label satisfies them);
//   - well-known keys pass when allowUndefinedWellKnown is set, because the
//     instance types will decide them later;
//   - anything else fails: nobody would put that label on the node.
//
// Keys are checked in sorted order so the reported conflict is stable.
func (r Requirements) Compatible(pod Requirements, owner string, allowUndefinedWellKnown bool) error {
	var wellKnown map[string]bool
	if allowUndefinedWellKnown {
		wellKnown = defaultWellKnownLabels
	}
	return r.compatible(pod, owner, wellKnown)
}

// compatible is Compatible where the keys in wellKnown may stay undefined
// on the node side (nil: none may).
func (r Requirements) compatible(pod Requirements, owner string, wellKnown map[string]bool) error {
	if len(pod) == 0 {
		return nil
	}
	var keys []string
	if len(pod) > 1 {
		keys = pod.Keys()
	} else {
		for k := range pod {
			keys = []string{k}
		}
	}
	for _, k := range keys {
		p := pod[k]
		n, ok := r[k]
		if !ok {
			if p.negative() || wellKnown[k] {
				continue
			}
			return undefinedLabel(k, p, owner)
		}
		if err := conflict(n, p, owner); err != nil {
			return err
		}
	}
	return nil
}

// conflict reports why node and pod requirements on one key cannot both hold.
func conflict(node, pod Requirement, owner string) *IncompatibleError {
	if node.Overlaps(pod) || (node.negative() && pod.negative()) {
		return nil
	}
	var msg string
	switch {
	case node.Operator() == OpIn && (pod.Operator() == OpIn || pod.Operator() == OpGt || pod.Operator() == OpLt):
		msg = fmt.Sprintf("%s not in %s's %s", pod, owner, formatValues(node.values))
	case node.Operator() == OpDoesNotExist:
		msg = fmt.Sprintf("%s but %s's %s has no value", pod, owner, node.Key)
	default:
		msg = fmt.Sprintf("%s conflicts with %s's %s", pod, owner, node)
	}
	return &IncompatibleError{Key: pod.Key, Msg: msg, Owner: owner, Node: &node, Pod: &pod}
}

// undefinedLabel reports a pod requirement on a key the node side has no
// values for.
func undefinedLabel(key string, pod Requirement, owner string) *IncompatibleError {
	return &IncompatibleError{Key: key, Msg: fmt.Sprintf("label %q does not have known values on %s", key, owner),
		Owner: owner, Pod: &pod, Undefined: true}
}

// Intersects is Compatible restricted to the keys both sides constrain; it is
// how instance types are matched against a NodeClaim.
func (r Requirements) Intersects(o Requirements) error {
	small, large := r, o
	if len(small) > len(large) {
		small, large = large, small
	}
	var bad []string
	for k, a := range small {
		b, ok := large[k]
		if !ok {
			continue
		}
		if !a.Overlaps(b) && !(a.negative() && b.negative()) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	k := bad[0]
	return conflict(r[k], o[k], "the other side")
}

// Labels turns requirements into node labels: one value per key, generated
// for Exists-style keys, skipping the generic well-known and restricted
// keys (the provider or kubelet set those).
func (r Requirements) Labels() map[string]string { return r.labels(defaultWellKnownLabels) }

// labels is Labels skipping the keys of wellKnown.
func (r Requirements) labels(wellKnown map[string]bool) map[string]string {
	out := map[string]string{}
	for k, req := range r {
		if isRestrictedNodeLabel(k, wellKnown) {
			continue
		}
		if v := req.Any(); v != "" {
			out[k] = v
		}
	}
	return out
}

// NodeSelectorRequirements renders the requirements in the API shape, sorted
// by key.
func (r Requirements) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	for _, k := range r.Keys() {
		out = append(out, r[k].NodeSelectorRequirements()...)
	}
	return out
}

func (r Requirements) String() string {
	parts := make([]string, 0, len(r))
	for _, k := range r.Keys() {
		parts = append(parts, r[k].String())
	}
	return strings.Join(parts, ", ")
}
