// Package overlay applies NodeOverlays to the instance types a cloud
// provider reports. The evaluation is pure: Evaluate takes the overlays and
// every NodePool's instance types and returns a Store of what each overlay
// changes, plus a verdict per overlay (valid, invalid, or in conflict with
// another). The Decorator serves instance types through the last Store the
// NodeOverlay controller published, so that every consumer of
// GetInstanceTypes (provisioning, consolidation, cluster state, metrics) sees
// the same overlaid prices and capacity.
//
// The rules, as upstream's:
//   - overlays are taken in order: higher weight first (unset counts as 0),
//     equal weights by name, the later name first;
//   - an overlay selects, per NodePool, the instance types whose labels (with
//     the pool's name and template labels) are compatible with its
//     requirements, and of those the offerings compatible with them;
//   - the first overlay to set an offering's price decides it; for capacity,
//     the first overlay to set a resource decides that resource, and the
//     resources of later overlays are added beside it;
//   - an overlay that touches an offering's price, or a capacity resource,
//     which the previous overlay touching it set at the same weight is in
//     conflict: it is applied nowhere and its ValidationSucceeded is False
//     with reason Conflict;
//   - an overlay that fails the runtime checks is applied nowhere either.
package overlay

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Pool is one NodePool as the overlays see it: its name, its template
// labels and the provider's instance types for it.
type Pool struct {
	Name          string
	Labels        map[string]string
	InstanceTypes []*scheduling.InstanceType
}

// PoolOf is the Pool of a NodePool with its instance types.
func PoolOf(np *v1.NodePool, its []*scheduling.InstanceType) Pool {
	return Pool{Name: np.Name, Labels: np.Spec.Template.LabelMap(), InstanceTypes: its}
}

// Verdict is the outcome of one overlay's evaluation: Reason is "" when the
// overlay is valid (and applied wherever it matched), otherwise
// v1alpha1.ConditionReasonRuntimeValidation or ConditionReasonConflict.
type Verdict struct {
	Reason  string
	Message string
}

// ConflictMessage is the condition message of an overlay in conflict.
const ConflictMessage = "conflict with another overlay"

// Valid reports whether the overlay is in effect.
func (v Verdict) Valid() bool { return v.Reason == "" }

// offeringKey names an offering of one instance type.
type offeringKey struct {
	zone, capacityType, reservationID, extra string
}

func keyOf(o *scheduling.Offering) offeringKey {
	k := offeringKey{zone: o.Zone, capacityType: o.CapacityType, reservationID: o.ReservationID}
	if len(o.Requirements) > 0 {
		k.extra = o.Requirements.String()
	}
	return k
}

// priceSetting is the price change an offering gets and the weight of the
// last overlay that touched its price (for conflicts).
type priceSetting struct {
	change string
	weight int32
}

// typeChanges are the changes to one instance type in one pool.
type typeChanges struct {
	prices map[offeringKey]*priceSetting
	// capacity is what the overlays add; lastCapacity and capacityWeight
	// are the resources and weight of the last overlay that set capacity.
	capacity       corev1.ResourceList
	lastCapacity   corev1.ResourceList
	capacityWeight int32
	capacitySet    bool
}

// Store is the result of one evaluation: the changes per pool and
// instance type, and which pools were evaluated. The zero Store has
// evaluated nothing. A Store is immutable once Evaluate returns.
type Store struct {
	evaluated map[string]bool
	changes   map[string]map[string]*typeChanges
}

// UnevaluatedError says a NodePool's instance types cannot be served yet:
// the overlays have not been evaluated against it. Callers skip the pool.
type UnevaluatedError struct {
	NodePool string
}

func (e *UnevaluatedError) Error() string {
	return fmt.Sprintf("nodepool %s has not been evaluated against the nodeoverlays yet", e.NodePool)
}

// IsUnevaluated reports whether err is (or wraps) an UnevaluatedError.
func IsUnevaluated(err error) bool {
	var target *UnevaluatedError
	return errors.As(err, &target)
}

// Evaluate orders the overlays, checks each and records what the valid ones
// change in every pool. It returns the verdict of every overlay by name.
// The overlays are not modified.
func Evaluate(overlays []v1alpha1.NodeOverlay, pools []Pool) (*Store, map[string]Verdict) {
	list := v1alpha1.NodeOverlayList{Items: append([]v1alpha1.NodeOverlay(nil), overlays...)}
	list.OrderByWeight()
	s := &Store{evaluated: map[string]bool{}, changes: map[string]map[string]*typeChanges{}}
	for _, p := range pools {
		s.evaluated[p.Name] = true
	}
	verdicts := make(map[string]Verdict, len(list.Items))
	for i := range list.Items {
		o := &list.Items[i]
		if err := Validate(o); err != nil {
			verdicts[o.Name] = Verdict{Reason: v1alpha1.ConditionReasonRuntimeValidation, Message: err.Error()}
			continue
		}
		reqs, _ := requirements(o)
		// Check every pool before changing any, so that an overlay in
		// conflict anywhere is applied nowhere.
		matches := make([][]match, len(pools))
		conflict := false
		for p := range pools {
			matches[p] = selectOfferings(pools[p], reqs)
			if s.conflicts(pools[p].Name, matches[p], o) {
				conflict = true
				break
			}
		}
		if conflict {
			verdicts[o.Name] = Verdict{Reason: v1alpha1.ConditionReasonConflict, Message: ConflictMessage}
			continue
		}
		for p := range pools {
			s.record(pools[p].Name, matches[p], o)
		}
		verdicts[o.Name] = Verdict{}
	}
	return s, verdicts
}

