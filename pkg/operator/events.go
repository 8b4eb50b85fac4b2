package operator

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// dedupeWindow is how long upstream's recorder drops an event identical to
// one it sent: every controller reports the same blocker, nomination or
// failure on each pass, and each repeat would be an API request (a PATCH
// of the Event's count, or a CREATE when its message changed).
const dedupeWindow = 2 * time.Minute

// eventRule is how upstream deduplicates one reason: by object, or by
// object and message (upstream's dedupe values carry what the message is
// made of), for how long, and whether the nomination rate limit applies.
type eventRule struct {
	byMessage bool
	window    time.Duration
	limited   bool
}

// eventRules are upstream's exceptions to the default (object, reason and
// message for two minutes), by reason.
var eventRules = map[string]eventRule{
	// One nomination per pod per window whichever node or NodeClaim it
	// names, and at most 5 per second (bursts of 10) across pods: a
	// thousand-pod scale-up nominates a few pods, not every one.
	"Nominated": {window: dedupeWindow, limited: true},
	// A pod that cannot schedule says so once per 5 minutes, even as the
	// reason changes between rounds.
	"FailedScheduling":          {window: 5 * time.Minute},
	"NoCompatibleInstanceTypes": {window: time.Minute},
	// A node's blocker is reported once per window even as it changes
	// (another pod, another PDB); consolidation's verdict once per 15
	// minutes.
	"DisruptionBlocked":          {window: dedupeWindow},
	"Unconsolidatable":           {window: 15 * time.Minute},
	"DisruptionWaitingReadiness": {window: dedupeWindow},
}

// ruleFor is the rule of an event; a NodePool's DisruptionBlocked (its
// budget, per disruption reason) is kept a minute, as a budget's schedule
// can change every minute.
func ruleFor(obj runtime.Object, reason string) eventRule {
	if _, ok := obj.(*v1.NodePool); ok && reason == "DisruptionBlocked" {
		return eventRule{byMessage: true, window: time.Minute}
	}
	if r, ok := eventRules[reason]; ok {
		return r
	}
	return eventRule{byMessage: true, window: dedupeWindow}
}

// dedupeRecorder is the controllers' recorder: it drops the events
// upstream's recorder drops before passing the rest to client-go's.
type dedupeRecorder struct {
	sink  record.EventRecorder
	clock clock.PassiveClock
	// window, when positive, replaces every rule's window.
	window time.Duration
	// nominations rate-limits Nominated events across pods.
	nominations flowcontrol.RateLimiter

	mu sync.Mutex
	// until is when each sent event's key may be sent again.
	until map[string]time.Time
	// pruned is when until last lost its expired keys.
	pruned time.Time
}

var _ record.EventRecorder = (*dedupeRecorder)(nil)

// newDedupeRecorder drops events by upstream's rules; a positive window
// replaces every rule's window (--event-dedupe-window).
func newDedupeRecorder(sink record.EventRecorder, clk clock.Clock, window time.Duration) *dedupeRecorder {
	return &dedupeRecorder{
		sink: sink, clock: clk, until: map[string]time.Time{}, window: window,
		nominations: flowcontrol.NewTokenBucketRateLimiterWithClock(5, 10, clk),
	}
}

// send says whether an event goes out, recording it if so. As upstream's,
// an event the rate limit drops still counts as sent for the dedupe: the
// pod is not nominated again on the next pass.
func (r *dedupeRecorder) send(obj runtime.Object, reason, message string) bool {
	rule := ruleFor(obj, reason)
	if r.window > 0 {
		rule.window = r.window
	}
	key := fmt.Sprintf("%T/", obj)
	if m, err := meta.Accessor(obj); err == nil {
		// Objects already deleted (a Finalized event) may carry no UID.
		key += string(m.GetUID()) + "/" + m.GetNamespace() + "/" + m.GetName()
	}
	key += "/" + reason
	if rule.byMessage {
		key += "/" + message
	}
	now := r.clock.Now()
	r.mu.Lock()
	if until, ok := r.until[key]; ok && now.Before(until) {
		r.mu.Unlock()
		return false
	}
	r.until[key] = now.Add(rule.window)
	if now.Sub(r.pruned) > 10*time.Second {
		// Forget expired keys now and then, so the map stays the size of
		// the last 15 minutes' distinct events.
		r.pruned = now
		for k, until := range r.until {
			if !now.Before(until) {
				delete(r.until, k)
			}
		}
	}
	r.mu.Unlock()
	return !rule.limited || r.nominations.TryAccept()
}

// Event implements record.EventRecorder.
func (r *dedupeRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	if r.send(obj, reason, message) {
		r.sink.Event(obj, eventType, reason, message)
	}
}

// Eventf implements record.EventRecorder.
func (r *dedupeRecorder) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf implements record.EventRecorder.
func (r *dedupeRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventType, reason, messageFmt string, args ...any) {
	message := fmt.Sprintf(messageFmt, args...)
	if r.send(obj, reason, message) {
		r.sink.AnnotatedEventf(obj, annotations, eventType, reason, "%s", message)
	}
}
