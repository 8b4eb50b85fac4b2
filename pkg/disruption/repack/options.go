package repack

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Defaults of Options.
const (
	// DefaultHorizon is how long a move's saving is counted for.
	DefaultHorizon = time.Hour
	// DefaultRestartCost is the price, in dollars, of restarting one pod of
	// eviction cost 1 (a default pod, see disruption.EvictionCost). 0.9 ¢
	// is about twenty minutes of a 2 vCPU on-demand node: a pod's start
	// (image pull, warm-up, readiness) plus the risk of a disruption. With
	// the 1 h horizon a move then has to save 0.9 ¢/h per evicted pod. In
	// the churn replay (seed 7) half a cent doubled the evictions (1,151/h
	// against 562/h) for 1% of $/h: it took moves the next scale-up undid.
	// Over its eight seeds (BenchmarkChurnRestartCost, with scale-downs
	// steered by DrainDeletionCost) 0.9 ¢ makes 52% of upstream's
	// evictions at 1.5% above the cheapest $/h, a cent 48% at 2.6%: no
	// value meets both churn targets (at most half the evictions, at most
	// 2% above), and 0.9 ¢ misses the first by the least.
	DefaultRestartCost = 0.009
	// DefaultCoolDown is how long a node a move launched is left alone, and
	// how long a pod a move evicted is not evicted again: the scale-down
	// stabilization window of the HorizontalPodAutoscaler. A longer one
	// holds every node that received an evicted pod, so the next scale-in
	// cannot repack it: at 30 min the churn replay (seed 7) evicted 322/h
	// at $25.51/h, against 562/h at $23.39/h.
	DefaultCoolDown = 5 * time.Minute
	// DefaultGroupSize is how many underused nodes an N→M move considers
	// together.
	DefaultGroupSize = 100
	// DefaultKeepEfficiency is the efficiency (the cheapest conceivable
	// price of a node's pods over its price) at which a node is kept as it
	// is and receives the first deletes' pods; below it a node is repacked
	// (see worker.repack) and, when a pass leaves it, drained. The
	// efficiency is the fractional cover of the pods by the pool's types.
	// The benchmarks answer chaotically to it. A sweep with the drain
	// deletion cost (one-shot ratio at 100 / 1,000 / 5,000 nodes; churn
	// evictions as a share of upstream's and $/h above the best algorithm's,
	// mean of eight seeds; evictions of the four scale-in fleets):
	//
	//	0.82: 1.089 / 1.059 / 1.086; 52.0%, 1.52%; 197
	//	0.84: -; 52.3%, 1.75%; -
	//	0.85: -; 49.4%, 1.39%; -
	//	0.86: 1.089 / 1.059 / 1.084; 49.6%, 1.61%; 364
	//	0.88: 1.089 / 1.062 / 1.097; 48.0%, 1.22%; 508
	//	0.90: 1.078 / 1.062 / 1.096; 47.2%, 1.11%; 508
	//	0.92: -; 46.7%, 1.23%; -
	//	0.95: -; 45.8%, 1.72%; -
	//
	// 0.88 meets the churn targets (at most half of upstream's evictions,
	// at most 2% above the best $/h) with every one-shot ratio under 1.10.
	// More nodes rate inefficient, so more are repacked, and drained when a
	// pass leaves them (the drain deletion cost alone on more nodes did not
	// help). It costs evictions after a one-shot scale-in: a fleet of
	// three-quarters full nodes is repacked in one N→M move (365 evictions
	// for $8.06/h, where deletes alone saved $7.79/h for 40).
	DefaultKeepEfficiency = 0.88
	// DefaultSplitSaving is the share of a node's price a split (one node
	// into several smaller ones) must save.
	DefaultSplitSaving = 0.2
)

