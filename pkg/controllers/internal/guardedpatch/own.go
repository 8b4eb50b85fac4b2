package guardedpatch

import (
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownTTL is how long a version this process wrote over is remembered: far
// longer than an informer takes to deliver the write.
const ownTTL = time.Minute

// own is the process's record of its guarded writes. The informer caches
// it reads from are the process's too, so a version one controller wrote
// over is as stale for every other one.
var own = &ledger{at: map[string]replacement{}}

// replacement is one of our writes over a version: when, and the paths it
// tested (the lists it replaced, or the resourceVersion).
type replacement struct {
	at    time.Time
	paths []string
}

// ledger remembers, per object uid and resourceVersion, the writes this
// process made over that version.
type ledger struct {
	mu     sync.Mutex
	at     map[string]replacement
	pruned time.Time
}

// wrote records a successful write over stored's version that tested
// paths. Any write moves the resourceVersion, so a later write locked on
// that version is refused too.
func (l *ledger) wrote(stored client.Object, paths []string) {
	key, ok := versionKey(stored)
	if !ok {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.at[key]
	r.at = now
	for _, p := range append(paths, resourceVersionPath) {
		if !slices.Contains(r.paths, p) {
			r.paths = append(r.paths, p)
		}
	}
	l.at[key] = r
	if now.Sub(l.pruned) > ownTTL {
		l.pruned = now
		for k, r := range l.at {
			if now.Sub(r.at) > ownTTL {
				delete(l.at, k)
			}
		}
	}
}

// replaced says whether a write of ours replaced, over stored's version,
// something a patch testing paths tests: the server would refuse it.
// Our write changed each list it replaced, so a test of the value read at
// that version fails (unless a later write restored that very value); the
// resourceVersion always moved.
func (l *ledger) replaced(stored client.Object, paths []string) bool {
	key, ok := versionKey(stored)
	if !ok || len(paths) == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.at[key]
	if !ok || time.Since(r.at) > ownTTL {
		return false
	}
	for _, p := range paths {
		if p != resourceVersionPath && slices.Contains(r.paths, p) {
			return true
		}
	}
	// Locked on the version: only the resourceVersion test matches it.
	return slices.Contains(paths, resourceVersionPath)
}

func versionKey(o client.Object) (string, bool) {
	if o.GetUID() == "" || o.GetResourceVersion() == "" {
		return "", false
	}
	return string(o.GetUID()) + "/" + o.GetResourceVersion(), true
}
