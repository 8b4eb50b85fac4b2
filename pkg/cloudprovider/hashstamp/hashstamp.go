// Package hashstamp stamps a spec hash and its version on an object that
// NodeClaims are launched from (a NodePool, or a provider's NodeClass) and
// re-stamps those NodeClaims when the hash version changes, so that a new
// hashing algorithm never reads as drift. The core's NodePool hash
// controller and each provider's NodeClass hash controller share it.
package hashstamp

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Annotations names a spec-hash annotation pair and the current version:
// the NodePool's (karpenter.sh/nodepool-hash) or a provider NodeClass's
// (karpenter.k8s.aws/ec2nodeclass-hash). Both are stamped the same way.
type Annotations struct {
	Hash, Version, CurrentVersion string
}

// Stamp writes hash and the current version on owner. When owner still
// carries an older version, claims (owner's NodeClaims) are re-stamped
// first: their hashes were computed by another algorithm, so comparing them
// with the new one would drift every node. If re-stamping fails, owner keeps
// its old version and the next reconcile tries again.
func Stamp(ctx context.Context, kube client.Client, owner client.Object, keys Annotations, hash string, claims func() ([]v1.NodeClaim, error)) error {
	current := owner.GetAnnotations()
	if current[keys.Version] != keys.CurrentVersion {
		list, err := claims()
		if err != nil {
			return err
		}
		if err := restamp(ctx, kube, list, keys, hash); err != nil {
			return err
		}
	}
	if current[keys.Hash] == hash && current[keys.Version] == keys.CurrentVersion {
		return nil
	}
	// A merge patch of two annotation keys cannot drop anything else written
	// meanwhile, so no optimistic lock is needed.
	patch := client.MergeFrom(owner.DeepCopyObject().(client.Object))
	annotations := map[string]string{}
	for k, v := range current {
		annotations[k] = v
	}
	annotations[keys.Hash] = hash
	annotations[keys.Version] = keys.CurrentVersion
	owner.SetAnnotations(annotations)
	if err := kube.Patch(ctx, owner, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("patching %s hash: %w", owner.GetName(), err))
	}
	return nil
}

// restamp moves claims to the current version. Already drifted NodeClaims
// keep their old hash: under the new algorithm there is no telling whether
// they still differ, and undoing a decided drift would be the surprise.
func restamp(ctx context.Context, kube client.Client, claims []v1.NodeClaim, keys Annotations, hash string) error {
	for i := range claims {
		nc := &claims[i]
		if nc.Annotations[keys.Version] == keys.CurrentVersion {
			continue
		}
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		if !meta.IsStatusConditionTrue(nc.GetConditions(), v1.ConditionTypeDrifted) {
			nc.Annotations[keys.Hash] = hash
		}
		nc.Annotations[keys.Version] = keys.CurrentVersion
		if err := kube.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("re-stamping nodeclaim %s: %w", nc.Name, err)
		}
	}
	return nil
}
