package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/capacity"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// knownEphemeralTaints are put on by the kubelet, the node lifecycle
// controller or a cloud controller manager while a node comes up, and go
// away on their own; a node still carrying one is not usable yet.
var knownEphemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	v1.UnregisteredNoExecuteTaint,
}

// readinessTaintPrefix marks taints from node-readiness gates, ephemeral
// by convention.
const readinessTaintPrefix = "readiness.k8s.io/"

// initialize declares the node usable once it is Ready, every startup and
// known ephemeral taint is gone and every requested resource shows up in
// allocatable (device plugins register extended resources late).
func (c *Controller) initialize(ctx context.Context, nc *v1.NodeClaim, p *pass) (reconcile.Result, bool, error) {
	if nc.IsTrue(v1.ConditionTypeInitialized) {
		return reconcile.Result{}, false, nil
	}
	now := c.opts.Clock.Now()
	set := func(reason, format string, args ...interface{}) (reconcile.Result, bool, error) {
		nc.SetCondition(now, v1.ConditionTypeInitialized, metav1.ConditionUnknown, reason, fmt.Sprintf(format, args...))
		return reconcile.Result{}, false, nil
	}
	if !nc.IsTrue(v1.ConditionTypeLaunched) {
		return set("NotLaunched", "Node not launched")
	}
	if !nc.IsTrue(v1.ConditionTypeRegistered) {
		return set("NodeNotFound", "Node not registered with cluster")
	}
	node := p.node
	if node == nil {
		nodes, err := index.NodesForProviderID(ctx, c.kube, nc.Status.ProviderID)
		if err != nil {
			return reconcile.Result{}, false, fmt.Errorf("finding node for nodeclaim: %w", err)
		}
		if len(nodes) != 1 {
			return set("NodeNotFound", "Node not registered with cluster")
		}
		node = nodes[0]
		// A cached Node our own write (registration's, say) replaced
		// says less than that write's answer did: judging it would write
		// a reason older than the one written. The write's event is on
		// its way.
		if guardedpatch.Superseded(node) {
			return reconcile.Result{RequeueAfter: time.Second}, false, nil
		}
	}
	if reason, message := uninitialized(nc, node); reason != "" {
		return set(reason, "%s", message)
	}
	if node.Labels[v1.NodeInitializedLabelKey] != "true" {
		stored := node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[v1.NodeInitializedLabelKey] = "true"
		if err := c.kube.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, false, fmt.Errorf("labeling node %s initialized: %w", node.Name, err)
		}
		guardedpatch.Record(stored, node)
	}
	nc.SetCondition(now, v1.ConditionTypeInitialized, metav1.ConditionTrue, v1.ConditionTypeInitialized, "")
	// The consistency check's first look goes into this write: the Node is
	// in hand, and the consistency controller's own first write, a moment
	// later, would change nothing else. A Node that falls short is left to
	// it, to report.
	if nc.Condition(v1.ConditionTypeConsistentStateFound) == nil && len(capacity.Shortfalls(nc, node)) == 0 {
		nc.SetCondition(now, v1.ConditionTypeConsistentStateFound, metav1.ConditionTrue, v1.ConditionTypeConsistentStateFound, "")
	}
	allocatable := node.Status.Allocatable.DeepCopy()
	p.afterCommit(func() {
		log.FromContext(ctx).Info("initialized nodeclaim",
			"provider-id", nc.Status.ProviderID,
			"Node", map[string]string{"name": node.Name},
			"allocatable", allocatable)
	})
	return reconcile.Result{}, false, nil
}

// uninitialized is why node is not usable yet for nc (a reason and a
// message for the Initialized condition), or "" when it is: Ready, no
// startup or known ephemeral taint left, every requested resource in
// allocatable.
func uninitialized(nc *v1.NodeClaim, node *corev1.Node) (reason, message string) {
	if !scheduling.NodeReady(node) {
		return "NodeNotReady", "Node status is NotReady"
	}
	for i := range nc.Spec.StartupTaints {
		if t := findTaint(node.Spec.Taints, &nc.Spec.StartupTaints[i]); t != nil {
			return "StartupTaintsExist", fmt.Sprintf("StartupTaint %q still exists", taintString(t))
		}
	}
	if t := ephemeralTaint(node.Spec.Taints); t != nil {
		return "KnownEphemeralTaintsExist", fmt.Sprintf("KnownEphemeralTaint %q still exists", taintString(t))
	}
	if name, ok := resourcesRegistered(node, nc); !ok {
		return "ResourceNotRegistered", fmt.Sprintf("Resource %q was requested but not registered", name)
	}
	return "", ""
}

func findTaint(taints []corev1.Taint, t *corev1.Taint) *corev1.Taint {
	for i := range taints {
		if taints[i].MatchTaint(t) {
			return &taints[i]
		}
	}
	return nil
}

func ephemeralTaint(taints []corev1.Taint) *corev1.Taint {
	for i := range taints {
		if strings.HasPrefix(taints[i].Key, readinessTaintPrefix) {
			return &taints[i]
		}
		for j := range knownEphemeralTaints {
			if taints[i].MatchTaint(&knownEphemeralTaints[j]) {
				return &taints[i]
			}
		}
	}
	return nil
}

// resourcesRegistered checks allocatable, which is what the scheduler
// uses; the kubelet reports extended resources as zero until their device
// plugin registers.
func resourcesRegistered(node *corev1.Node, nc *v1.NodeClaim) (corev1.ResourceName, bool) {
	for name, q := range nc.Spec.Resources.Requests {
		if q.IsZero() {
			continue
		}
		if a, ok := node.Status.Allocatable[name]; !ok || a.IsZero() {
			return name, false
		}
	}
	return "", true
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
