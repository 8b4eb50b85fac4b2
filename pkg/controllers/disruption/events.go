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

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// Event reasons (upstream's strings).
const (
	ReasonDisruptionBlocked             = "DisruptionBlocked"
	ReasonDisruptionLaunching           = "DisruptionLaunching"
	ReasonDisruptionWaitingReadiness    = "DisruptionWaitingReadiness"
	ReasonDisruptionTerminating         = "DisruptionTerminating"
	ReasonInvalidDoNotDisruptAnnotation = "InvalidDoNotDisruptAnnotation"
	// The do-not-disrupt grace period of a pod whose annotation is a
	// duration: still running, or over.
	ReasonDoNotDisruptUntil              = "DoNotDisruptUntil"
	ReasonDoNotDisruptGracePeriodElapsed = "DoNotDisruptGracePeriodElapsed"
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

// publishGracePeriods tells the pods of candidate-eligible nodes whose
// karpenter.sh/do-not-disrupt annotation is a duration whether it still
// protects them (DoNotDisruptUntil, with when it ends) or no longer does
// (DoNotDisruptGracePeriodElapsed), as upstream does when it weighs them.
func (c *Controller) publishGracePeriods(snap *disruption.Snapshot) {
	for _, n := range snap.Nodes {
		if n.NodeClaim == nil || n.Node == nil || !n.Initialized || n.Deleting {
			continue
		}
		for _, p := range n.Pods {
			v, ok := p.Annotations[v1.DoNotDisruptAnnotationKey]
			if !ok || v == "true" || !p.DeletionTimestamp.IsZero() {
				continue
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				continue
			}
			if end := p.CreationTimestamp.Add(d); snap.Now.Before(end) {
				c.events.normal(p, ReasonDoNotDisruptUntil, fmt.Sprintf("The %s grace period will elapse at %s", v1.DoNotDisruptAnnotationKey, end.UTC().Format(time.RFC3339)))
			} else {
				c.events.normal(p, ReasonDoNotDisruptGracePeriodElapsed, fmt.Sprintf("The %s grace period has elapsed, pod is now disruptable", v1.DoNotDisruptAnnotationKey))
			}
		}
	}
}
