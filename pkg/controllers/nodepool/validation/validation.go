// Package validation owns the NodePool checks that the API server's schema
// and CEL rules cannot express (label and taint syntax, restricted label
// domains, operator/value shapes), the controller that reports them as the
// ValidationSucceeded condition, and ValidateRequirement, which the
// provisioner also applies to pod node selectors.
package validation

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// SupportedOperators are the requirement operators Karpenter understands.
var SupportedOperators = sets.New(
	string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn),
	string(corev1.NodeSelectorOpExists), string(corev1.NodeSelectorOpDoesNotExist),
	string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt),
	string(v1.NodeSelectorOpGte), string(v1.NodeSelectorOpLte),
)

var supportedEffects = sets.New(
	string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute),
)

// RuntimeValidate checks np's template; the error lists every problem.
func RuntimeValidate(np *v1.NodePool) error {
	t := np.Spec.Template
	var errs []error
	for _, k := range sortedKeys(t.LabelMap()) {
		errs = append(errs, validateLabel(k, string(t.Labels[k]))...)
	}
	errs = append(errs, validateTaints(t.Spec.Taints, t.Spec.StartupTaints)...)
	for i, r := range t.Spec.Requirements {
		if err := ValidateRequirement(r); err != nil {
			errs = append(errs, fmt.Errorf("spec.template.spec.requirements[%d]: %w", i, err))
		}
		if r.Key == v1.NodePoolLabelKey {
			errs = append(errs, fmt.Errorf("spec.template.spec.requirements[%d]: requirement on restricted label %q is not allowed", i, v1.NodePoolLabelKey))
		}
	}
	return errors.Join(errs...)
}

func validateLabel(key, value string) []error {
	var errs []error
	for _, msg := range utilvalidation.IsQualifiedName(key) {
		errs = append(errs, fmt.Errorf("spec.template.metadata.labels: invalid key %q, %s", key, msg))
	}
	for _, msg := range utilvalidation.IsValidLabelValue(value) {
		errs = append(errs, fmt.Errorf("spec.template.metadata.labels[%s]: invalid value %q, %s", key, value, msg))
	}
	if err := v1.IsRestrictedLabel(key); err != nil {
		errs = append(errs, fmt.Errorf("spec.template.metadata.labels[%s]: %w", key, err))
	}
	return errs
}

// validateTaints checks syntax and that no key/effect pair repeats across
// taints and startupTaints (the node could not carry both).
func validateTaints(taints, startupTaints []corev1.Taint) []error {
	var errs []error
	seen := map[string]bool{}
	for field, list := range map[string][]corev1.Taint{"taints": taints, "startupTaints": startupTaints} {
		for i, t := range list {
			path := fmt.Sprintf("spec.template.spec.%s[%d]", field, i)
			for _, msg := range utilvalidation.IsQualifiedName(t.Key) {
				errs = append(errs, fmt.Errorf("%s: invalid key %q, %s", path, t.Key, msg))
			}
			if t.Value != "" {
				for _, msg := range utilvalidation.IsValidLabelValue(t.Value) {
					errs = append(errs, fmt.Errorf("%s: invalid value %q, %s", path, t.Value, msg))
				}
			}
			if !supportedEffects.Has(string(t.Effect)) {
				errs = append(errs, fmt.Errorf("%s: invalid effect %q", path, t.Effect))
			}
			id := t.Key + ":" + string(t.Effect)
			if seen[id] {
				errs = append(errs, fmt.Errorf("%s: duplicate taint key/effect %s", path, id))
			}
			seen[id] = true
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// ValidateRequirement checks one requirement the way Karpenter needs it:
// a supported operator, a qualified and unrestricted key, valid values, a
// value for In, one non-negative integer for Gt/Lt/Gte/Lte, and a minValues
// no larger than the values of an In.
func ValidateRequirement(r v1.NodeSelectorRequirementWithMinValues) error {
	key := r.Key
	if normalized, ok := v1.NormalizedLabels[key]; ok {
		key = normalized
	}
	op := string(r.Operator)
	var errs []error
	if !SupportedOperators.Has(op) {
		errs = append(errs, fmt.Errorf("key %s has an unsupported operator %s not in %s", key, op, strings.Join(sets.List(SupportedOperators), ", ")))
	}
	if err := v1.IsRestrictedLabel(key); err != nil {
		errs = append(errs, err)
	}
	if err := v1.HasKnownValues(v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: r.Operator, Values: r.Values}); err != nil && op == string(corev1.NodeSelectorOpIn) {
		errs = append(errs, err)
	}
	for _, msg := range utilvalidation.IsQualifiedName(key) {
		errs = append(errs, fmt.Errorf("key %s is not a qualified name, %s", key, msg))
	}
	for _, v := range r.Values {
		for _, msg := range utilvalidation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("invalid value %s for key %s, %s", v, key, msg))
		}
	}
	switch op {
	case string(corev1.NodeSelectorOpIn):
		if len(r.Values) == 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a value defined", key, op))
		}
	case string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt), string(v1.NodeSelectorOpGte), string(v1.NodeSelectorOpLte):
		if len(r.Values) != 1 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a single positive integer value", key, op))
		} else if n, err := strconv.Atoi(r.Values[0]); err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a single positive integer value", key, op))
		}
	}
	if r.MinValues != nil && op == string(corev1.NodeSelectorOpIn) && len(r.Values) < *r.MinValues {
		errs = append(errs, fmt.Errorf("key %s with operator %s must have at least minimum number of values defined in 'values' field", key, op))
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
