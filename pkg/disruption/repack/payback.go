package repack

import (
	"fmt"
	"math"
	"time"

	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// payback prices a move of cands to replacements costing after ($/h).
func (w *worker) payback(cands []*machine, after float64) disruption.Payback {
	pb := disruption.Payback{PriceAfter: after, Horizon: w.p.opts.Horizon}
	cost := 0.0
	for _, m := range cands {
		pb.PriceBefore += m.price
		cost += math.Max(0, m.candidate.DisruptionCost)
		pb.Evictions += len(m.candidate.Reschedulable)
		if nc := m.node.NodeClaim; nc != nil && nc.Spec.ExpireAfter.Duration != nil && *nc.Spec.ExpireAfter.Duration > 0 {
			left := nc.CreationTimestamp.Add(*nc.Spec.ExpireAfter.Duration).Sub(w.p.now)
			if left < pb.Horizon {
				pb.Horizon = max(left, 0)
			}
		}
	}
	pb.Saving = (pb.PriceBefore - pb.PriceAfter) * pb.Horizon.Hours()
	pb.Cost = cost * w.p.opts.RestartCost
	return pb
}

// pays applies the gate.
func (w *worker) pays(pb disruption.Payback) bool {
	if pb.PriceBefore-pb.PriceAfter <= 1e-9 {
		return false
	}
	return w.p.opts.TakeAnySaving || pb.Saving > pb.Cost
}

func (w *worker) gateVerdict(cands []*machine, pb disruption.Payback) {
	for _, m := range cands {
		figures := pb
		v := verdict(m.candidate, KindPaybackGate, &disruption.ConsolidationDetail{Price: pb.PriceBefore, ReplacementPrice: pb.PriceAfter, Payback: &figures})
		v.Detail = fmt.Sprintf("Saving $%.4f over %s ($%.4f/h → $%.4f/h) is below the disruption cost $%.4f of %d pod(s)",
			pb.Saving, pb.Horizon.Round(time.Second), pb.PriceBefore, pb.PriceAfter, pb.Cost, pb.Evictions)
		w.verdicts[m.name] = v
		cp := pb
		w.paybacks[m.name] = &cp
	}
}
