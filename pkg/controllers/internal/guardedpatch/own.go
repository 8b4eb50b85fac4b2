package guardedpatch

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownTTL is how long a version this process wrote over is remembered: far
// longer than an informer takes to deliver the write.
const ownTTL = time.Minute

// own is the process's record of its writes. The informer caches it reads
// from are the process's too, so a version one controller wrote over is as
// stale for every other one.
var own = &ledger{objects: map[string]map[string]step{}}

// step is one of our writes over a version: the version it made, when,
// and the paths it tested (the lists it replaced).
type step struct {
	to    string
	at    time.Time
	paths []string
}

// ledger remembers, per object uid, the chain of versions this process's
// writes made: from each version written over to the one the write made.
type ledger struct {
	mu      sync.Mutex
	objects map[string]map[string]step
	pruned  time.Time
}

// Record tells the ledger of a write made without a guarded patch (a merge
// patch of one field, say) from stored to written: a write from stored's
// version afterwards follows the chain through it to our later writes.
func Record(stored, written client.Object) {
	own.wrote(stored, written, nil)
}

// wrote records a successful write from stored's version to written's
// that tested paths.
func (l *ledger) wrote(stored, written client.Object, paths []string) {
	uid, from, to := string(stored.GetUID()), stored.GetResourceVersion(), written.GetResourceVersion()
	if uid == "" || from == "" || to == "" || from == to {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	steps := l.objects[uid]
	if steps == nil {
		steps = map[string]step{}
		l.objects[uid] = steps
	}
	link(steps, from, step{to: to, at: now, paths: slices.Clone(paths)})
	if now.Sub(l.pruned) > ownTTL {
		l.pruned = now
		for id, steps := range l.objects {
			for v, s := range steps {
				if now.Sub(s.at) > ownTTL {
					delete(steps, v)
				}
			}
			if len(steps) == 0 {
				delete(l.objects, id)
			}
		}
	}
}

// link puts s, a write from version from, into the chain. Two writes from
// the same version (one from a cache that had not delivered the other) both
// landed, the later on top of the earlier's version: the later is chained
// after the earlier, so a write from the earlier's version still meets the
// later one's lists. Which was later is told by their resourceVersions
// (comparable, KEP-5504); when they cannot be compared the newest record
// replaces the older, which forgets a step but never invents one.
func link(steps map[string]step, from string, s step) {
	seen := map[string]bool{}
	for !seen[from] {
		seen[from] = true
		cur, ok := steps[from]
		if !ok || cur.to == s.to {
			steps[from] = s
			return
		}
		order, err := resourceversion.CompareResourceVersion(s.to, cur.to)
		if err != nil {
			steps[from] = s
			return
		}
		if order < 0 {
			// s came first: it takes the place, and cur follows it.
			steps[from] = s
			from, s = s.to, cur
			continue
		}
		from = cur.to
	}
}

// replaced says whether our writes from stored's version on replaced
// something a patch testing paths tests: the server would refuse it.
// Each of our writes changed the lists it replaced, so a test of the value
// read at stored's version fails (unless a later write restored that very
// value); a patch locked on the version fails after any write.
func (l *ledger) replaced(stored client.Object, paths []string) bool {
	uid, v := string(stored.GetUID()), stored.GetResourceVersion()
	if uid == "" || v == "" || len(paths) == 0 {
		return false
	}
	locked := slices.Contains(paths, resourceVersionPath)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	steps := l.objects[uid]
	seen := map[string]bool{}
	for !seen[v] {
		seen[v] = true
		s, ok := steps[v]
		if !ok || now.Sub(s.at) > ownTTL {
			return false
		}
		if locked {
			return true
		}
		for _, p := range paths {
			if slices.Contains(s.paths, p) {
				return true
			}
		}
		v = s.to
	}
	return false
}

// Superseded says whether obj is a version one of this process's writes
// (in the last minute) replaced: a cache that has not delivered that write
// yet, whose copy says less than the process already knows.
func Superseded(obj client.Object) bool {
	uid, v := string(obj.GetUID()), obj.GetResourceVersion()
	if uid == "" || v == "" {
		return false
	}
	own.mu.Lock()
	defer own.mu.Unlock()
	s, ok := own.objects[uid][v]
	return ok && time.Since(s.at) <= ownTTL
}
