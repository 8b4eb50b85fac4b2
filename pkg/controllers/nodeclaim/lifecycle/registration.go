package lifecycle

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// register finds the Node the instance registered as and makes it the
// NodeClaim's: labels, annotations, taints, the termination finalizer and an
// owner reference go on, and the unregistered taint comes off, in one write
// (with the initialized label when the Node is usable already).
func (c *Controller) register(ctx context.Context, nc *v1.NodeClaim, p *pass) (reconcile.Result, bool, error) {
	if !nc.IsTrue(v1.ConditionTypeLaunched) || nc.IsTrue(v1.ConditionTypeRegistered) {
		return reconcile.Result{}, false, nil
	}
	if cond := nc.Condition(v1.ConditionTypeRegistered); cond != nil && cond.Status == metav1.ConditionFalse {
		return reconcile.Result{}, false, nil // an invariant broke; liveness replaces the NodeClaim
	}
	now := c.opts.Clock.Now()
	nodes, err := index.NodesForProviderID(ctx, c.kube, nc.Status.ProviderID)
	if err != nil {
		return reconcile.Result{}, false, fmt.Errorf("finding node for nodeclaim: %w", err)
	}
	switch len(nodes) {
	case 0:
		nc.SetCondition(now, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "NodeNotFound", "Node not registered with cluster")
		return reconcile.Result{}, false, nil
	case 1:
	default:
		nc.SetCondition(now, v1.ConditionTypeRegistered, metav1.ConditionFalse, "MultipleNodesFound", "Invariant violated, matched multiple nodes")
		return reconcile.Result{}, false, nil
	}
	node := nodes[0]
	if !node.DeletionTimestamp.IsZero() {
		nc.SetCondition(now, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "NodeNotFound", "Node not registered with cluster")
		return reconcile.Result{}, false, nil
	}
	if _, registered := node.Labels[v1.NodeRegisteredLabelKey]; !registered && !hasTaint(node.Spec.Taints, &v1.UnregisteredNoExecuteTaint) {
		// The bootstrap should have registered the node with the taint so
		// no pod lands before our labels and taints are on. Say so, but
		// sync anyway: refusing would only strand the capacity.
		c.event(nc, corev1.EventTypeWarning, "UnregisteredTaintMissing",
			"Node %s is missing the %s taint; pods may have scheduled before Karpenter synced it", node.Name, v1.UnregisteredTaintKey)
	}
	if err := c.syncNode(ctx, nc, node); err != nil {
		return reconcile.Result{}, false, err
	}
	p.node = node
	nc.SetCondition(now, v1.ConditionTypeRegistered, metav1.ConditionTrue, v1.ConditionTypeRegistered, "")
	nc.Status.NodeName = node.Name
	p.afterCommit(func() {
		log.FromContext(ctx).Info("registered nodeclaim",
			"provider-id", nc.Status.ProviderID,
			"Node", map[string]string{"name": node.Name})
		metrics.NodesCreatedTotal.WithLabelValues(nc.Labels[v1.NodePoolLabelKey], nc.Labels[corev1.LabelTopologyZone]).Inc()
		c.opts.Health.Observe(nc.Labels[v1.NodePoolLabelKey], true, "")
	})
	return reconcile.Result{}, false, nil
}

func (c *Controller) syncNode(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) error {
	stored := node.DeepCopy()
	controllerutil.AddFinalizer(node, v1.TerminationFinalizer)
	addOwner(node, nc)
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for k, v := range nc.Labels {
		node.Labels[k] = v
	}
	node.Labels[v1.NodeRegisteredLabelKey] = "true"
	if len(nc.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range nc.Annotations {
		node.Annotations[k] = v
	}
	// Some bootstraps register the node with all its taints already and ask
	// us not to touch them, avoiding a race with whoever removes startup
	// taints.
	if node.Labels[v1.NodeDoNotSyncTaintsLabelKey] != "true" {
		for _, taints := range [][]corev1.Taint{nc.Spec.Taints, nc.Spec.StartupTaints} {
			for i := range taints {
				if !hasTaint(node.Spec.Taints, &taints[i]) {
					node.Spec.Taints = append(node.Spec.Taints, taints[i])
				}
			}
		}
	}
	kept := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if !t.MatchTaint(&v1.UnregisteredNoExecuteTaint) {
			kept = append(kept, t)
		}
	}
	node.Spec.Taints = kept
	// A Node that registration leaves usable gets initialization's label
	// in the same write; initialization then judges it again, finds the
	// label on and writes the Node no more. Only when the write replaces
	// the taints: it is then refused if they changed since the read, so
	// the taints judged are the Node's.
	if reason, _ := uninitialized(nc, node); reason == "" && !equality.Semantic.DeepEqual(stored.Spec.Taints, node.Spec.Taints) {
		node.Labels[v1.NodeInitializedLabelKey] = "true"
	}
	if equality.Semantic.DeepEqual(stored, node) {
		return nil
	}
	// Taints, finalizers and owners are lists the patch replaces whole:
	// it is refused if another writer changed one since our read (a taint
	// lost would be wrong), not for the kubelet's heartbeats.
	if err := guardedpatch.Patch(ctx, c.kube, stored, node); err != nil {
		return fmt.Errorf("syncing node %s: %w", node.Name, err)
	}
	return nil
}

// addOwner makes the NodeClaim an owner of the Node, so deleting a NodeClaim
// without Karpenter running still cleans up its Node.
func addOwner(node *corev1.Node, nc *v1.NodeClaim) {
	for _, ref := range node.OwnerReferences {
		if ref.UID == nc.UID {
			return
		}
	}
	block := true
	node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{
		APIVersion:         v1.GroupVersion.String(),
		Kind:               "NodeClaim",
		Name:               nc.Name,
		UID:                nc.UID,
		BlockOwnerDeletion: &block,
	})
}

// hasTaint matches on key and effect, as the kubelet and scheduler do.
func hasTaint(taints []corev1.Taint, t *corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(t) {
			return true
		}
	}
	return false
}
