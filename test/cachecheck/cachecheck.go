// Package cachecheck finds writes into an informer cache's objects. The
// cluster state and the snapshots hand out the controller-runtime cache's
// own objects (no copies), so a reader that sets a label, appends into a
// shared slice or sorts one in place corrupts the cache for every
// controller; tests use a Detector to prove no reader does.
package cachecheck

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Informers gets the informer of a kind; controller-runtime's cache
// implements it.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Detector remembers the objects an informer cache holds, each with a
// deep copy, and later compares those it still holds at the same pointer
// with their copies. The cache never modifies an object it holds: a watch
// update replaces it with a new one, so a difference at the same pointer is
// a write by a reader.
type Detector struct {
	informers Informers
	kinds     []client.Object

	mu   sync.Mutex
	held map[runtime.Object]runtime.Object
}

// New watches the informers of kinds (one empty object each, e.g.
// &corev1.Pod{}).
func New(informers Informers, kinds ...client.Object) *Detector {
	return &Detector{informers: informers, kinds: kinds, held: map[runtime.Object]runtime.Object{}}
}

// Record remembers every object the informers hold now and a deep copy of
// it, forgetting what an earlier Record remembered.
func (d *Detector) Record(ctx context.Context) error {
	held := map[runtime.Object]runtime.Object{}
	for _, kind := range d.kinds {
		items, err := d.items(ctx, kind)
		if err != nil {
			return err
		}
		for _, o := range items {
			held[o] = o.DeepCopyObject()
		}
	}
	d.mu.Lock()
	d.held = held
	d.mu.Unlock()
	return nil
}

// Check compares every object recorded by the last Record that the
// informers still hold at the same pointer with its copy, and returns one
// line per modified object (kind, key and the difference), sorted.
func (d *Detector) Check(ctx context.Context) ([]string, error) {
	d.mu.Lock()
	held := d.held
	d.mu.Unlock()
	var found []string
	for _, kind := range d.kinds {
		items, err := d.items(ctx, kind)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			recorded, ok := held[o]
			if !ok || equality.Semantic.DeepEqual(recorded, o) {
				continue
			}
			key := "?"
			if m, ok := o.(client.Object); ok {
				key = client.ObjectKeyFromObject(m).String()
			}
			found = append(found, fmt.Sprintf("%T %s modified in the cache:\n%s", o, key, diff.Diff(recorded, o)))
		}
	}
	sort.Strings(found)
	return found, nil
}

// items are the informer store's own objects of kind.
func (d *Detector) items(ctx context.Context, kind client.Object) ([]runtime.Object, error) {
	inf, err := d.informers.GetInformer(ctx, kind)
	if err != nil {
		return nil, fmt.Errorf("getting the %T informer: %w", kind, err)
	}
	withStore, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return nil, fmt.Errorf("the %T informer (%T) has no store to read", kind, inf)
	}
	var out []runtime.Object
	for _, item := range withStore.GetStore().List() {
		if o, ok := item.(runtime.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}
