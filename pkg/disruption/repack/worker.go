package repack

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// worker plans one NodePool: its candidates leave, its nodes receive.
type worker struct {
	p        *planner
	pool     string
	machines []*machine
	budget   int
	status   *disruption.BudgetStatus
	moves    []*move
	verdicts map[string]disruption.Verdict
	paybacks map[string]*disruption.Payback
	solves   int
	// keep are the nodes the target fleet keeps (the only destinations).
	keep map[*machine]bool
	// keepFigures are the figures of the keep rule, by node.
	keepFigures map[*machine]disruption.Payback
	// split caches, by candidate shape, the pools cut to half its size.
	split map[[2]float64][]*scheduling.NodePool
	// drain: nodes not kept that this pass leaves (Plan.Drain).
	drain []string
	// held: inefficient nodes the history rules keep, drained and never
	// destinations.
	held map[*machine]bool
	// compat memoizes compatible over nodes.
	compat *compatCache
	// spreadRoom is the free room of the pool's nodes (as w.nodes) after the
	// kube-scheduler's spreading of the pods this pass's deletes evict.
	spreadRoom []vec
	// others caches the other pools' nodes as the solver sees them
	// (topologyNode).
	others map[*disruption.Node]*scheduling.ExistingNode
}

func (w *worker) run() {
	// The fleet to keep: nodes whose pods cost close to what the cheapest
	// machines would charge for them. The rest is repacked (see repack),
	// and any node may be deleted into the others' free room.
	w.keep = map[*machine]bool{}
	w.held = map[*machine]bool{}
	w.keepFigures = map[*machine]disruption.Payback{}
	var total vec
	for _, m := range w.machines {
		for _, p := range m.pods {
			total = total.add(w.p.reqs[p])
		}
	}
	var cands []*machine
	for _, m := range w.machines {
		// A node the history rules hold is kept only if it is efficient:
		// an inefficient one is drained (tainted, so the kube-scheduler
		// avoids it), and the plan must not count on its room.
		if (m.candidate == nil && !m.blocked) || w.kept(m, total) {
			w.keep[m] = true
		} else if m.blocked {
			w.drain = append(w.drain, m.name)
			w.held[m] = true
		}
		if m.candidate != nil {
			cands = append(cands, m)
		}
	}
	sortUpstream(cands)
	cands = w.choose(cands)
	// A node no cheaper fleet exists for is not drained when this pass's
	// evicted pods spread onto it: the checks that passed the pass's moves
	// counted on its room, and drained it would send those pods onto the
	// next candidates, to be evicted again. A node whose move is only held
	// back (payback gate, budget, this pass's deletes) is drained all the
	// same: it leaves later, and pods sent there would move again.
	spreadOnto := w.spreadReceivers()
	for _, m := range cands {
		if !w.keep[m] && !m.removed && !m.receiver && !(spreadOnto[m] && w.noMove(m)) {
			w.drain = append(w.drain, m.name)
		}
		if !w.keep[m] || m.removed {
			continue
		}
		if _, ok := w.verdicts[m.name]; ok {
			continue
		}
		if m.receiver {
			v := verdict(m.candidate, KindReceiver, nil)
			v.Detail = "Node receives pods another consolidation move of this pass moves; its own pods stay"
			w.verdicts[m.name] = v
			continue
		}
		v := verdict(m.candidate, KindNoCheaperPlacement, &disruption.ConsolidationDetail{Price: m.price})
		if w.p.opts.KeepEfficiency > 0 {
			v.Detail = fmt.Sprintf("Node is kept: its pods use %.0f%% of what its price buys on the cheapest machines (at least %.0f%% is kept)",
				100*w.efficiency(m), 100*w.p.opts.KeepEfficiency)
		} else {
			pb := w.keepFigures[m]
			v.Detail = fmt.Sprintf("Node is kept: the cheapest machines would run its pods for $%.4f/h less than its $%.4f/h, $%.4f over %s, not more than the disruption cost $%.4f of its %d pod(s)",
				pb.PriceBefore-pb.PriceAfter, pb.PriceBefore, pb.Saving, pb.Horizon.Round(time.Second), pb.Cost, pb.Evictions)
		}
		w.verdicts[m.name] = v
	}
}

