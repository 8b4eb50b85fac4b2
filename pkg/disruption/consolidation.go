package disruption

import (
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Consolidation constants, as upstream.
const (
	// MaxMultiNodeCandidates bounds multi-node consolidation's batch.
	MaxMultiNodeCandidates = 100
	// DefaultMultiNodeTimeout and DefaultSingleNodeTimeout bound one
	// method's evaluation.
	DefaultMultiNodeTimeout  = time.Minute
	DefaultSingleNodeTimeout = 3 * time.Minute
	// MinSpotToSpotInstanceTypes is how many cheaper spot types a single
	// spot node's replacement must have (and launches with), so that a
	// spot node is not replaced step by step by ever cheaper, ever more
	// interrupted types.
	MinSpotToSpotInstanceTypes = 15
)

// Consolidation types, the consolidation_type label of metrics.
const (
	ConsolidationTypeMulti  = "multi"
	ConsolidationTypeSingle = "single"
)

// ConsolidationOptions configure the consolidation methods. The zero value
// is upstream's default with no timeouts (a pure caller without a clock).
type ConsolidationOptions struct {
	// SpotToSpot is the SpotToSpotConsolidation feature gate.
	SpotToSpot bool
	// Now reads the caller's clock for the methods' timeouts; nil disables
	// them (the package itself reads no clock).
	Now func() time.Time
	// MultiNodeTimeout and SingleNodeTimeout default to 1 and 3 minutes.
	MultiNodeTimeout, SingleNodeTimeout time.Duration
	// OnTimeout is told when a method gives up on its timeout, with the
	// consolidation type (for karpenter_voluntary_disruption_consolidation_timeouts_total).
	OnTimeout func(consolidationType string)
}

// ConsolidationMethods are upstream's consolidation methods in order:
// multi-node, then single-node.
func ConsolidationMethods(opts ConsolidationOptions) []Method {
	return []Method{MultiNodeConsolidation{Options: opts}, NewSingleNodeConsolidation(opts)}
}

// deadline returns a function that reports whether d has passed since now.
func (o ConsolidationOptions) deadline(d time.Duration) func() bool {
	if o.Now == nil || d <= 0 {
		return func() bool { return false }
	}
	end := o.Now().Add(d)
	return func() bool { return o.Now().After(end) }
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (o ConsolidationOptions) timedOut(ctype string) {
	if o.OnTimeout != nil {
		o.OnTimeout(ctype)
	}
}

// consolidationPrecondition is the precondition both consolidation methods share
// (upstream's order of checks, after the ones that are not
// consolidation's business).
func consolidationPrecondition(snap *Snapshot, c *Candidate) (bool, *Verdict) {
	np := c.NodePool
	if np.IsStatic() || c.Empty() {
		// Static pools keep their size; empty nodes are Emptiness's.
		return false, nil
	}
	switch np.Spec.Disruption.ConsolidationPolicy {
	case v1.ConsolidationPolicyWhenEmptyOrUnderutilized, v1.ConsolidationPolicyBalanced:
	case v1.ConsolidationPolicyWhenEmpty:
		// Upstream sends no event for this one: the field's name already
		// says it.
		v := c.verdict(KindPolicyWhenEmpty, v1.DisruptionReasonUnderutilized)
		return false, &v
	default:
		// Unset: the API server defaults it, so only a hand-made snapshot
		// gets here.
		return false, nil
	}
	refuse := func(k Kind, d *ConsolidationDetail) (bool, *Verdict) {
		v := c.verdict(k, v1.DisruptionReasonUnderutilized)
		v.Consolidation, v.Unconsolidatable = d, true
		return false, &v
	}
	labels := c.Node.Node.Labels
	itName := labels[corev1.LabelInstanceTypeStable]
	it := instanceType(snap, np.Name, itName)
	if it == nil {
		return refuse(KindInstanceTypeNotFound, &ConsolidationDetail{InstanceType: itName})
	}
	for _, key := range []string{v1.CapacityTypeLabelKey, corev1.LabelTopologyZone} {
		if _, ok := labels[key]; !ok {
			return refuse(KindMissingLabel, &ConsolidationDetail{Label: key})
		}
	}
	if _, err := nodePrice(snap, c.Node); err != nil {
		return refuse(KindOfferingNotFound, &ConsolidationDetail{InstanceType: itName, Err: err.Error()})
	}
	after := np.Spec.Disruption.ConsolidateAfter
	if after.Duration == nil {
		return refuse(KindConsolidationDisabled, nil)
	}
	if !conditionTrue(c.NodeClaim, v1.ConditionTypeConsolidatable) {
		// No event, as upstream, which leaves such a node out of its
		// candidates silently: every node is inside consolidateAfter after
		// each pod event, and the event would also take the node's one
		// Unconsolidatable event of 15 minutes from the verdict of an
		// actual evaluation. The verdict stays for `karpenter why node`.
		v := c.verdict(KindNotConsolidatable, v1.DisruptionReasonUnderutilized)
		if base := consolidateBase(c); !base.IsZero() {
			until := base.Add(*after.Duration)
			v.Until = &until
		}
		return false, &v
	}
	return true, nil
}

// consolidation is the work one method does in one pass.
type consolidation struct {
	env     *Env
	opts    ConsolidationOptions
	ctype   string
	window  map[string]bool
	balance *balancedTotals
}

func newConsolidation(env *Env, opts ConsolidationOptions, ctype string) *consolidation {
	return &consolidation{env: env, opts: opts, ctype: ctype, window: ConsolidateAfterWindow(env.Snapshot)}
}

// compute is upstream's computeConsolidation: simulate removing cs, then
// delete when their pods fit elsewhere, else replace them with one
// cheaper NodeClaim. A nil command comes with the verdict that explains
// it (for the single-candidate case; multi-node ignores it).
func (k *consolidation) compute(cs []*Candidate) (*Command, *Verdict, error) {
	snap := k.env.Snapshot
	first := cs[0]
	refuse := func(kind Kind, d *ConsolidationDetail) (*Command, *Verdict, error) {
		v := first.verdict(kind, v1.DisruptionReasonUnderutilized)
		v.Consolidation, v.Unconsolidatable = d, true
		return nil, &v, nil
	}
	if k.env.Simulator == nil {
		v := first.verdict(KindSimulationFailed, v1.DisruptionReasonUnderutilized)
		v.Detail = "no scheduling simulator"
		return nil, &v, nil
	}
	sim, err := k.env.Simulator.Simulate(cs, SimulationOptions{Exclude: k.window})
	if err != nil {
		return nil, nil, err
	}
	unschedulable := append([]string(nil), sim.Unschedulable...)
	unschedulable = append(unschedulable, PlacedOn(sim, cs, k.window)...)
	if len(unschedulable) > 0 {
		sort.Strings(unschedulable)
		v := first.verdict(KindPodsDoNotFit, v1.DisruptionReasonUnderutilized)
		v.Pods, v.Unconsolidatable = unschedulable, true
		v.Consolidation = k.whyUnplaced(sim, unschedulable[0])
		return nil, &v, nil
	}
	price, err := candidatesPrice(snap, cs)
	if err != nil {
		return nil, nil, err
	}
	if len(sim.Replacements) == 0 {
		return k.score(&Command{Method: nil, Candidates: cs, Simulation: sim}, price, 0)
	}
	if len(sim.Replacements) > 1 {
		return refuse(KindMultipleReplacements, &ConsolidationDetail{Price: price, Replacements: len(sim.Replacements)})
	}
	r := copyReplacement(sim.Replacements[0])
	simPrice := replacementPrice(r)
	allSpot := true
	for _, c := range cs {
		if c.Node.Node.Labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeSpot {
			allSpot = false
		}
	}
	byPrice(r.InstanceTypes, r.Requirements)
	ct := r.Requirements.Get(v1.CapacityTypeLabelKey)
	if allSpot && ct.Has(v1.CapacityTypeSpot) {
		return k.spotToSpot(cs, sim, r, price, simPrice)
	}
	its, err := cheaperThan(r.InstanceTypes, r.Requirements, price)
	if err != nil {
		return refuse(KindMinValues, &ConsolidationDetail{Price: price, ReplacementPrice: simPrice, Err: err.Error()})
	}
	if len(its) == 0 {
		return refuse(KindNotCheaper, &ConsolidationDetail{Price: price, ReplacementPrice: simPrice})
	}
	// The price filter assumed a spot launch when both capacity types are
	// allowed; an on-demand launch, should spot be short, could cost more
	// than the candidates, so the replacement may only be spot.
	if ct.Has(v1.CapacityTypeSpot) && ct.Has(v1.CapacityTypeOnDemand) {
		r.Requirements.Add(scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeSpot))
	}
	// Multi-node applies upstream's same-type filter to the whole prefix
	// first (MultiNodeConsolidation), then this guard.
	if k.ctype != ConsolidationTypeMulti {
		if its = withoutCandidateOfferings(its, r.Requirements, cs); len(its) == 0 {
			return refuse(KindNotCheaper, &ConsolidationDetail{Price: price, ReplacementPrice: simPrice})
		}
	}
	r.Narrow(its)
	return k.score(&Command{Candidates: cs, Replacements: []*scheduling.NewNodeClaim{r}, Simulation: sim}, price, replacementPrice(r))
}

// withoutCandidateOfferings drops the instance types that would relaunch a
// candidate as it is: its instance type when the replacement can only use
// the candidate's capacity type. Such a move evicts pods to buy the same
// machine; the price rules should already refuse it, and this holds even
// where a price lookup could not (a type missing from the pool's list).
func withoutCandidateOfferings(its []*scheduling.InstanceType, reqs scheduling.Requirements, cs []*Candidate) []*scheduling.InstanceType {
	ct := reqs.Get(v1.CapacityTypeLabelKey)
	same := map[string]bool{}
	for _, c := range cs {
		if c.Node == nil || c.Node.Node == nil {
			continue
		}
		labels := c.Node.Node.Labels
		if have := labels[v1.CapacityTypeLabelKey]; have != "" && ct.Has(have) && len(ct.Values()) == 1 {
			same[labels[corev1.LabelInstanceTypeStable]] = true
		}
	}
	if len(same) == 0 {
		return its
	}
	out := make([]*scheduling.InstanceType, 0, len(its))
	for _, it := range its {
		if !same[it.Name] {
			out = append(out, it)
		}
	}
	return out
}

// spotToSpot replaces spot candidates with cheaper spot capacity, behind
// its gate; a single candidate needs at least 15 cheaper types and
// launches with the 15 cheapest, so it is not walked down one type at a
// time.
func (k *consolidation) spotToSpot(cs []*Candidate, sim *Simulation, r *scheduling.NewNodeClaim, price, simPrice float64) (*Command, *Verdict, error) {
	refuse := func(kind Kind, d *ConsolidationDetail) (*Command, *Verdict, error) {
		v := cs[0].verdict(kind, v1.DisruptionReasonUnderutilized)
		v.Consolidation, v.Unconsolidatable = d, true
		return nil, &v, nil
	}
	if !k.opts.SpotToSpot {
		return refuse(KindSpotToSpotDisabled, &ConsolidationDetail{Price: price, ReplacementPrice: simPrice})
	}
	r.Requirements.Add(scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeSpot))
	var spot []*scheduling.InstanceType
	for _, it := range r.InstanceTypes {
		if !math.IsInf(it.CheapestPrice(r.Requirements), 1) {
			spot = append(spot, it)
		}
	}
	its, err := cheaperThan(spot, r.Requirements, price)
	if err != nil {
		return refuse(KindMinValues, &ConsolidationDetail{Price: price, ReplacementPrice: simPrice, Err: err.Error()})
	}
	if len(its) == 0 {
		return refuse(KindNotCheaper, &ConsolidationDetail{Price: price, ReplacementPrice: simPrice})
	}
	if len(cs) == 1 {
		if len(its) < MinSpotToSpotInstanceTypes {
			return refuse(KindSpotToSpotTooFewTypes, &ConsolidationDetail{Price: price, ReplacementPrice: replacementPriceOf(its, r.Requirements), Options: len(its)})
		}
		its = minValuesPrefix(its, r.Requirements, MinSpotToSpotInstanceTypes)
	}
	r.Narrow(its)
	return k.score(&Command{Candidates: cs, Replacements: []*scheduling.NewNodeClaim{r}, Simulation: sim}, price, replacementPrice(r))
}

