// Package nodeclaimutil holds what the NodeClaim lifecycle, node termination
// and garbage collection controllers share: finding Nodes and NodeClaims by
// provider ID, the NodeClaim condition bookkeeping (transition times from an
// injected clock, the Ready roll-up, transition events) and the event
// recorder they publish through.
package nodeclaimutil

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// Field index names. They match the operator's indexers, so whichever side
// registers first wins and lookups work either way.
const (
	NodeProviderIDField           = "spec.providerID"
	NodeClaimProviderIDField      = "status.providerID"
	PodNodeNameField              = "spec.nodeName"
	VolumeAttachmentNodeNameField = "spec.nodeName"
	indexConflict                 = "indexer conflict"
)

// Recorder is the slice of client-go's record.EventRecorder the controllers
// use; tests pass record.NewFakeRecorder.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// RegisterIndexes adds the field indexers the lookups below prefer. An index
// someone else already registered under the same name is fine.
func RegisterIndexes(ctx context.Context, mgr manager.Manager) error {
	idx := mgr.GetFieldIndexer()
	for _, r := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&corev1.Node{}, NodeProviderIDField, func(o client.Object) []string { return nonEmpty(o.(*corev1.Node).Spec.ProviderID) }},
		{&v1.NodeClaim{}, NodeClaimProviderIDField, func(o client.Object) []string { return nonEmpty(o.(*v1.NodeClaim).Status.ProviderID) }},
		{&corev1.Pod{}, PodNodeNameField, func(o client.Object) []string { return nonEmpty(o.(*corev1.Pod).Spec.NodeName) }},
		{&storagev1.VolumeAttachment{}, VolumeAttachmentNodeNameField, func(o client.Object) []string {
			return nonEmpty(o.(*storagev1.VolumeAttachment).Spec.NodeName)
		}},
	} {
		if err := idx.IndexField(ctx, r.obj, r.field, r.fn); err != nil && !strings.Contains(err.Error(), indexConflict) {
			return fmt.Errorf("indexing %T by %s: %w", r.obj, r.field, err)
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// listByField lists with a field selector, falling back to a full list when
// the reader cannot select on the field (a cache without the index, or an
// API server that does not support that field selector). filter is applied
// in both cases, so the result never depends on which path ran.
func listByField(ctx context.Context, kube client.Reader, list client.ObjectList, field, value string) error {
	if err := kube.List(ctx, list, client.MatchingFields{field: value}); err == nil {
		return nil
	}
	if err := kube.List(ctx, list); err != nil {
		return fmt.Errorf("listing %T: %w", list, err)
	}
	return nil
}

// NodesForProviderID returns the Nodes whose spec.providerID is id.
func NodesForProviderID(ctx context.Context, kube client.Reader, id string) ([]*corev1.Node, error) {
	if id == "" {
		return nil, nil
	}
	list := &corev1.NodeList{}
	if err := listByField(ctx, kube, list, NodeProviderIDField, id); err != nil {
		return nil, err
	}
	var out []*corev1.Node
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == id {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// NodeClaimsForProviderID returns the NodeClaims whose status.providerID is id.
func NodeClaimsForProviderID(ctx context.Context, kube client.Reader, id string) ([]*v1.NodeClaim, error) {
	if id == "" {
		return nil, nil
	}
	list := &v1.NodeClaimList{}
	if err := listByField(ctx, kube, list, NodeClaimProviderIDField, id); err != nil {
		return nil, err
	}
	var out []*v1.NodeClaim
	for i := range list.Items {
		if list.Items[i].Status.ProviderID == id {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// PodsOnNode returns the pods bound to the node.
func PodsOnNode(ctx context.Context, kube client.Reader, nodeName string) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := listByField(ctx, kube, list, PodNodeNameField, nodeName); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == nodeName {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// VolumeAttachmentsOnNode returns the VolumeAttachments for the node.
func VolumeAttachmentsOnNode(ctx context.Context, kube client.Reader, nodeName string) ([]*storagev1.VolumeAttachment, error) {
	list := &storagev1.VolumeAttachmentList{}
	if err := listByField(ctx, kube, list, VolumeAttachmentNodeNameField, nodeName); err != nil {
		return nil, err
	}
	var out []*storagev1.VolumeAttachment
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == nodeName {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// NodeReady reports whether the Node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ManagedBy returns a predicate telling whether a NodeClaim's NodeClass is
// one the cloud provider supports, so that two providers' controllers could
// share a cluster without fighting over each other's NodeClaims. A provider
// that names no NodeClass kinds manages everything.
func ManagedBy(scheme *runtime.Scheme, cloud cloudprovider.CloudProvider) func(*v1.NodeClaim) bool {
	type gk struct{ group, kind string }
	kinds := map[gk]bool{}
	for _, nc := range cloud.GetSupportedNodeClasses() {
		gvk, err := apiutil.GVKForObject(nc, scheme)
		if err != nil {
			return func(*v1.NodeClaim) bool { return true }
		}
		kinds[gk{gvk.Group, gvk.Kind}] = true
	}
	return func(nc *v1.NodeClaim) bool {
		if len(kinds) == 0 || nc.Spec.NodeClassRef == nil {
			return true
		}
		return kinds[gk{nc.Spec.NodeClassRef.Group, nc.Spec.NodeClassRef.Kind}]
	}
}

// Condition returns the NodeClaim's condition of the given type, or nil.
func Condition(nc *v1.NodeClaim, conditionType string) *v1.Condition {
	for i := range nc.Status.Conditions {
		if nc.Status.Conditions[i].Type == conditionType {
			return &nc.Status.Conditions[i]
		}
	}
	return nil
}

// IsTrue reports whether the NodeClaim's condition is present and True.
func IsTrue(nc *v1.NodeClaim, conditionType string) bool {
	c := Condition(nc, conditionType)
	return c != nil && c.Status == metav1.ConditionTrue
}

// SetCondition sets a condition, moving its transition time to now only when
// the status changes (so "how long has it been Unknown" stays answerable).
// An empty reason for True defaults to the condition type, as upstream
// shows in `kubectl describe`. It reports whether anything changed.
func SetCondition(nc *v1.NodeClaim, now time.Time, conditionType string, status metav1.ConditionStatus, reason, message string) bool {
	if reason == "" && status == metav1.ConditionTrue {
		reason = conditionType
	}
	if c := Condition(nc, conditionType); c != nil {
		changed := c.Status != status || c.Reason != reason || c.Message != message || c.ObservedGeneration != nc.Generation
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, message, nc.Generation
		return changed
	}
	nc.Status.Conditions = append(nc.Status.Conditions, v1.Condition{
		Type: conditionType, Status: status, Reason: reason, Message: message,
		ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(now),
	})
	return true
}

// Awaiting is the reason and message of a condition nobody has evaluated yet.
const (
	AwaitingReason  = "AwaitingReconciliation"
	AwaitingMessage = "object is awaiting reconciliation"
)

// InitializeConditions adds the lifecycle conditions (Launched, Registered,
// Initialized and Ready) as Unknown where missing, so their first real
// transition reads "Unknown -> True" and liveness can time from them.
func InitializeConditions(nc *v1.NodeClaim, now time.Time) {
	for _, t := range append(append([]string(nil), v1.NodeClaimReadyDependents...), v1.ConditionTypeReady) {
		if Condition(nc, t) == nil {
			SetCondition(nc, now, t, metav1.ConditionUnknown, AwaitingReason, AwaitingMessage)
		}
	}
}

// UpdateReady recomputes Ready from Launched, Registered and Initialized:
// True when all are True, False when any is False, Unknown otherwise.
func UpdateReady(nc *v1.NodeClaim, now time.Time) {
	var unhealthy []string
	status := metav1.ConditionTrue
	for _, t := range v1.NodeClaimReadyDependents {
		c := Condition(nc, t)
		switch {
		case c == nil:
			unhealthy = append(unhealthy, t+"=Unknown")
			if status == metav1.ConditionTrue {
				status = metav1.ConditionUnknown
			}
		case c.Status == metav1.ConditionFalse:
			unhealthy = append(unhealthy, t+"=False")
			status = metav1.ConditionFalse
		case c.Status == metav1.ConditionUnknown:
			unhealthy = append(unhealthy, t+"=Unknown")
			if status == metav1.ConditionTrue {
				status = metav1.ConditionUnknown
			}
		}
	}
	if status == metav1.ConditionTrue {
		SetCondition(nc, now, v1.ConditionTypeReady, status, v1.ConditionTypeReady, "")
		return
	}
	SetCondition(nc, now, v1.ConditionTypeReady, status, "UnhealthyDependents", strings.Join(unhealthy, ", "))
}

// PublishTransitions records an event on the NodeClaim for every condition
// whose status differs between before and after, in the form upstream's
// `kubectl describe nodeclaim` shows.
func PublishTransitions(rec Recorder, before, after *v1.NodeClaim) {
	if rec == nil {
		return
	}
	for _, c := range after.Status.Conditions {
		old := Condition(before, c.Type)
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
