package disruption

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
)

// Event reasons (upstream's strings).
const (
	ReasonDisruptionBlocked             = "DisruptionBlocked"
	ReasonDisruptionLaunching           = "DisruptionLaunching"
	ReasonDisruptionWaitingReadiness    = "DisruptionWaitingReadiness"
	ReasonDisruptionTerminating         = "DisruptionTerminating"
	ReasonInvalidDoNotDisruptAnnotation = "InvalidDoNotDisruptAnnotation"
)

// Recorder publishes events.
type Recorder interface {
	Eventf(obj runtime.Object, eventType, reason, format string, args ...any)
}

// dedupeWindow is how long an identical event (same object, reason and
// message) is not repeated; upstream's recorder uses 2 minutes, so a
// blocker seen on every 10 s pass does not flood the API server.
const dedupeWindow = 2 * time.Minute

// events publishes deduplicated events.
type events struct {
	recorder Recorder
	clock    clock.PassiveClock
	mu       sync.Mutex
	sent     map[string]time.Time
}

func newEvents(r Recorder, clk clock.PassiveClock) *events {
	return &events{recorder: r, clock: clk, sent: map[string]time.Time{}}
}

func (e *events) publish(obj runtime.Object, eventType, reason, message string) {
	e.publishFor(obj, eventType, reason, message, dedupeWindow)
}

// publishFor is publish with its own dedupe window.
func (e *events) publishFor(obj runtime.Object, eventType, reason, message string, window time.Duration) {
	if e.recorder == nil || obj == nil {
		return
	}
	uid := ""
	if m, err := meta.Accessor(obj); err == nil {
		if m.GetName() == "" {
			return
		}
		uid = string(m.GetUID()) + "/" + m.GetNamespace() + "/" + m.GetName()
	}
	key := strings.Join([]string{fmt.Sprintf("%T", obj), uid, reason, message}, "|")
	now := e.clock.Now()
	e.mu.Lock()
	if at, ok := e.sent[key]; ok && now.Sub(at) < window {
		e.mu.Unlock()
		return
	}
	e.sent[key] = now
	if len(e.sent) > 10000 {
		for k, at := range e.sent {
			if now.Sub(at) >= dedupeWindow {
				delete(e.sent, k)
			}
		}
	}
	e.mu.Unlock()
	e.recorder.Eventf(obj, eventType, reason, "%s", message)
}

func (e *events) normal(obj runtime.Object, reason, message string) {
	e.publish(obj, corev1.EventTypeNormal, reason, message)
}

func (e *events) warning(obj runtime.Object, reason, message string) {
	e.publish(obj, corev1.EventTypeWarning, reason, message)
}
