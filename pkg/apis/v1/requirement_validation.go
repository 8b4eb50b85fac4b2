package v1

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// SupportedOperators are the requirement operators Karpenter understands.
var SupportedOperators = sets.New(
	string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn),
	string(corev1.NodeSelectorOpExists), string(corev1.NodeSelectorOpDoesNotExist),
	string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt),
	string(NodeSelectorOpGte), string(NodeSelectorOpLte),
)

// Validate checks one requirement the way Karpenter needs it:
// a supported operator, a qualified and unrestricted key, valid values, a
// value for In, one non-negative integer for Gt/Lt/Gte/Lte, and a minValues
// no larger than the values of an In.
func (r NodeSelectorRequirementWithMinValues) Validate() error {
	key := r.Key
	if normalized, ok := NormalizedLabels[key]; ok {
		key = normalized
	}
	op := string(r.Operator)
	var errs []error
	if !SupportedOperators.Has(op) {
		errs = append(errs, fmt.Errorf("key %s has an unsupported operator %s not in %s", key, op, strings.Join(sets.List(SupportedOperators), ", ")))
	}
	if err := IsRestrictedLabel(key); err != nil {
		errs = append(errs, err)
	}
	if err := HasKnownValues(NodeSelectorRequirementWithMinValues{Key: key, Operator: r.Operator, Values: r.Values}); err != nil && op == string(corev1.NodeSelectorOpIn) {
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
	case string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt), string(NodeSelectorOpGte), string(NodeSelectorOpLte):
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
