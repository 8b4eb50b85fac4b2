// Package index owns the field indexes the controllers look objects up by
// (Nodes and NodeClaims by provider ID, pods and VolumeAttachments by node
// name) and the lookups that use them, falling back to a full list where
// the reader has no such index.
package index

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
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
