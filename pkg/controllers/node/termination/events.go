package termination

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// sentEvents remembers, per object and reason, the last message published,
// so that status-like events (TerminationGracePeriodExpiring, FailedDraining,
// AwaitingVolumeDetachment) go out once per change of their content rather
// than on every drain pass, as upstream's deduplicating recorder does. The
// memory is per process: after a restart each is sent once more.
type sentEvents struct {
	mu   sync.Mutex
	last map[sentKey]string
}

type sentKey struct {
	uid    types.UID
	reason string
}

// changed records msg for (obj, reason) and reports whether it differs from
// the last one recorded.
func (s *sentEvents) changed(obj runtime.Object, reason, msg string) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true
	}
	key := sentKey{uid: m.GetUID(), reason: reason}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[sentKey]string{}
	}
	if old, ok := s.last[key]; ok && old == msg {
		return false
	}
	s.last[key] = msg
	return true
}

// forget drops everything remembered for the object (it is gone).
func (s *sentEvents) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.last {
		if k.uid == uid {
			delete(s.last, k)
		}
	}
}

// eventOnChange publishes the event unless the same object got the same
// reason and message last time.
func (c *Controller) eventOnChange(obj runtime.Object, eventType, reason, format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if !c.sent.changed(obj, reason, msg) {
		return
	}
	c.event(obj, eventType, reason, "%s", msg)
}
