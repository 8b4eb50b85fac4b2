package repack

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Verdict kinds the planner adds to the disruption package's.
const (
	// KindPaybackGate: the move's saving over the horizon does not pay
	// for the pods it restarts (Payback has both figures).
	KindPaybackGate disruption.Kind = "SavingBelowPayback"
	// KindCoolDown: a recent move launched this node; it is left alone
	// until Until.
	KindCoolDown disruption.Kind = "ConsolidationCoolDown"
	// KindRecentlyEvicted: a pod here (Pod) was evicted by a recent move
	// and is not evicted again before Until.
	KindRecentlyEvicted disruption.Kind = "PodRecentlyEvicted"
	// KindSameInstanceType: the only cheaper fleet relaunches the node's
	// own instance type and capacity type.
	KindSameInstanceType disruption.Kind = "SameInstanceType"
	// KindReceiver: the node receives pods another move of this pass
	// moves, so its own pods stay.
	KindReceiver disruption.Kind = "ReceivesMovedPods"
	// KindAfterDeletes: this pass deletes nodes of the pool; the node's
	// replacement is planned in a later pass, once the deleted nodes'
	// pods have been placed.
	KindAfterDeletes disruption.Kind = "RepackAfterDeletes"
	// KindSpreadMisfit: the move's plan places every pod, but the
	// kube-scheduler's own spreading of them (the emptiest node first,
	// the move's new nodes included) would leave some without room.
	KindSpreadMisfit disruption.Kind = "SpreadDoesNotFit"
	// KindNoCheaperPlacement: no delete, replacement, split or group move
	// is cheaper than the node.
	KindNoCheaperPlacement disruption.Kind = "NoCheaperPlacement"
)

// Plan is one pass's answer.
type Plan struct {
	// Commands in order: replacements first, then deletes.
	Commands []*disruption.Command
	// Verdicts cover every candidate not in a command, sorted by node.
	Verdicts []disruption.Verdict
	// Paybacks holds the forecast behind a KindPaybackGate verdict, by
	// node name.
	Paybacks map[string]*disruption.Payback
	// Solves counts the solver calls.
	Solves int
	// Drain names the nodes the planner wants emptied but leaves this pass
	// (kept by the cool-down, the payback gate or the budget while below
	// KeepEfficiency), sorted. The caller taints them with DrainTaint so
	// that the kube-scheduler places new and evicted pods elsewhere, and
	// the plan never counts on their room.
	Drain []string
}

// move is one planned command.
type move struct {
	cands        []*mnode
	replacements []*scheduling.NewNodeClaim
	payback      disruption.Payback
	// reshuffle: an N→M move relaunching more of its candidates' own
	// instance types (and capacity types) than it ends (see worker.beats).
	reshuffle bool
}

// planner is the shared, read-only part of a pass.
type planner struct {
	snap    *disruption.Snapshot
	opts    Options
	now     time.Time
	pools   []*scheduling.NodePool
	daemons []*appsv1.DaemonSet
	types   typeIndex
	reqs    map[*corev1.Pod]vec
	// perUnit is, by pool, the cheapest $/h per millicore and per byte
	// among the pool's types: a floor under any replacement's price.
	perUnit map[string][2]float64
	// cover is, by pool, the Pareto front of its types in resources per
	// dollar (see coverCost).
	cover map[string][][2]float64
}

