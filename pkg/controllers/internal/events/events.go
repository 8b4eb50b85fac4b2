// Package events owns how the NodeClaim controllers report condition
// changes as events: the recorder they publish through, the transition
// events `kubectl describe nodeclaim` shows, and the length provider
// messages are cut to.
package events

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Recorder is the slice of client-go's record.EventRecorder the controllers
// use; tests pass record.NewFakeRecorder.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// PublishTransitions records an event on the NodeClaim for every condition
// whose status differs between before and after, in the form upstream's
// `kubectl describe nodeclaim` shows.
func PublishTransitions(rec Recorder, before, after *v1.NodeClaim) {
	if rec == nil {
		return
	}
	for _, c := range after.Status.Conditions {
		old := before.Condition(c.Type)
		if old == nil || old.Status == c.Status {
			continue
		}
		eventType := corev1.EventTypeNormal
		if c.Status == metav1.ConditionFalse {
			eventType = corev1.EventTypeWarning
		}
		msg := fmt.Sprintf("Status condition transitioned, Type: %s, Status: %s -> %s, Reason: %s", c.Type, old.Status, c.Status, c.Reason)
		if c.Message != "" {
			msg += ", Message: " + c.Message
		}
		rec.Eventf(after, eventType, c.Type, "%s", msg)
	}
}

// Truncate shortens long provider messages for conditions and events.
func Truncate(msg string) string {
	if len(msg) <= 300 {
		return msg
	}
	return msg[:300] + "..."
}