// score applies the Balanced policy to a move of the candidates' pools
// that use it.
func (k *consolidation) score(cmd *Command, price, replacement float64) (*Command, *Verdict, error) {
	if !anyBalanced(cmd.Candidates) {
		return cmd, nil, nil
	}
	if k.balance == nil {
		k.balance = newBalancedTotals(k.env.Snapshot)
	}
	s := k.balance.score(cmd.Candidates, price-replacement)
	cmd.Detail = s
	if !s.Approved {
		v := cmd.Candidates[0].verdict(KindBalancedRejected, v1.DisruptionReasonUnderutilized)
		v.Consolidation = &ConsolidationDetail{Price: price, ReplacementPrice: replacement, Score: s}
		v.Unconsolidatable = true
		return nil, &v, nil
	}
	return cmd, nil, nil
}

// whyUnplaced describes why pod (namespace/name) has no home.
func (k *consolidation) whyUnplaced(sim *Simulation, pod string) *ConsolidationDetail {
	d := &ConsolidationDetail{}
	if sim.Result == nil {
		return d
	}
	for _, pl := range sim.Result.Placements {
		if pl.Pod == nil || podKey(pl.Pod) != pod {
			continue
		}
		switch {
		case pl.Node != "" && k.window[pl.Node]:
			d.Destination, d.DestinationReason = pl.Node, DestinationConsolidateWait
		case pl.Node != "":
			d.Destination, d.DestinationReason = pl.Node, DestinationUninitialized
		default:
			d.Refusals = pl.Errors
		}
		break
	}
	return d
}