// Compute plans one pass over the candidates (those the disruption
// package found eligible for consolidation) within budgets (Remaining is
// decremented). It is pure and deterministic.
func Compute(snap *disruption.Snapshot, cands []*disruption.Candidate, budgets map[string]*disruption.BudgetStatus, hist History, opts Options) (*Plan, error) {
	opts = opts.withDefaults()
	p := &planner{snap: snap, opts: opts, now: snap.Now, types: newTypeIndex(snap), reqs: map[*corev1.Pod]vec{}, perUnit: map[string][2]float64{}, cover: map[string][][2]float64{}}
	var err error
	if p.pools, err = disruption.SolverNodePools(snap); err != nil {
		return nil, err
	}
	p.daemons = daemonSets(snap)
	for _, sp := range p.pools {
		p.perUnit[sp.Name] = cheapestPerUnit(sp)
		p.cover[sp.Name] = coverFront(sp)
	}
	isCand := map[*disruption.Node]*disruption.Candidate{}
	for _, c := range cands {
		isCand[c.Node] = c
	}
	window := disruption.ConsolidateAfterWindow(snap)
	byPool := map[string][]*mnode{}
	plan := &Plan{Paybacks: map[string]*disruption.Payback{}}
	verdicts := map[string]disruption.Verdict{}
	launched := hist.launchedAt()
	replaced := hist.replacements(snap)
	for _, n := range snap.Nodes {
		if n.Node == nil {
			continue
		}
		m := &mnode{n: n, name: n.Name(), pool: n.NodePool, alloc: toVec(n.Node.Status.Allocatable), cand: isCand[n]}
		for _, pod := range n.Pods {
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			r := podVec(pod)
			p.reqs[pod] = r
			m.used = m.used.add(r)
			m.pods = append(m.pods, pod)
		}
		m.used0 = m.used
		m.dest = (n.Initialized || n.NodeClaim == nil) && !n.Deleting && !n.MarkedForDeletion && !n.InQueue && !window[m.name]
		if m.cand != nil {
			price, _, perr := p.types.nodePrice(n)
			if perr != nil {
				// ShouldDisrupt refuses such nodes already.
				m.cand = nil
			} else {
				m.price = price
				m.itName = n.Node.Labels[corev1.LabelInstanceTypeStable]
				m.ct = n.Node.Labels[v1.CapacityTypeLabelKey]
				if v, blocked := p.churnBlock(m, launched, hist, replaced); blocked {
					verdicts[m.name] = v
					m.cand, m.blocked = nil, true
				}
			}
		}
		byPool[m.pool] = append(byPool[m.pool], m)
	}
	names := make([]string, 0, len(byPool))
	for name := range byPool {
		names = append(names, name)
	}
	sort.Strings(names)
	var all []*mnode
	for _, name := range names {
		nodes := byPool[name]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
		all = append(all, nodes...)
	}
	p.reserve(all, verdicts)
	var emptied []string
	for _, m := range all {
		if m.dest && p.emptied(m, launched) {
			m.dest = false
			emptied = append(emptied, m.name)
		}
	}
	workers := make([]*worker, 0, len(names))
	for _, name := range names {
		nodes := byPool[name]
		w := &worker{p: p, pool: name, nodes: nodes, compat: newCompatCache(nodes), verdicts: map[string]disruption.Verdict{}, paybacks: map[string]*disruption.Payback{}}
		if b := budgets[name]; b != nil {
			w.budget, w.status = b.Remaining, b
		}
		workers = append(workers, w)
	}
	if err := runAll(workers, opts.Parallelism); err != nil {
		return nil, err
	}
	var replaces, deletes []*disruption.Command
	for _, w := range workers {
		plan.Solves += w.solves
		plan.Drain = append(plan.Drain, w.drain...)
		if b := budgets[w.pool]; b != nil {
			b.Remaining = w.budget
		}
		for k, v := range w.verdicts {
			verdicts[k] = v
		}
		for k, v := range w.paybacks {
			plan.Paybacks[k] = v
		}
		for _, mv := range w.moves {
			pb := mv.payback
			// The replacements carry the launch taint while they come up,
			// so that the pods this pass's deletes evict do not fill the
			// room they were launched for.
			cmd := &disruption.Command{Replacements: mv.replacements, Detail: &pb, LaunchTaint: len(mv.replacements) > 0}
			for _, m := range mv.cands {
				cmd.Candidates = append(cmd.Candidates, m.cand)
			}
			if len(cmd.Replacements) > 0 {
				replaces = append(replaces, cmd)
			} else {
				deletes = append(deletes, cmd)
			}
		}
	}
	plan.Drain = append(plan.Drain, emptied...)
	plan.Commands = append(replaces, deletes...)
	moved := map[string]bool{}
	for _, cmd := range plan.Commands {
		for _, c := range cmd.Candidates {
			moved[c.Name()] = true
		}
	}
	for _, c := range cands {
		if moved[c.Name()] {
			continue
		}
		v, ok := verdicts[c.Name()]
		if !ok {
			v = verdict(c, KindNoCheaperPlacement, nil)
		}
		plan.Verdicts = append(plan.Verdicts, v)
	}
	sort.SliceStable(plan.Verdicts, func(i, j int) bool { return plan.Verdicts[i].Node < plan.Verdicts[j].Node })
	sort.Strings(plan.Drain)
	return plan, nil
}

