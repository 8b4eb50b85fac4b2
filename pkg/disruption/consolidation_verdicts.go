package disruption

import (
	"fmt"
	"math"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Consolidation verdict kinds.
const (
	KindInstanceTypeNotFound  Kind = "InstanceTypeNotFound"
	KindMissingLabel          Kind = "MissingLabel"
	KindOfferingNotFound      Kind = "OfferingNotFound"
	KindPolicyWhenEmpty       Kind = "ConsolidationPolicyWhenEmpty"
	KindPodsDoNotFit          Kind = "PodsDoNotFit"
	KindMultipleReplacements  Kind = "MultipleReplacements"
	KindNotCheaper            Kind = "ReplacementNotCheaper"
	KindMinValues             Kind = "MinValuesNotMet"
	KindSpotToSpotDisabled    Kind = "SpotToSpotDisabled"
	KindSpotToSpotTooFewTypes Kind = "SpotToSpotTooFewTypes"
	KindBalancedRejected      Kind = "BalancedScoreTooLow"
	KindConsolidationDeferred Kind = "ConsolidationDeferred"
	KindConsolidationTimeout  Kind = "ConsolidationTimedOut"
)

// ConsolidationDetail holds a consolidation verdict's figures.
type ConsolidationDetail struct {
	// Price is what the candidates cost now ($/h), ReplacementPrice the
	// cheapest replacement the simulation found (worst launch price).
	Price, ReplacementPrice float64
	// Replacements counts the NodeClaims the simulation wanted.
	Replacements int
	// Options counts the cheaper instance types left (spot-to-spot).
	Options int
	// Refusals say why the first pod of Pods fits nowhere (the solver's
	// typed placement errors).
	Refusals []scheduling.PlacementError
	// Destination is a node the simulation put the first pod on that it
	// may not use, and DestinationReason why (uninitialized, or within its
	// own consolidateAfter window).
	Destination, DestinationReason string
	// Score is a Balanced rejection's score.
	Score *BalancedScore
	// Label is the missing label (MissingLabel), InstanceType the
	// candidate's type, Err a filtering error.
	Label, InstanceType, Err string
	// Payback is the forecast of a move the repacking planner's payback
	// gate refused: the saving over the horizon and the disruption cost.
	Payback *Payback
}

// Destination reasons.
const (
	DestinationUninitialized   = "uninitialized"
	DestinationConsolidateWait = "consolidateAfter"
)

func consolidationMessage(v Verdict) (string, bool) {
	d := v.Consolidation
	if d == nil {
		d = &ConsolidationDetail{}
	}
	switch v.Kind {
	case KindInstanceTypeNotFound:
		return fmt.Sprintf("Instance Type %q not found", d.InstanceType), true
	case KindMissingLabel:
		return fmt.Sprintf("Node does not have label %q", d.Label), true
	case KindOfferingNotFound:
		return fmt.Sprintf("Unable to determine the price of instance type %q: %s", d.InstanceType, d.Err), true
	case KindPolicyWhenEmpty:
		return fmt.Sprintf("NodePool %q has consolidationPolicy %s", v.NodePool, v1.ConsolidationPolicyWhenEmpty), true
	case KindPodsDoNotFit:
		return podsDoNotFitMessage(v, d), true
	case KindMultipleReplacements:
		return fmt.Sprintf("Can't remove without creating %d candidates", d.Replacements), true
	case KindNotCheaper:
		if d.ReplacementPrice > 0 && !math.IsInf(d.ReplacementPrice, 1) {
			return fmt.Sprintf("Can't replace with a cheaper node (current price $%.4f/h, cheapest replacement $%.4f/h)", d.Price, d.ReplacementPrice), true
		}
		return fmt.Sprintf("Can't replace with a cheaper node (current price $%.4f/h)", d.Price), true
	case KindMinValues:
		return "Filtering by price: " + d.Err, true
	case KindSpotToSpotDisabled:
		return "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node", true
	case KindSpotToSpotTooFewTypes:
		return fmt.Sprintf("SpotToSpotConsolidation requires %d cheaper instance type options than the current candidate to consolidate, got %d",
			MinSpotToSpotInstanceTypes, d.Options), true
	case KindBalancedRejected:
		if d.Score != nil {
			return d.Score.Message(), true
		}
		return "Balanced consolidation score below threshold", true
	case KindConsolidationDeferred:
		return "Another consolidation command goes first", true
	case KindConsolidationTimeout:
		return "Consolidation timed out before evaluating this node", true
	}
	return "", false
}

func podsDoNotFitMessage(v Verdict, d *ConsolidationDetail) string {
	if len(v.Pods) == 0 {
		return "Pods cannot be rescheduled"
	}
	first := v.Pods[0]
	var why string
	switch {
	case d.Destination != "" && d.DestinationReason == DestinationUninitialized:
		why = fmt.Sprintf("it would only fit on node %q, which is not initialized", d.Destination)
	case d.Destination != "" && d.DestinationReason == DestinationConsolidateWait:
		why = fmt.Sprintf("it would only fit on node %q, which is within its consolidateAfter window", d.Destination)
	case len(d.Refusals) > 0:
		why = scheduling.Placement{Errors: d.Refusals}.Why()
	default:
		why = "no node or NodePool can take it"
	}
	msg := fmt.Sprintf("Pod %q cannot be rescheduled: %s", first, why)
	if n := len(v.Pods) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d other pod(s))", n)
	}
	return msg
}