// PlacedOn names the candidates' pods the simulation put on excluded
// nodes, so that a simulator that cannot exclude is checked after the
// fact.
func PlacedOn(sim *Simulation, cs []*Candidate, excluded map[string]bool) []string {
	if sim.Result == nil || len(excluded) == 0 {
		return nil
	}
	moved := map[string]bool{}
	for _, c := range cs {
		for _, p := range c.Reschedulable {
			moved[podKey(p)] = true
		}
	}
	already := map[string]bool{}
	for _, name := range sim.Unschedulable {
		already[name] = true
	}
	var out []string
	for _, pl := range sim.Result.Placements {
		if pl.Pod == nil || pl.Node == "" || !excluded[pl.Node] {
			continue
		}
		if key := podKey(pl.Pod); moved[key] && !already[key] {
			out = append(out, key)
		}
	}
	return out
}

// ConsolidateAfterWindow names the managed nodes of dynamic pools still
// inside their own consolidateAfter window: they just had pod churn, so
// consolidation does not move pods onto them (pending pods may still go
// there).
func ConsolidateAfterWindow(snap *Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, n := range snap.Nodes {
		if n.NodeClaim == nil || !n.Initialized {
			continue
		}
		np := snap.NodePools[n.NodePool]
		if np == nil || np.IsStatic() || np.Spec.Disruption.ConsolidateAfter.Duration == nil {
			continue
		}
		after := *np.Spec.Disruption.ConsolidateAfter.Duration
		base := nodeConsolidateBase(n)
		inWindow := !conditionTrue(n.NodeClaim, v1.ConditionTypeConsolidatable)
		if !base.IsZero() {
			inWindow = snap.Now.Before(base.Add(after))
		}
		if inWindow {
			out[n.Name()] = true
		}
	}
	return out
}

func nodeConsolidateBase(n *Node) time.Time {
	if t := n.NodeClaim.Status.LastPodEventTime; !t.IsZero() {
		return t.Time
	}
	if cond := condition(n.NodeClaim, v1.ConditionTypeInitialized); cond != nil && cond.Status == "True" {
		return cond.LastTransitionTime.Time
	}
	return time.Time{}
}

// consolidationBudget filters candidates by budget in order, decrementing
// it, and reports the ones left out. Empty candidates are skipped (they
// are Emptiness's; taking them here would spend the Underutilized budget).
func consolidationBudget(budgets map[string]*BudgetStatus, cs []*Candidate, decrement bool) (kept []*Candidate, verdicts []Verdict, constrained bool) {
	for _, c := range cs {
		if remaining(budgets, c.NodePool.Name) <= 0 {
			verdicts = append(verdicts, budgetVerdict(c, v1.DisruptionReasonUnderutilized, budgets[c.NodePool.Name]))
			constrained = true
			continue
		}
		if c.Empty() {
			continue
		}
		if decrement {
			budgets[c.NodePool.Name].Remaining--
		}
		kept = append(kept, c)
	}
	return kept, verdicts, constrained
}
