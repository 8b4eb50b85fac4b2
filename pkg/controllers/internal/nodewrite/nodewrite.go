// Package nodewrite owns how the controllers write a Node's metadata and
// spec. A Node has many writers (its kubelet's status heartbeats, the node
// lifecycle controller's taints, ours), and each of their writes moves the
// Node's resourceVersion: a patch locked on the resourceVersion loses to a
// heartbeat it has no quarrel with. Patch instead sends a JSON patch that
// sets the map keys it changes one by one and guards each list it replaces
// (taints, finalizers, owner references) with a test of the value it read:
// it is refused only when one of those lists changed since, which is when
// writing it would lose another writer's entry.
package nodewrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// op is one JSON patch (RFC 6902) operation.
type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON keeps a test's null value: testing a list against null
// asserts it is absent.
func (o op) MarshalJSON() ([]byte, error) {
	m := map[string]any{"op": o.Op, "path": o.Path}
	if o.Op != "remove" {
		m["value"] = o.Value
	}
	return json.Marshal(m)
}

// Patch writes node's changes from stored, the version it was read at:
// labels, annotations, finalizers, owner references, taints and
// unschedulable. A list that changed on the server since stored was read
// refuses the write with a Conflict, as a resourceVersion lock would, so
// callers retry from a fresh read; any other write in between lands
// beside this one. A change to another field is refused as a programming
// error. Node is updated from the server's response.
func Patch(ctx context.Context, kube client.Client, stored, node *corev1.Node) error {
	ops, err := diff(stored, node)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encoding the patch of node %s: %w", node.Name, err)
	}
	err = kube.Patch(ctx, node, client.RawPatch(types.JSONPatchType, raw))
	if failedTest(err) {
		// To callers a failed test is the same race a 409 is.
		return apierrors.NewConflict(corev1.Resource("nodes"), node.Name, errors.New("a list the patch replaces changed since it was read"))
	}
	if err != nil {
		return fmt.Errorf("patching node %s: %w", node.Name, err)
	}
	return nil
}

// failedTest says whether err is the API server refusing a JSON patch that
// does not apply: a 422 without causes (a test that failed, or a key to
// remove another writer removed first). The Node's own validation errors
// name their fields as causes.
func failedTest(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details == nil || len(details.Causes) == 0
}

// diff is the JSON patch from stored to node, or an error when node
// changes a field Patch does not write.
func diff(stored, node *corev1.Node) ([]op, error) {
	rest, restStored := node.DeepCopy(), stored.DeepCopy()
	for _, n := range []*corev1.Node{rest, restStored} {
		n.Labels, n.Annotations, n.Finalizers, n.OwnerReferences = nil, nil, nil, nil
		n.Spec.Taints, n.Spec.Unschedulable = nil, false
		n.ResourceVersion, n.ManagedFields = "", nil
	}
	if !equality.Semantic.DeepEqual(rest, restStored) {
		return nil, errors.New("nodewrite: only labels, annotations, finalizers, owner references, taints and unschedulable can be patched")
	}
	var ops []op
	ops = append(ops, mapOps("/metadata/labels", stored.Labels, node.Labels)...)
	ops = append(ops, mapOps("/metadata/annotations", stored.Annotations, node.Annotations)...)
	ops = append(ops, listOps("/metadata/finalizers", stored.Finalizers, node.Finalizers)...)
	ops = append(ops, listOps("/metadata/ownerReferences", stored.OwnerReferences, node.OwnerReferences)...)
	ops = append(ops, listOps("/spec/taints", stored.Spec.Taints, node.Spec.Taints)...)
	if stored.Spec.Unschedulable != node.Spec.Unschedulable {
		ops = append(ops, op{Op: "add", Path: "/spec/unschedulable", Value: node.Spec.Unschedulable})
	}
	return ops, nil
}

// mapOps sets and removes keys one by one, so another writer's keys stay;
// a map stored did not have is tested absent and added whole.
func mapOps(path string, stored, desired map[string]string) []op {
	if equality.Semantic.DeepEqual(stored, desired) || (len(stored) == 0 && len(desired) == 0) {
		return nil
	}
	if stored == nil {
		return []op{{Op: "test", Path: path, Value: nil}, {Op: "add", Path: path, Value: desired}}
	}
	var ops []op
	for k, v := range desired {
		if old, ok := stored[k]; !ok || old != v {
			ops = append(ops, op{Op: "add", Path: path + "/" + escape(k), Value: v})
		}
	}
	for k := range stored {
		if _, ok := desired[k]; !ok {
			ops = append(ops, op{Op: "remove", Path: path + "/" + escape(k)})
		}
	}
	return ops
}

// listOps replaces a list a merge patch would replace whole anyway, under
// a test that it still holds what stored read (null: absent).
func listOps[T any](path string, stored, desired []T) []op {
	if equality.Semantic.DeepEqual(stored, desired) || (len(stored) == 0 && len(desired) == 0) {
		return nil
	}
	var was any
	if len(stored) > 0 {
		was = stored
	}
	if len(desired) == 0 {
		return []op{{Op: "test", Path: path, Value: was}, {Op: "remove", Path: path}}
	}
	return []op{{Op: "test", Path: path, Value: was}, {Op: "add", Path: path, Value: desired}}
}

// escape is a JSON pointer's escaping of a map key (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
