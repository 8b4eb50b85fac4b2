package repack

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
)

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

// churnBlock applies the history rules to a candidate.
func (p *planner) churnBlock(m *machine, launched map[string]time.Time, hist History, replaced map[*corev1.Pod]time.Time) (disruption.Verdict, bool) {
	if p.opts.TakeAnySaving {
		return disruption.Verdict{}, false
	}
	cd := p.opts.CoolDown
	for _, name := range []string{m.name, m.node.NodeClaimName()} {
		if at, ok := launched[name]; ok && p.now.Before(at.Add(cd)) {
			v := verdict(m.candidate, KindCoolDown, nil)
			until := at.Add(cd)
			v.Until = &until
			v.Detail = fmt.Sprintf("Node was launched by a consolidation move at %s; left alone until %s", at.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
			return v, true
		}
	}
	for _, pod := range m.candidate.Reschedulable {
		key := pod.Namespace + "/" + pod.Name
		at, byName := hist.Evicted[key]
		ok := byName
		if !ok {
			at, ok = replaced[pod]
		}
		if ok && p.now.Before(at.Add(cd)) {
			v := verdict(m.candidate, KindRecentlyEvicted, nil)
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
