// Package guardedpatch owns how the controllers write objects that other
// writers write too: Nodes (the kubelet's status heartbeats, the node
// lifecycle controller's taints, ours) and NodeClaims (the lifecycle, pod
// events, the disruption conditions, termination, on the status). Each
// write moves the object's resourceVersion, so a patch locked on the
// resourceVersion loses to writes it has no quarrel with (a heartbeat, a
// lastPodEventTime). A guarded patch is a JSON patch (RFC 6902) that sets
// the map keys it changes one by one and replaces each list it changes
// (taints, finalizers, owner references, conditions) under a test of the
// value it read: it is refused only when one of those lists changed since,
// which is when writing it would undo another writer's entry.
//
// A patch the server is certain to refuse is not sent: the process's
// writes are remembered as a chain of versions (each guarded write with
// the lists it replaced; Record adds the writes made otherwise), so a
// later write from a version on that chain (a cache that has not delivered
// our own writes yet) which tests a list a write further down the chain
// replaced gets its Conflict at once, without a request.
package guardedpatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Patch writes obj's changes from stored (the version it was read at) to
// everything but the status. A list that changed on the server since
// stored was read refuses the write with a Conflict, as a resourceVersion
// lock would, so callers retry from a fresh read; any other write in
// between lands beside this one. obj is updated from the response.
func Patch(ctx context.Context, kube client.Client, stored, obj client.Object) error {
	return send(stored, obj, func(key string) bool { return key != "status" }, func(raw []byte) error {
		return kube.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, raw))
	})
}

// PatchStatus is Patch for the status subresource.
func PatchStatus(ctx context.Context, kube client.Client, stored, obj client.Object) error {
	return send(stored, obj, func(key string) bool { return key == "status" }, func(raw []byte) error {
		return kube.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, raw))
	})
}

// send writes the patch from stored to obj under the keys write accepts,
// unless one of this process's own writes already replaced what it tests.
func send(stored, obj client.Object, write func(key string) bool, patch func([]byte) error) error {
	ops, err := diff(stored, obj, write)
	if err != nil || len(ops) == 0 {
		return err
	}
	tested := testedPaths(ops)
	if own.replaced(stored, tested) {
		return conflict(obj, errors.New("a list the patch replaces changed since it was read, by this process's own write"))
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encoding the patch of %s: %w", obj.GetName(), err)
	}
	if err := refused(patch(raw), obj); err != nil {
		return err
	}
	own.wrote(stored, obj, tested)
	return nil
}

// refused turns a patch that did not apply into the Conflict callers retry
// on; other errors keep their kind, with the object named.
func refused(err error, obj client.Object) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if apierrors.IsInvalid(err) && errors.As(err, &status) {
		// A test that failed (or a key to remove that another writer
		// removed first) is a 422 without causes; the object's own
		// validation errors name their fields.
		if d := status.Status().Details; d == nil || len(d.Causes) == 0 {
			return conflict(obj, errors.New("a list the patch replaces changed since it was read"))
		}
	}
	return fmt.Errorf("patching %s: %w", obj.GetName(), err)
}

// conflict is the Conflict a refused patch of obj is reported as.
func conflict(obj client.Object, err error) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = reflect.TypeOf(obj).Elem().Name()
	}
	return apierrors.NewConflict(schema.GroupResource{Resource: strings.ToLower(kind) + "s"}, obj.GetName(), err)
}

// testedPaths are the paths the patch's tests guard: the lists it
// replaces, and the resourceVersion when it is locked on it.
func testedPaths(ops []op) []string {
	var out []string
	for _, o := range ops {
		if o.Op == "test" {
			out = append(out, o.Path)
		}
	}
	return out
}

// op is one JSON patch operation; a test's null value asserts absence.
type op struct {
	Op    string
	Path  string
	Value any
}

func (o op) MarshalJSON() ([]byte, error) {
	m := map[string]any{"op": o.Op, "path": o.Path}
	if o.Op != "remove" {
		m["value"] = o.Value
	}
	return json.Marshal(m)
}

// diff is the JSON patch from stored to obj under the top-level keys
// (metadata, spec, status) write accepts, or nil when there is nothing
// to write.
func diff(stored, obj client.Object, write func(key string) bool) ([]op, error) {
	from, err := toMap(stored)
	if err != nil {
		return nil, err
	}
	to, err := toMap(obj)
	if err != nil {
		return nil, err
	}
	for _, m := range []map[string]any{from, to} {
		for k := range m {
			if !write(k) {
				delete(m, k)
			}
		}
		// The server's own fields; the resourceVersion is what the
		// guards replace.
		if meta, ok := m["metadata"].(map[string]any); ok {
			for _, k := range []string{"resourceVersion", "managedFields", "generation", "creationTimestamp", "uid"} {
				delete(meta, k)
			}
		}
	}
	var ops []op
	locked := mapOps(&ops, "", from, to)
	if len(ops) == 0 {
		return nil, nil
	}
	if locked {
		ops = append([]op{{Op: "test", Path: resourceVersionPath, Value: stored.GetResourceVersion()}}, ops...)
	}
	return ops, nil
}

// resourceVersionPath is what a patch that cannot guard its lists alone is
// locked on.
const resourceVersionPath = "/metadata/resourceVersion"

func toMap(obj client.Object) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", obj.GetName(), err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", obj.GetName(), err)
	}
	return out, nil
}

// mapOps sets and removes a map's keys one by one, so another writer's
// keys stay; it recurses into maps both sides have. A list that changed
// is replaced under a test of its stored value (null: absent). A map
// stored lacks (or had empty) is added whole: JSON patch cannot test that
// a map is absent (the server may hold it empty, or not at all), so such
// a write falls back to the resourceVersion lock, reported by the result.
func mapOps(ops *[]op, path string, from, to map[string]any) (locked bool) {
	keys := make([]string, 0, len(to)+len(from))
	for k := range to {
		keys = append(keys, k)
	}
	for k := range from {
		if _, ok := to[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := path + "/" + escape(k)
		was, had := from[k]
		now, has := to[k]
		if had && has && reflect.DeepEqual(was, now) {
			continue
		}
		wasMap, wasIsMap := was.(map[string]any)
		nowMap, nowIsMap := now.(map[string]any)
		switch {
		case wasIsMap && nowIsMap && len(wasMap) > 0:
			locked = mapOps(ops, p, wasMap, nowMap) || locked
			continue
		case nowIsMap:
			locked = true
		}
		_, wasList := was.([]any)
		_, nowList := now.([]any)
		if wasList || (!had && nowList) {
			*ops = append(*ops, op{Op: "test", Path: p, Value: was})
		}
		if has {
			*ops = append(*ops, op{Op: "add", Path: p, Value: now})
		} else {
			*ops = append(*ops, op{Op: "remove", Path: p})
		}
	}
	return locked
}

// escape is a JSON pointer's escaping of a map key (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