// Validate is the runtime check of an overlay, for what the CRD's
// validation cannot express: requirements Karpenter can use and capacity
// limited to extended resources.
func Validate(o *v1alpha1.NodeOverlay) error {
	var errs []error
	for _, r := range o.Spec.Requirements {
		if err := (v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values}).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("invalid requirement: %w", err))
		}
		if r.Operator == corev1.NodeSelectorOpNotIn && len(r.Values) == 0 {
			errs = append(errs, fmt.Errorf("key %s with operator %s must have a value defined", r.Key, r.Operator))
		}
	}
	for name := range o.Spec.Capacity {
		if v1.WellKnownResources.Has(name) {
			errs = append(errs, fmt.Errorf("invalid capacity: %s cannot be overlaid, only extended resources", name))
		}
	}
	if o.Spec.Price != nil && o.Spec.PriceAdjustment != nil {
		errs = append(errs, fmt.Errorf("price and priceAdjustment are mutually exclusive"))
	}
	for _, change := range []*string{o.Spec.Price, o.Spec.PriceAdjustment} {
		if change != nil {
			if _, err := parseChange(*change); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := requirements(o); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func requirements(o *v1alpha1.NodeOverlay) (scheduling.Requirements, error) {
	in := make([]corev1.NodeSelectorRequirement, 0, len(o.Spec.Requirements))
	for _, r := range o.Spec.Requirements {
		in = append(in, r.AsNodeSelectorRequirement())
	}
	return scheduling.RequirementsFromNodeSelector(in)
}

func weightOf(o *v1alpha1.NodeOverlay) int32 {
	if o.Spec.Weight == nil {
		return 0
	}
	return *o.Spec.Weight
}

// priceChange is the overlay's price or priceAdjustment ("" for neither).
func priceChange(o *v1alpha1.NodeOverlay) string {
	switch {
	case o.Spec.Price != nil:
		return *o.Spec.Price
	case o.Spec.PriceAdjustment != nil:
		return *o.Spec.PriceAdjustment
	}
	return ""
}

// match is one instance type an overlay selects, with the offerings it
// selects of it.
type match struct {
	it        *scheduling.InstanceType
	offerings []offeringKey
}

// selectOfferings is what the overlay's requirements select in a pool: an
// instance type is selected when its labels, the pool's name and the pool's
// template labels are compatible with them, and then those of its
// offerings compatible with them. A type with no such offering is not
// selected.
func selectOfferings(p Pool, reqs scheduling.Requirements) []match {
	var out []match
	for _, it := range p.InstanceTypes {
		node := scheduling.NewRequirements(scheduling.NewRequirement(v1.NodePoolLabelKey, scheduling.OpIn, p.Name))
		for k, v := range p.Labels {
			node.Add(scheduling.NewRequirement(k, scheduling.OpIn, v))
		}
		for _, k := range it.Requirements.Keys() {
			node.Add(it.Requirements[k])
		}
		if node.Compatible(reqs, "instance type", false) != nil {
			continue
		}
		var keys []offeringKey
		for i := range it.Offerings {
			if scheduling.OfferingCompatible(&it.Offerings[i], reqs) {
				keys = append(keys, keyOf(&it.Offerings[i]))
			}
		}
		if len(keys) > 0 {
			out = append(out, match{it: it, offerings: keys})
		}
	}
	return out
}

// conflicts reports whether the overlay would set something in the pool
// that the last overlay to set it set at the same weight.
func (s *Store) conflicts(pool string, matches []match, o *v1alpha1.NodeOverlay) bool {
	w := weightOf(o)
	for _, m := range matches {
		tc := s.changes[pool][m.it.Name]
		if tc == nil {
			continue
		}
		if priceChange(o) != "" {
			for _, k := range m.offerings {
				if ps, ok := tc.prices[k]; ok && ps.weight == w {
					return true
				}
			}
		}
		if len(o.Spec.Capacity) > 0 && tc.capacitySet && tc.capacityWeight == w {
			for name := range o.Spec.Capacity {
				if _, ok := tc.lastCapacity[name]; ok {
					return true
				}
			}
		}
	}
	return false
}

// record adds the overlay's changes in the pool: prices of offerings not
// yet priced, capacity resources not yet set. Either way it becomes the
// last overlay to touch them.
func (s *Store) record(pool string, matches []match, o *v1alpha1.NodeOverlay) {
	change, w := priceChange(o), weightOf(o)
	if change == "" && len(o.Spec.Capacity) == 0 {
		return
	}
	for _, m := range matches {
		if s.changes[pool] == nil {
			s.changes[pool] = map[string]*typeChanges{}
		}
		tc := s.changes[pool][m.it.Name]
		if tc == nil {
			tc = &typeChanges{prices: map[offeringKey]*priceSetting{}}
			s.changes[pool][m.it.Name] = tc
		}
		if change != "" {
			for _, k := range m.offerings {
				if ps, ok := tc.prices[k]; ok {
					ps.weight = w
					continue
				}
				tc.prices[k] = &priceSetting{change: change, weight: w}
			}
		}
		if len(o.Spec.Capacity) > 0 {
			if tc.capacity == nil {
				tc.capacity = corev1.ResourceList{}
			}
			for name, q := range o.Spec.Capacity {
				if _, ok := tc.capacity[name]; !ok {
					tc.capacity[name] = q.DeepCopy()
				}
			}
			tc.lastCapacity, tc.capacityWeight, tc.capacitySet = o.Spec.Capacity, w, true
		}
	}
}

// Evaluated reports whether the pool was part of the evaluation.
func (s *Store) Evaluated(pool string) bool { return s != nil && s.evaluated[pool] }

// Apply returns the pool's instance types with the overlays applied. Types
// the overlays do not change are returned as they are; changed ones are
// copies (the inputs are never modified). A pool the Store has not
// evaluated is an UnevaluatedError.
func (s *Store) Apply(pool string, its []*scheduling.InstanceType) ([]*scheduling.InstanceType, error) {
	if !s.Evaluated(pool) {
		return nil, &UnevaluatedError{NodePool: pool}
	}
	changes := s.changes[pool]
	if len(changes) == 0 {
		return its, nil
	}
	out := make([]*scheduling.InstanceType, len(its))
	for i, it := range its {
		out[i] = apply(it, changes[it.Name])
	}
	return out, nil
}

// Changed reports which kinds of change the Store makes to the instance
// type in the pool.
func (s *Store) Changed(pool, instanceType string) (price, capacity bool) {
	if s == nil {
		return false, false
	}
	tc := s.changes[pool][instanceType]
	if tc == nil {
		return false, false
	}
	return len(tc.prices) > 0, len(tc.capacity) > 0
}

func apply(it *scheduling.InstanceType, tc *typeChanges) *scheduling.InstanceType {
	if tc == nil || (len(tc.prices) == 0 && len(tc.capacity) == 0) {
		return it
	}
	cp := *it
	if len(tc.capacity) > 0 {
		cp.Capacity = make(corev1.ResourceList, len(it.Capacity)+len(tc.capacity))
		for k, v := range it.Capacity {
			cp.Capacity[k] = v
		}
		for k, v := range tc.capacity {
			cp.Capacity[k] = v
		}
	}
	if len(tc.prices) > 0 {
		cp.Offerings = make([]scheduling.Offering, len(it.Offerings))
		copy(cp.Offerings, it.Offerings)
		for i := range cp.Offerings {
			if ps, ok := tc.prices[keyOf(&cp.Offerings[i])]; ok {
				cp.Offerings[i].Price = AdjustedPrice(cp.Offerings[i].Price, ps.change)
				cp.Offerings[i].PriceOverlaid = true
			}
		}
	}
	return &cp
}

// change is a parsed price or priceAdjustment.
type change struct {
	absolute bool    // a price: the result is value
	percent  bool    // value is a signed percentage
	value    float64 // the price, or the signed adjustment
}

func parseChange(s string) (change, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return change{}, fmt.Errorf("empty price change")
	}
	if s[0] != '+' && s[0] != '-' {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return change{}, fmt.Errorf("invalid price %q", s)
		}
		return change{absolute: true, value: v}, nil
	}
	c := change{}
	if strings.HasSuffix(s, "%") {
		c.percent = true
		s = strings.TrimSuffix(s, "%")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return change{}, fmt.Errorf("invalid price adjustment %q", s)
	}
	if c.percent && v < -100 {
		return change{}, fmt.Errorf("invalid price adjustment %q: at most -100%%", s)
	}
	c.value = v
	return c, nil
}

// AdjustedPrice is price after a NodeOverlay's price ("0.5": the new price)
// or priceAdjustment ("+0.1", "-0.2": added; "+10%", "-50%": scaled). The
// result is never negative. An unparsable change leaves the price as it is.
func AdjustedPrice(price float64, s string) float64 {
	if s == "" {
		return price
	}
	c, err := parseChange(s)
	if err != nil {
		return price
	}
	var out float64
	switch {
	case c.absolute:
		out = c.value
	case c.percent:
		out = price * (1 + c.value/100)
	default:
		out = price + c.value
	}
	return math.Max(0, out)
}
