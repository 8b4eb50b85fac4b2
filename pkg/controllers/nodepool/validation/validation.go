// Package validation owns the NodePool checks that the API server's schema
// and CEL rules cannot express (label and taint syntax, restricted label
// domains, operator/value shapes), the controller that reports them as the
// ValidationSucceeded condition. A requirement's own checks are
// NodeSelectorRequirementWithMinValues.Validate, which the snapshot builder
// also applies to pod node selectors.
package validation

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
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
		if err := r.Validate(); err != nil {
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

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
