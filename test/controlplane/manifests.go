package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the server-side-apply manager name for objects applied by the
// harness and by `make run`.
const FieldOwner = "karpenter-local"

// DecodeManifests splits a multi-document YAML (or JSON) stream into objects,
// skipping empty documents and comment-only ones, as kubectl does.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		obj := map[string]any{}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding document %d: %w", i, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// Apply server-side applies every object in a manifest stream, in order, like
// `kubectl apply --server-side -f`. It stops at the first object the API
// server refuses and names it in the error.
func Apply(ctx context.Context, c client.Client, data []byte) error {
	objs, err := DecodeManifests(data)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}