// runAll runs the workers on at most par goroutines (GOMAXPROCS when 0);
// a panic in one is returned as an error rather than crashing the caller.
func runAll(ws []*worker, par int) error {
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, par)
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, w *worker) {
			defer wg.Done()
			defer func() { <-sem }()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("planning nodepool %s: panic: %v\n%s", w.pool, r, debug.Stack())
				}
			}()
			w.run()
		}(i, w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// churnBlock applies the history rules to a candidate.
func (p *planner) churnBlock(m *mnode, launched map[string]time.Time, hist History, replaced map[*corev1.Pod]time.Time) (disruption.Verdict, bool) {
	if p.opts.TakeAnySaving {
		return disruption.Verdict{}, false
	}
	cd := p.opts.CoolDown
	for _, name := range []string{m.name, m.n.NodeClaimName()} {
		if at, ok := launched[name]; ok && p.now.Before(at.Add(cd)) {
			v := verdict(m.cand, KindCoolDown, nil)
			until := at.Add(cd)
			v.Until = &until
			v.Detail = fmt.Sprintf("Node was launched by a consolidation move at %s; left alone until %s", at.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
			return v, true
		}
	}
	for _, pod := range m.cand.Reschedulable {
		key := pod.Namespace + "/" + pod.Name
		at, byName := hist.Evicted[key]
		ok := byName
		if !ok {
			at, ok = replaced[pod]
		}
		if ok && p.now.Before(at.Add(cd)) {
			v := verdict(m.cand, KindRecentlyEvicted, nil)
			until := at.Add(cd)
			v.Pod, v.Until = key, &until
			what := "was evicted"
			if !byName {
				what = "replaces a pod of " + OwnerKey(pod) + " evicted"
			}
			v.Detail = fmt.Sprintf("Pod %q %s by consolidation at %s; not evicted again before %s", key, what, at.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
			return v, true
		}
	}
	return disruption.Verdict{}, false
}

func verdict(c *disruption.Candidate, k disruption.Kind, d *disruption.ConsolidationDetail) disruption.Verdict {
	return disruption.Verdict{
		Kind: k, Node: c.Name(), NodeClaim: c.NodeClaimName(), NodePool: c.NodePool.Name,
		Method: v1.DisruptionReasonUnderutilized, Unconsolidatable: true, Consolidation: d,
	}
}

// cheapestPerUnit is the pool's cheapest $/h per millicore and per byte of
// allocatable.
// launchable reports whether the pool's requirements allow the type: a
// pool's types are its NodeClass's (the cloud provider does not filter
// them by the pool), and a cover priced with types the pool cannot launch
// rated every node of a pool restricted to dearer types inefficient, so
// that the planner drained them all.
func launchable(sp *scheduling.NodePool, it *scheduling.InstanceType) bool {
	return it.Requirements.Intersects(sp.Requirements) == nil
}

func cheapestPerUnit(sp *scheduling.NodePool) [2]float64 {
	best := [2]float64{math.Inf(1), math.Inf(1)}
	for _, it := range sp.InstanceTypes {
		if !launchable(sp, it) {
			continue
		}
		price := math.Inf(1)
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.Available && sp.Requirements.Get(v1.CapacityTypeLabelKey).Has(o.CapacityType) && sp.Requirements.Get(corev1.LabelTopologyZone).Has(o.Zone) && o.Price < price {
				price = o.Price
			}
		}
		if math.IsInf(price, 1) {
			continue
		}
		alloc := allocOf(it)
		for r := 0; r < 2; r++ {
			if alloc[r] > 0 {
				best[r] = math.Min(best[r], price/alloc[r])
			}
		}
	}
	for r := range best {
		if math.IsInf(best[r], 1) {
			best[r] = 0
		}
	}
	return best
}

// coverFront is the pool's types as millicores and bytes of allocatable
// per $/h (at their cheapest offering the pool may buy), without the types
// another beats on both.
func coverFront(sp *scheduling.NodePool) [][2]float64 {
	var pts [][2]float64
	for _, it := range sp.InstanceTypes {
		if !launchable(sp, it) {
			continue
		}
		price := math.Inf(1)
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.Available && sp.Requirements.Get(v1.CapacityTypeLabelKey).Has(o.CapacityType) && sp.Requirements.Get(corev1.LabelTopologyZone).Has(o.Zone) && o.Price < price {
				price = o.Price
			}
		}
		if math.IsInf(price, 1) || price <= 0 {
			continue
		}
		alloc := allocOf(it)
		if alloc[0] > 0 && alloc[1] > 0 {
			pts = append(pts, [2]float64{alloc[0] / price, alloc[1] / price})
		}
	}
	sort.Slice(pts, func(i, j int) bool {
		if pts[i][0] != pts[j][0] {
			return pts[i][0] > pts[j][0]
		}
		return pts[i][1] > pts[j][1]
	})
	var front [][2]float64
	for _, q := range pts {
		if len(front) == 0 || q[1] > front[len(front)-1][1] {
			front = append(front, q)
		}
	}
	return front
}

// coverCost is the cheapest $/h of fractional machines of the front's
// types whose allocatable covers d's cpu and memory: the LP relaxation
// of buying a fleet for d. It is at most any real fleet's price, and
// tighter than pricing cpu and memory each at its cheapest type, which
// no single family offers together.
func coverCost(front [][2]float64, d vec) float64 {
	best := math.Inf(1)
	for _, q := range front {
		best = math.Min(best, math.Max(d[0]/q[0], d[1]/q[1]))
	}
	for i := range front {
		for j := i + 1; j < len(front); j++ {
			a, b := front[i], front[j]
			det := a[0]*b[1] - a[1]*b[0]
			if math.Abs(det) < 1e-18 {
				continue
			}
			xa := (d[0]*b[1] - d[1]*b[0]) / det
			xb := (a[0]*d[1] - a[1]*d[0]) / det
			if xa >= 0 && xb >= 0 {
				best = math.Min(best, xa+xb)
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// Message renders a verdict, the planner's kinds included.
func Message(v disruption.Verdict) string {
	switch v.Kind {
	case KindPaybackGate, KindCoolDown, KindRecentlyEvicted, KindSameInstanceType, KindReceiver, KindAfterDeletes, KindSpreadMisfit:
		if v.Detail != "" {
			return v.Detail
		}
	case KindNoCheaperPlacement:
		if v.Detail != "" {
			return v.Detail
		}
		return "No delete, replacement, split or group move is cheaper than this node"
	}
	return v.Message()
}
