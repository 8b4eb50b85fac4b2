package repack

import (
	"context"
	"fmt"
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
	"github.com/karpenter-go/karpenter/pkg/snapshot"
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
	// (nodes the keep rule does not keep, held by the cool-down, the
	// payback gate or the budget, or with no cheaper fleet now unless
	// this pass's evicted pods spread onto them), sorted. The caller taints them with
	// DrainTaint so that the kube-scheduler places new and evicted pods
	// elsewhere, and the plan never counts on their room.
	Drain []string
}

// move is one planned command.
type move struct {
	cands        []*machine
	replacements []*scheduling.NewNodeClaim
	payback      disruption.Payback
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
	// shelves are, by pool, its launchable types' allocatable and price.
	shelves map[string][]shelf
}

// Compute plans one pass over the candidates (those the disruption
// package found eligible for consolidation) within budgets (Remaining is
// decremented). It is pure and deterministic.
func Compute(snap *disruption.Snapshot, cands []*disruption.Candidate, budgets map[string]*disruption.BudgetStatus, hist History, opts Options) (*Plan, error) {
	opts = opts.withDefaults()
	p := &planner{snap: snap, opts: opts, now: snap.Now, types: newTypeIndex(snap), reqs: map[*corev1.Pod]vec{}, perUnit: map[string][2]float64{}, cover: map[string][][2]float64{}, shelves: map[string][]shelf{}}
	// The pools the plan may launch into are the ones provisioning would
	// launch into: the same builder, over the pass's snapshot.
	pools, err := snapshot.Build(context.Background(), snap.View(), snapshot.Request{NoPending: true})
	if err != nil {
		return nil, err
	}
	p.pools = pools.Input.NodePools
	p.daemons = daemonSets(snap)
	for _, sp := range p.pools {
		p.perUnit[sp.Name] = cheapestPerUnit(sp)
		p.cover[sp.Name] = coverFront(sp)
		p.shelves[sp.Name] = shelvesOf(sp)
	}
	isCand := map[*disruption.Node]*disruption.Candidate{}
	for _, c := range cands {
		isCand[c.Node] = c
	}
	window := disruption.ConsolidateAfterWindow(snap)
	byPool := map[string][]*machine{}
	plan := &Plan{Paybacks: map[string]*disruption.Payback{}}
	verdicts := map[string]disruption.Verdict{}
	launched := hist.launchedAt()
	replaced := hist.replacements(snap)
	for _, n := range snap.Nodes {
		if n.Node == nil {
			continue
		}
		m := &machine{node: n, name: n.Name(), pool: n.NodePool, allocatable: toVec(n.Node.Status.Allocatable), candidate: isCand[n]}
		for _, pod := range n.Pods {
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			r := podVec(pod)
			p.reqs[pod] = r
			m.used = m.used.add(r)
			m.pods = append(m.pods, pod)
		}
		m.usedBefore = m.used
		m.destination = (n.Initialized || n.NodeClaim == nil) && !n.Deleting && !n.MarkedForDeletion && !n.InQueue && !window[m.name]
		if m.candidate != nil {
			price, _, perr := p.types.nodePrice(n)
			if perr != nil {
				// ShouldDisrupt refuses such nodes already.
				m.candidate = nil
			} else {
				m.price = price
				m.instanceType = n.Node.Labels[corev1.LabelInstanceTypeStable]
				m.capacityType = n.Node.Labels[v1.CapacityTypeLabelKey]
				if v, blocked := p.churnBlock(m, launched, hist, replaced); blocked {
					verdicts[m.name] = v
					m.candidate, m.blocked = nil, true
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
	var all []*machine
	for _, name := range names {
		nodes := byPool[name]
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
		all = append(all, nodes...)
	}
	p.reserve(all, verdicts)
	var emptied []string
	for _, m := range all {
		if m.destination && p.emptied(m, launched) {
			m.destination = false
			emptied = append(emptied, m.name)
		}
	}
	workers := make([]*worker, 0, len(names))
	for _, name := range names {
		nodes := byPool[name]
		w := &worker{p: p, pool: name, machines: nodes, compat: newCompatCache(nodes), others: map[*disruption.Node]*scheduling.ExistingNode{}, verdicts: map[string]disruption.Verdict{}, paybacks: map[string]*disruption.Payback{}}
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
				cmd.Candidates = append(cmd.Candidates, m.candidate)
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

func verdict(c *disruption.Candidate, k disruption.Kind, d *disruption.ConsolidationDetail) disruption.Verdict {
	return disruption.Verdict{
		Kind: k, Node: c.Name(), NodeClaim: c.NodeClaimName(), NodePool: c.NodePool.Name,
		Method: v1.DisruptionReasonUnderutilized, Unconsolidatable: true, Consolidation: d,
	}
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