// Options configure the planner. The zero value is the default planner.
type Options struct {
	// Horizon over which a move's saving is counted (DefaultHorizon),
	// bounded by the candidates' remaining lifetime under expireAfter.
	Horizon time.Duration
	// RestartCost is $ per unit of disruption cost (DefaultRestartCost).
	RestartCost float64
	// CoolDown (DefaultCoolDown) protects the nodes recent moves launched
	// and the pods recent moves evicted.
	CoolDown time.Duration
	// TakeAnySaving drops the payback gate (any saving is taken) and the
	// cool-down: the "take any saving" baseline of the benchmarks.
	TakeAnySaving bool
	// SpotToSpot is the SpotToSpotConsolidation feature gate: without it a
	// spot node is deleted but never replaced by spot capacity.
	SpotToSpot bool
	// GroupSize of N→M moves (DefaultGroupSize); 1 disables them.
	GroupSize int
	// KeepEfficiency (DefaultKeepEfficiency): nodes at least this
	// efficient are kept and receive pods; the others are repacked.
	KeepEfficiency float64
	// NoSplit disables splitting one node into smaller ones.
	NoSplit bool
	// SplitSaving (DefaultSplitSaving) is the share of the node's price a
	// split must save; a smaller saving is left to single replacements.
	SplitSaving float64
	// Parallelism bounds the goroutines (0: GOMAXPROCS).
	Parallelism int
	// Solver options; Robust is always set.
	Solver scheduling.Options
	// WellKnownLabels and Unavailable are passed to the solver as
	// provisioning passes them.
	WellKnownLabels []string
	Unavailable     []scheduling.OfferingKey
}

func (o Options) withDefaults() Options {
	if o.Horizon <= 0 {
		o.Horizon = DefaultHorizon
	}
	if o.RestartCost <= 0 {
		o.RestartCost = DefaultRestartCost
	}
	if o.CoolDown <= 0 {
		o.CoolDown = DefaultCoolDown
	}
	if o.KeepEfficiency <= 0 {
		o.KeepEfficiency = DefaultKeepEfficiency
	}
	if o.SplitSaving <= 0 {
		o.SplitSaving = DefaultSplitSaving
	}
	if o.GroupSize <= 0 {
		o.GroupSize = DefaultGroupSize
	}
	o.Solver.Robust = true
	return o
}

// History is what recent passes did, which the no-churn rules read.
type History struct {
	// Moves are recent consolidation moves.
	Moves []PastMove
	// Evicted maps namespace/name of a pod a consolidation move evicted to
	// when it did.
	Evicted map[string]time.Time
	// Owners maps a controller (namespace/kind/name of the pod's
	// controlling owner) to when consolidation moves evicted its pods,
	// oldest first. A ReplicaSet replaces an evicted pod with a new one of
	// another name, so the name alone never recognises the pod again: a
	// pod of the owner created after one of these evictions is taken for
	// its replacement.
	Owners map[string][]time.Time
}

// OwnerKey is namespace/kind/name of the pod's controlling owner, "" when
// it has none.
func OwnerKey(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || *o.Controller {
			return p.Namespace + "/" + o.Kind + "/" + o.Name
		}
	}
	return ""
}

// ReplacementWindow is how long after an eviction its owner's new pods
// are taken for replacements: the replacement NodeClaims launch, the
// candidates drain, the owner creates the new pods. A pod created later
// is a scale-up.
const ReplacementWindow = 3 * time.Minute

// replacements finds, for each owner that lost pods to consolidation,
// the pods that replace them: its pods created at or after the first of
// those evictions (to the second, as creation times go), earliest first,
// one per eviction, each protected from the eviction it replaces. A pod
// the owner created for a scale-up in that window may be taken for a
// replacement instead, which protects as many pods, only not the same.
func (h History) replacements(snap *disruption.Snapshot) map[*corev1.Pod]time.Time {
	if len(h.Owners) == 0 {
		return nil
	}
	byOwner := map[string][]*corev1.Pod{}
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			k := OwnerKey(p)
			times := h.Owners[k]
			if len(times) == 0 {
				continue
			}
			if _, byName := h.Evicted[p.Namespace+"/"+p.Name]; byName {
				continue
			}
			if c := p.CreationTimestamp.Time; !c.Before(times[0].Truncate(time.Second)) && !c.After(times[len(times)-1].Add(ReplacementWindow)) {
				byOwner[k] = append(byOwner[k], p)
			}
		}
	}
	out := map[*corev1.Pod]time.Time{}
	for k, pods := range byOwner {
		sort.Slice(pods, func(i, j int) bool {
			ci, cj := pods[i].CreationTimestamp.Time, pods[j].CreationTimestamp.Time
			if !ci.Equal(cj) {
				return ci.Before(cj)
			}
			return pods[i].Name < pods[j].Name
		})
		times := h.Owners[k]
		for i, p := range pods[:min(len(pods), len(times))] {
			out[p] = times[i]
		}
	}
	return out
}