// spreadReceivers are the nodes the kube-scheduler's spreading of this
// pass's evicted pods puts pods on (spreadRoom): the checks that passed the
// pass's moves counted on their room. Draining one would send those pods
// elsewhere, onto nodes the checks did not plan for, which may be the next
// candidates: the evicted pods then have to move again.
func (w *worker) spreadReceivers() map[*machine]bool {
	out := map[*machine]bool{}
	if w.spreadRoom == nil {
		return out
	}
	for i, m := range w.machines {
		if w.spreadRoom[i] != m.allocatable.sub(m.usedBefore) {
			out[m] = true
		}
	}
	return out
}

// noMove reports whether m's verdict says no cheaper fleet exists for it
// (rather than that a move is held back by the payback gate, the budget
// or this pass's other moves).
func (w *worker) noMove(m *machine) bool {
	switch w.verdicts[m.name].Kind {
	case KindNoCheaperPlacement, KindSameInstanceType, disruption.KindNotCheaper, disruption.KindSpotToSpotTooFewTypes, disruption.KindSpotToSpotDisabled:
		return true
	}
	return false
}

// sortUpstream orders candidates as upstream's consolidation does: price
// over the node's disruption (1 for the node plus its pods' eviction
// costs, disruption.NodeDisruption), highest first, ties by name. The free
// room then goes to the deletes that save the most per evicted pod, and
// the batch of deletes (deleteBatch) is the prefix upstream's multi-node
// consolidation tries. The node's own 1 matters: without it a node of one
// pod ranks level with a node of eight at the same price per pod, and the
// batch fills with small nodes whose pods then leave no room for the
// large ones.
func sortUpstream(cands []*machine) {
	sort.SliceStable(cands, func(i, j int) bool {
		fi, fj := cands[i].price/disruption.NodeDisruption(cands[i].node), cands[j].price/disruption.NodeDisruption(cands[j].node)
		if fi != fj {
			return fi > fj
		}
		return cands[i].name < cands[j].name
	})
}

// clone copies the worker before any move, with its own copies of the
// nodes (idx maps each node to its copy), for a second plan of the same
// pool.
func (w *worker) clone() (*worker, map[*machine]*machine) {
	cp := *w
	idx := make(map[*machine]*machine, len(w.machines))
	cp.machines = make([]*machine, len(w.machines))
	for i, m := range w.machines {
		c := *m
		c.pods = append([]*corev1.Pod(nil), m.pods...)
		cp.machines[i] = &c
		idx[m] = &c
	}
	cp.keep = map[*machine]bool{}
	for m, ok := range w.keep {
		cp.keep[idx[m]] = ok
	}
	cp.held = map[*machine]bool{}
	for m, ok := range w.held {
		cp.held[idx[m]] = ok
	}
	cp.verdicts = map[string]disruption.Verdict{}
	cp.paybacks = map[string]*disruption.Payback{}
	cp.drain = append([]string(nil), w.drain...)
	cp.moves, cp.spreadRoom, cp.solves = nil, nil, 0
	return &cp, idx
}

// skip reports (with a verdict) candidates this pass cannot move.
func (w *worker) skip(m *machine) bool {
	switch {
	case m.removed:
		return true
	case m.receiver:
		v := verdict(m.candidate, KindReceiver, nil)
		v.Detail = "Node receives pods another consolidation move of this pass moves; its own pods stay"
		w.verdicts[m.name] = v
		return true
	case w.budget <= 0:
		w.verdicts[m.name] = w.budgetVerdict(m)
		return true
	}
	return false
}

func (w *worker) budgetVerdict(m *machine) disruption.Verdict {
	v := verdict(m.candidate, disruption.KindBudgetExhausted, nil)
	if b := w.status; b != nil && b.Limiting != nil {
		ref := *b.Limiting
		v.Budget = &ref
	} else if b != nil {
		v.Budget = &disruption.BudgetRef{Index: -1, Allowed: b.Allowed, Disrupting: b.Disrupting}
	}
	return v
}
