package provisioning

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// The reasons of a CapacityBuffer's Provisioning condition, which the
// provisioner writes after each round, as upstream's.
const (
	// ReasonFitsExistingCapacity (True): every virtual pod fits existing
	// nodes or NodeClaims in flight.
	ReasonFitsExistingCapacity = "FitsExistingCapacity"
	// ReasonRequiresNewCapacity (False): the round planned new NodeClaims
	// for some virtual pods, or could place some nowhere.
	ReasonRequiresNewCapacity = "RequiresNewCapacity"
	// ReasonNotReadyForProvisioning (False): the buffer is not resolved.
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	// ReasonBufferEmpty (False): the buffer resolved to no replicas.
	ReasonBufferEmpty = "BufferEmpty"
)

// bufferPlacement is where one round put a buffer's virtual pods.
type bufferPlacement struct {
	existing, new, failed int
}

// bufferPlacements counts, per buffer, the virtual pods the round placed on
// existing capacity (nodes and NodeClaims in flight), on new NodeClaims,
// and nowhere.
func bufferPlacements(res *scheduling.Result) map[types.NamespacedName]*bufferPlacement {
	out := map[types.NamespacedName]*bufferPlacement{}
	if res == nil {
		return out
	}
	for _, pl := range res.Placements {
		if !snapshot.IsVirtual(pl.Pod) {
			continue
		}
		key := types.NamespacedName{Namespace: pl.Pod.Annotations[v1beta1.BufferNamespaceAnnotation], Name: pl.Pod.Annotations[v1beta1.BufferNameAnnotation]}
		c := out[key]
		if c == nil {
			c = &bufferPlacement{}
			out[key] = c
		}
		switch {
		case pl.Node != "":
			c.existing++
		case pl.NodeClaim >= 0:
			c.new++
		default:
			c.failed++
		}
	}
	return out
}

// provisioningCondition is the Provisioning condition a buffer gets after a
// round, as upstream decides it; ok is false when the round says nothing
// of the buffer (ready and not empty, but none of its virtual pods was
// planned: a strategy Karpenter does not act on), which leaves the
// condition as it is.
func provisioningCondition(cb *v1beta1.CapacityBuffer, pl *bufferPlacement) (status metav1.ConditionStatus, reason, message string, ok bool) {
	desired := 0
	if cb.Status.Replicas != nil {
		desired = int(*cb.Status.Replicas)
	}
	switch {
	case !meta.IsStatusConditionTrue(cb.Status.Conditions, v1beta1.ReadyForProvisioningCondition):
		return metav1.ConditionFalse, ReasonNotReadyForProvisioning, "Buffer is not ReadyForProvisioning", true
	case desired == 0:
		return metav1.ConditionFalse, ReasonBufferEmpty, "Buffer has zero desired replicas", true
	case pl == nil:
		return "", "", "", false
	case pl.new > 0 || pl.failed > 0:
		return metav1.ConditionFalse, ReasonRequiresNewCapacity, fmt.Sprintf("%d/%d virtual pods required new capacity, %d failed", pl.new, desired, pl.failed), true
	case pl.existing == desired:
		return metav1.ConditionTrue, ReasonFitsExistingCapacity, fmt.Sprintf("All %d virtual pods fit on existing capacity", desired), true
	}
	return "", "", "", false
}

// updateBuffers writes every CapacityBuffer's Provisioning condition after
// a round (res nil: a round with nothing to plan, so no virtual pods). A
// failure is logged: the next round writes again.
func (p *Provisioner) updateBuffers(ctx context.Context, res *scheduling.Result) {
	if p.opts.Buffers == nil {
		return
	}
	list := &v1beta1.CapacityBufferList{}
	if err := p.kube.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "listing capacitybuffers")
		return
	}
	placed := bufferPlacements(res)
	for i := range list.Items {
		cb := &list.Items[i]
		status, reason, message, ok := provisioningCondition(cb, placed[client.ObjectKeyFromObject(cb)])
		if !ok {
			continue
		}
		stored := cb.DeepCopy()
		if !cb.SetCondition(v1beta1.ProvisioningCondition, status, reason, message) {
			continue
		}
		err := p.kube.Status().Patch(ctx, cb, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "updating capacitybuffer status", "CapacityBuffer", client.ObjectKeyFromObject(cb))
		}
	}
}
