// Package testutil has small helpers for controller tests: an event
// recorder that keeps what it is given, a logger that keeps every line
// with its key/values, and the deletion of NodeClaims no lifecycle
// controller finalizes.
package testutil

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Event is one recorded event.
type Event struct {
	Object, Type, Reason, Message string
}

// Recorder collects events; safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

// Eventf implements the controllers' recorder interface.
func (r *Recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...interface{}) {
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, Event{Object: name, Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// Events returns the events recorded so far with the given reason (all when
// reason is empty).
func (r *Recorder) Events(reason string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if reason == "" || e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// Messages returns the messages of the events recorded so far with the
// given reason on the object called name.
func (r *Recorder) Messages(reason, name string) []string {
	var out []string
	for _, e := range r.Events(reason) {
		if e.Object == name {
			out = append(out, e.Message)
		}
	}
	return out
}

// Logs collects log lines.
type Logs struct {
	mu    sync.Mutex
	lines []string
}

// Context returns ctx carrying a logger that writes into l.
func (l *Logs) Context(ctx context.Context) context.Context {
	logger := funcr.NewJSON(func(obj string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, obj)
	}, funcr.Options{Verbosity: 1})
	return log.IntoContext(ctx, logr.Logger(logger))
}

// Matching returns the JSON lines whose message is msg.
func (l *Logs) Matching(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, fmt.Sprintf("%q:%q", "msg", msg)) {
			out = append(out, line)
		}
	}
	return out
}

var nameSeq atomic.Int64

// UniqueName keeps tests that share one API server apart.
func UniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1)) }

// DeleteNodeClaims deletes the NodeClaims opts select and takes their
// finalizers off: NodeClaims are created with the termination finalizer,
// and a test that runs no lifecycle controller has no one to remove it.
func DeleteNodeClaims(ctx context.Context, c client.Client, opts ...client.ListOption) error {
	list := &v1.NodeClaimList{}
	if err := c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	clear := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	for i := range list.Items {
		nc := &list.Items[i]
		if len(nc.Finalizers) > 0 {
			if err := c.Patch(ctx, nc, clear); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("clearing the finalizers of nodeclaim %s: %w", nc.Name, err)
			}
		}
		if err := c.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
		}
	}
	return nil
}

// SpotNodeClaim is a NodeClaim named name for the kwok provider's default
// node class, asking for spot capacity: the least a NodeClaim needs to pass
// validation, for tests that create one directly.
func SpotNodeClaim(name string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}},
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		},
	}
}

// ResourceList is the resource list of name, quantity pairs:
// ResourceList("cpu", "1", "memory", "1Gi").
func ResourceList(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}
