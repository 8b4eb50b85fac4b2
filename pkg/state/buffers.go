package state

import (
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Buffers holds the virtual pods of the CapacityBuffers (gate
// CapacityBuffer) and the nodes the last provisioning round placed them on.
// The CapacityBuffer controller sets each buffer's pods; every provisioning
// round plans for them as for pending pods; disruption holds the nodes they
// were placed on, so neither emptiness nor consolidation takes the room a
// buffer keeps. A nil *Buffers has no pods and holds nothing.
type Buffers struct {
	mu   sync.RWMutex
	pods map[types.NamespacedName][]*corev1.Pod
	held map[string]bool
}

// NewBuffers returns an empty set.
func NewBuffers() *Buffers {
	return &Buffers{pods: map[types.NamespacedName][]*corev1.Pod{}, held: map[string]bool{}}
}

// Set replaces a buffer's virtual pods.
func (b *Buffers) Set(buffer types.NamespacedName, pods []*corev1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(pods) == 0 {
		delete(b.pods, buffer)
		return
	}
	b.pods[buffer] = pods
}

// Remove forgets a buffer.
func (b *Buffers) Remove(buffer types.NamespacedName) { b.Set(buffer, nil) }

// Pods are every buffer's virtual pods, in a stable order. Callers must
// not modify them.
func (b *Buffers) Pods() []*corev1.Pod {
	if b == nil {
		return nil
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	keys := make([]types.NamespacedName, 0, len(b.pods))
	for k := range b.pods {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var out []*corev1.Pod
	for _, k := range keys {
		out = append(out, b.pods[k]...)
	}
	return out
}

// Hold replaces the nodes (Node or NodeClaim names) the virtual pods were
// placed on.
func (b *Buffers) Hold(names []string) {
	if b == nil {
		return
	}
	held := make(map[string]bool, len(names))
	for _, n := range names {
		held[n] = true
	}
	b.mu.Lock()
	b.held = held
	b.mu.Unlock()
}

// Add holds one more node (or NodeClaim) until the next Hold.
func (b *Buffers) Add(name string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	held := make(map[string]bool, len(b.held)+1)
	for k := range b.held {
		held[k] = true
	}
	held[name] = true
	b.held = held
}

// Held reports whether any of names (a node's and its NodeClaim's) hosts
// virtual pods.
func (b *Buffers) Held(names ...string) bool {
	if b == nil {
		return false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, n := range names {
		if n != "" && b.held[n] {
			return true
		}
	}
	return false
}
