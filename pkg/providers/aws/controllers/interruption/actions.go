package interruption

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

// Event reasons, as upstream's AWS interruption controller records them on
// the Node and the NodeClaim.
const (
	EventSpotInterrupted                = "SpotInterrupted"
	EventSpotRebalanceRecommendation    = "SpotRebalanceRecommendation"
	EventInstanceStopping               = "InstanceStopping"
	EventInstanceTerminating            = "InstanceTerminating"
	EventInstanceUnhealthy              = "InstanceUnhealthy"
	EventCapacityReservationInterrupted = "CapacityReservationInstanceInterrupted"
	EventTerminatingOnInterruption      = "TerminatingOnInterruption"
)

// Values of karpenter_interruption_actions_performed_total's action label.
const (
	ActionCordonAndDrain = "cordon_and_drain"
	ActionNotify         = "notify"
	// ActionReplace marks a NodeClaim for replacement (a rebalance
	// recommendation with ReplaceOnRebalance).
	ActionReplace         = "replace"
	ActionUnmanaged       = "unmanaged"
	ActionAlreadyDeleting = "already_deleting"
)

// Termination modes of karpenter_nodeclaims_disrupted_total, as the other
// involuntary paths (expiration) report them.
const (
	terminationModeGraceful = "graceful"
	terminationModeEventual = "eventual"
	terminationModeForceful = "forceful"
)

// instanceIDField indexes NodeClaims by the EC2 instance ID of their
// provider ID, so a message costs one indexed cache lookup per instance
// rather than a scan of every NodeClaim.
const instanceIDField = "status.providerID.instanceID"

// Recorder records Kubernetes events; record.EventRecorder satisfies it.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, string, string, string, ...interface{}) {}

// instanceIDOf is the NodeClaim's EC2 instance ID, "" when it has no AWS
// provider ID (not launched yet, or another provider's).
func instanceIDOf(nc *v1.NodeClaim) string {
	id, err := instance.ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		return ""
	}
	return id
}

func indexInstanceID(o client.Object) []string {
	nc, ok := o.(*v1.NodeClaim)
	if !ok {
		return nil
	}
	if id := instanceIDOf(nc); id != "" {
		return []string{id}
	}
	return nil
}

// nodeClaimsFor finds the NodeClaims of an instance: through the field
// index when the client has it (a manager's cache), else by listing them
// all (a direct client, as in tests; the API server rejects the unknown
// field selector).
func nodeClaimsFor(ctx context.Context, kube client.Reader, id string) ([]*v1.NodeClaim, error) {
	list := &v1.NodeClaimList{}
	if err := kube.List(ctx, list, client.MatchingFields{instanceIDField: id}); err != nil {
		list = &v1.NodeClaimList{}
		if err := kube.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing nodeclaims for instance %s: %w", id, err)
		}
	}
	var out []*v1.NodeClaim
	for i := range list.Items {
		// The index narrows the list; checking again keeps the fallback
		// (and a stale index) honest.
		if instanceIDOf(&list.Items[i]) == id {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// nodeOf is the NodeClaim's Node, nil when it has none (not registered, or
// gone already): events then go on the NodeClaim only.
func nodeOf(ctx context.Context, kube client.Reader, nc *v1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(1).Info("reading node for interruption events", "node", nc.Status.NodeName, "error", err.Error())
		}
		return nil
	}
	return node
}

// record puts the same event on the NodeClaim and, when there is one, its
// Node.
func record(rec Recorder, nc *v1.NodeClaim, node *corev1.Node, eventType, reason, message string) {
	rec.Eventf(nc, eventType, reason, "%s", message)
	if node != nil {
		rec.Eventf(node, eventType, reason, "%s", message)
	}
}

// deleteNodeClaim starts the NodeClaim's normal termination (finalizer,
// taint, drain, TerminateInstances). forceful first sets the termination
// deadline to now, so the drain deletes pods at once instead of waiting on
// PDBs, do-not-disrupt or the terminationGracePeriod, as upstream's
// ForcefulTermination does. It reports false when the NodeClaim was
// already being deleted or is gone, so the caller counts the action once.
func deleteNodeClaim(ctx context.Context, kube client.Client, nc *v1.NodeClaim, forceful bool, now time.Time) (bool, error) {
	if !nc.DeletionTimestamp.IsZero() {
		return false, nil
	}
	if forceful {
		if err := annotateDeadline(ctx, kube, nc, now); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
	}
	// The UID precondition keeps a redelivered message from deleting a
	// NodeClaim of the same name created since.
	if err := kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err)
	}
	return true, nil
}

// annotateDeadline sets the termination-timestamp annotation to now unless
// an earlier deadline is already set.
func annotateDeadline(ctx context.Context, kube client.Client, nc *v1.NodeClaim, now time.Time) error {
	if s, ok := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil && !t.After(now) {
			return nil
		}
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] = now.UTC().Format(time.RFC3339)
	if err := kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return fmt.Errorf("annotating nodeclaim %s with its termination deadline: %w", nc.Name, err)
	}
	return nil
}

// countDisrupted adds the deletion to karpenter_nodeclaims_disrupted_total
// under reason (the message kind, as upstream, or the status category).
func countDisrupted(nc *v1.NodeClaim, reason string, forceful bool) {
	mode := terminationModeForceful
	if !forceful {
		switch tgp := nc.Spec.TerminationGracePeriod; {
		case tgp == nil:
			mode = terminationModeGraceful
		case tgp.Duration > 0:
			mode = terminationModeEventual
		}
	}
	metrics.NodeClaimsDisruptedTotal.With(prometheus.Labels{
		metrics.ReasonLabel:              reason,
		metrics.NodePoolLabel:            nc.Labels[v1.NodePoolLabelKey],
		metrics.CapacityTypeLabel:        nc.Labels[v1.CapacityTypeLabelKey],
		metrics.ConsolidationPolicyLabel: "", // involuntary: no consolidation policy, as upstream
		metrics.TerminationModeLabel:     mode,
	}).Inc()
}