// PastMove is one consolidation move already carried out.
type PastMove struct {
	At       time.Time
	NodePool string
	// Removed are the names of the nodes the move took away.
	Removed []string
	// Launched are the names (Node or NodeClaim) of the nodes it launched.
	Launched []string
}

// launchedAt maps every node a move launched to when.
func (h History) launchedAt() map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range h.Moves {
		for _, name := range m.Launched {
			if t, ok := out[name]; !ok || m.At.After(t) {
				out[name] = m.At
			}
		}
	}
	return out
}

// Recorder keeps the history of the moves a caller carried out, dropping
// what is older than the cool-down. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	keep  time.Duration
	h     History
	drain []string
}

// SetDrain remembers the last plan's Drain.
func (r *Recorder) SetDrain(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain = append([]string(nil), names...)
}

// Drain is the last plan's Drain: the nodes to keep DrainTaint on.
func (r *Recorder) Drain() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.drain...)
}

// NewRecorder keeps history for keep (the planner's cool-down).
func NewRecorder(keep time.Duration) *Recorder {
	if keep <= 0 {
		keep = DefaultCoolDown
	}
	return &Recorder{keep: keep, h: History{Evicted: map[string]time.Time{}, Owners: map[string][]time.Time{}}}
}

// Record notes commands started at now: their candidates as removed, their
// reschedulable pods as evicted, and launched (one list per command, may
// be nil when the names are not known yet) as the nodes they brought.
func (r *Recorder) Record(now time.Time, cmds []*disruption.Command, launched [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, cmd := range cmds {
		m := PastMove{At: now}
		for _, c := range cmd.Candidates {
			m.NodePool = c.NodePool.Name
			m.Removed = append(m.Removed, c.Name())
			for _, p := range c.Reschedulable {
				r.h.Evicted[p.Namespace+"/"+p.Name] = now
				if k := OwnerKey(p); k != "" {
					r.h.Owners[k] = append(r.h.Owners[k], now)
				}
			}
		}
		if i < len(launched) {
			m.Launched = append(m.Launched, launched[i]...)
		}
		r.h.Moves = append(r.h.Moves, m)
	}
	r.pruneLocked(now)
}

// History returns a copy of what is remembered at now.
func (r *Recorder) History(now time.Time) History {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(now)
	out := History{Moves: append([]PastMove(nil), r.h.Moves...), Evicted: make(map[string]time.Time, len(r.h.Evicted)),
		Owners: make(map[string][]time.Time, len(r.h.Owners))}
	for k, v := range r.h.Evicted {
		out.Evicted[k] = v
	}
	for k, v := range r.h.Owners {
		out.Owners[k] = append([]time.Time(nil), v...)
	}
	return out
}

func (r *Recorder) pruneLocked(now time.Time) {
	cut := now.Add(-r.keep)
	kept := r.h.Moves[:0]
	for _, m := range r.h.Moves {
		if m.At.After(cut) {
			kept = append(kept, m)
		}
	}
	r.h.Moves = kept
	for k, t := range r.h.Evicted {
		if !t.After(cut) {
			delete(r.h.Evicted, k)
		}
	}
	for k, ts := range r.h.Owners {
		// Appended in time order, so the recent ones are a suffix.
		i := sort.Search(len(ts), func(i int) bool { return ts[i].After(cut) })
		if i == len(ts) {
			delete(r.h.Owners, k)
		} else {
			r.h.Owners[k] = ts[i:]
		}
	}
	sort.SliceStable(r.h.Moves, func(i, j int) bool { return r.h.Moves[i].At.Before(r.h.Moves[j].At) })
}
