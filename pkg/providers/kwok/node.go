package kwok

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// register creates a delayed Node once its delay has passed, unless the
// instance was deleted meanwhile.
func (p *Provider) register(name string, pn *pendingNode) {
	p.mu.Lock()
	if pn.canceled || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	node := pn.node.DeepCopy()
	p.mu.Unlock()

	ctx := p.ctx
	err := retry.OnError(retry.DefaultBackoff, func(err error) bool { return ctx.Err() == nil }, func() error {
		_, err := p.createNode(ctx, node)
		return err
	})

	p.mu.Lock()
	if p.pending[name] == pn {
		delete(p.pending, name)
	}
	canceled := pn.canceled
	p.mu.Unlock()
	switch {
	case err != nil:
		// Like a machine that never joins: the registration TTL reaps it.
		log.FromContext(ctx).Error(err, "creating kwok node failed", "node", name)
	case canceled:
		// Deleted while we were creating it: do not leak the Node.
		if err := p.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			log.FromContext(ctx).Error(err, "deleting kwok node of a terminated instance", "node", name)
		}
	}
}

// createNode creates the Node, tolerating one that already exists (a
// retried registration), and makes sure its status carries the capacity in
// case the API server dropped it on create.
func (p *Provider) createNode(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	created := node.DeepCopy()
	if err := p.kube.Create(ctx, created); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		if err := p.kube.Get(ctx, client.ObjectKeyFromObject(node), created); err != nil {
			return nil, fmt.Errorf("getting existing node %s: %w", node.Name, err)
		}
		return created, nil
	}
	if len(created.Status.Capacity) == 0 {
		created.Status = node.Status
		if err := p.kube.Status().Update(ctx, created); err != nil {
			return nil, fmt.Errorf("setting status of node %s: %w", node.Name, err)
		}
	}
	return created, nil
}

// buildNode is the Node a kubelet on this instance would register.
func (p *Provider) buildNode(nc *v1.NodeClaim, reqs scheduling.Requirements, it *cloudprovider.InstanceType, o *cloudprovider.Offering) *corev1.Node {
	name := nc.Name
	labels := make(map[string]string, len(nc.Labels)+len(it.Requirements)+8)
	for k, v := range nc.Labels {
		labels[k] = v
	}
	// Single-valued NodeClaim requirements are labels the node must carry.
	for k, r := range reqs {
		if r.Operator() == scheduling.OpIn && len(r.Values()) == 1 {
			labels[k] = r.Values()[0]
		}
	}
	// The instance type's own labels; where it allows several values (e.g.
	// linux and windows), the first one the NodeClaim also allows.
	for k, r := range it.Requirements {
		if nr, ok := reqs[k]; ok {
			r = r.Intersect(nr)
		}
		if r.Operator() == scheduling.OpIn {
			labels[k] = r.Values()[0]
		}
	}
	for k, r := range scheduling.OfferingRequirements(o) {
		if r.Operator() == scheduling.OpIn && len(r.Values()) == 1 {
			labels[k] = r.Values()[0]
		}
	}
	labels[corev1.LabelHostname] = name
	labels[kwokv1alpha1.KWOKNodeLabelKey] = kwokv1alpha1.KWOKNodeLabelValue
	labels[kwokv1alpha1.KWOKPartitionLabelKey] = partition
	labels[kwokv1alpha1.NodeViewerPriceLabelKey] = fmt.Sprintf("%f", o.Price)

	annotations := make(map[string]string, len(nc.Annotations)+1)
	for k, v := range nc.Annotations {
		annotations[k] = v
	}
	annotations[kwokv1alpha1.KWOKNodeLabelKey] = kwokv1alpha1.KWOKNodeLabelValue

	// The kubelet registers with the unregistered taint plus the NodeClaim's
	// taints and startup taints (AWS bootstrap passes all of them in
	// registerWithTaints).
	taints := []corev1.Taint{v1.UnregisteredNoExecuteTaint}
	for _, t := range append(append([]corev1.Taint(nil), nc.Spec.Taints...), nc.Spec.StartupTaints...) {
		dup := false
		for _, have := range taints {
			dup = dup || have.MatchTaint(&t)
		}
		if !dup {
			taints = append(taints, t)
		}
	}

	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{ProviderID: ProviderIDPrefix + name, Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    it.Capacity.DeepCopy(),
			Allocatable: cloudprovider.Allocatable(it),
			Phase:       corev1.NodePending,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    labels[corev1.LabelArchStable],
				OperatingSystem: labels[corev1.LabelOSStable],
			},
		},
	}
}

func (pn *pendingNode) claim() *v1.NodeClaim {
	nc := claimFromNode(nil, pn.node)
	nc.CreationTimestamp = metav1.NewTime(pn.created)
	return nc
}

// claimFromNode is the NodeClaim view of an instance. With a base NodeClaim
// (Create), it is that NodeClaim with the launch results filled in;
// otherwise (Get, List) it is rebuilt from the Node alone.
func claimFromNode(base *v1.NodeClaim, node *corev1.Node) *v1.NodeClaim {
	var nc *v1.NodeClaim
	if base != nil {
		nc = base.DeepCopy()
	} else {
		nc = &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{
			Name:              node.Name,
			CreationTimestamp: node.CreationTimestamp,
			Annotations:       copyMap(node.Annotations),
		}}
		nc.Status.NodeName = node.Name
	}
	labels := copyMap(nc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range node.Labels {
		labels[k] = v
	}
	nc.Labels = labels
	nc.Status.ProviderID = node.Spec.ProviderID
	nc.Status.Capacity = node.Status.Capacity.DeepCopy()
	nc.Status.Allocatable = node.Status.Allocatable.DeepCopy()
	return nc
}

func nodeName(providerID string) (string, bool) {
	name, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	return name, ok && name != ""
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// DefaultRepairToleration is upstream kwok's: a node NotReady (False or
// Unknown) for this long is replaced by node repair.
const DefaultRepairToleration = 10 * time.Minute

// repairPolicies are upstream kwok's two Ready policies with the given
// toleration (DefaultRepairToleration when not positive).
func repairPolicies(toleration time.Duration) []cloudprovider.RepairPolicy {
	if toleration <= 0 {
		toleration = DefaultRepairToleration
	}
	return []cloudprovider.RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: toleration},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: toleration},
	}
}

// KubeletStoppedLabelValue replaces "fake" in a Node's kwok.x-k8s.io/node
// label once StopKubelet ran. The kwok binary manages only nodes labelled
// kwok.x-k8s.io/node=fake, so the node loses its simulated kubelet while
// the provider (which lists any value) still owns the instance.
const KubeletStoppedLabelValue = "kubelet-stopped"

// StopKubelet simulates a kubelet that stopped working on a kwok node: it
// takes the node away from the kwok binary, which would otherwise put Ready
// back to True on its next pass (its node-initialize stage matches any node
// that is not Ready, its heartbeat stage every Ready one), and then reports
// Ready with the given status (False, or Unknown as the node lifecycle
// controller writes for a silent kubelet). Tests use it to exercise node
// repair; the change holds until the node is deleted.
func StopKubelet(ctx context.Context, kube client.Client, nodeName string, ready corev1.ConditionStatus) error {
	return StopKubelets(ctx, kube, []string{nodeName}, ready)
}

// StopKubelets is StopKubelet for several nodes at once: every node turns
// NotReady within the same moment, so a test of "too many unhealthy nodes"
// never sees them go one at a time.
//
// The kwok binary (v0.8) can still play a heartbeat it scheduled before a
// node left its label selector, up to its heartbeat stage's delay and
// jitter (45 s) later (seen under load; likely a node event it was still
// processing re-schedules the heartbeat after its cancellation), and that
// heartbeat puts Ready back to True. So after writing Ready, until ctx ends or kwokHeartbeatBound has
// passed, a goroutine puts it back down at once, with the transition time
// it had, so that the node's unhealthy time runs on unbroken. The kube
// controller-manager may meanwhile turn a False into Unknown, which is as
// unhealthy and is left alone.
func StopKubelets(ctx context.Context, kube client.Client, nodeNames []string, ready corev1.ConditionStatus) error {
	if ready != corev1.ConditionFalse && ready != corev1.ConditionUnknown {
		return fmt.Errorf("stopping kubelets of nodes %v: Ready must become False or Unknown, not %q", nodeNames, ready)
	}
	for _, name := range nodeNames {
		if err := takeFromKwok(ctx, kube, name); err != nil {
			return err
		}
	}
	until := time.Now().Add(kwokHeartbeatBound)
	reason, message := "KubeletNotReady", "kubelet stopped (simulated by the kwok provider)"
	if ready == corev1.ConditionUnknown {
		reason, message = "NodeStatusUnknown", "Kubelet stopped posting node status."
	}
	// A heartbeat already on its way can land right after the write below.
	// Write until the status has held for a settle period.
	for held := 0; held < stopSettleChecks; {
		changed := false
		for _, name := range nodeNames {
			wrote, err := markNotReady(ctx, kube, types.NamespacedName{Name: name}, ready, reason, message, metav1.Time{})
			if err != nil {
				return err
			}
			changed = changed || wrote
		}
		if changed {
			held = 0
		} else {
			held++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(stopSettleInterval):
		}
	}
	since := map[string]metav1.Time{}
	for _, name := range nodeNames {
		node := &corev1.Node{}
		if err := kube.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return fmt.Errorf("reading node %s: %w", name, err)
		}
		if c := readyCondition(node); c != nil {
			since[name] = c.LastTransitionTime
		}
	}
	go keepDown(ctx, kube, since, until, ready, reason, message)
	return nil
}

// keepDown puts Ready back to ready, with its transition time, on any of
// the nodes that a late kwok heartbeat raised to True, until ctx ends or
// until is past.
func keepDown(ctx context.Context, kube client.Client, since map[string]metav1.Time, until time.Time, ready corev1.ConditionStatus, reason, message string) {
	for ctx.Err() == nil && time.Now().Before(until) {
		for name, t := range since {
			node := &corev1.Node{}
			if err := kube.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
				if apierrors.IsNotFound(err) {
					delete(since, name)
				}
				continue
			}
			if c := readyCondition(node); c != nil && c.Status == corev1.ConditionTrue {
				if _, err := markNotReady(ctx, kube, types.NamespacedName{Name: name}, ready, reason, message, t); err != nil {
					log.FromContext(ctx).Error(err, "putting Ready back down after a late kwok heartbeat", "Node", name)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(keepDownInterval):
		}
	}
}

// takeFromKwok relabels the node so the kwok binary no longer manages it.
func takeFromKwok(ctx context.Context, kube client.Client, nodeName string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := kube.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
			return err
		}
		if _, ok := node.Labels[kwokv1alpha1.KWOKNodeLabelKey]; !ok || !strings.HasPrefix(node.Spec.ProviderID, ProviderIDPrefix) {
			return fmt.Errorf("node %s is not a kwok instance", nodeName)
		}
		if node.Labels[kwokv1alpha1.KWOKNodeLabelKey] == KubeletStoppedLabelValue {
			return nil
		}
		node.Labels[kwokv1alpha1.KWOKNodeLabelKey] = KubeletStoppedLabelValue
		return kube.Update(ctx, node)
	})
	if err != nil {
		return fmt.Errorf("taking node %s away from kwok: %w", nodeName, err)
	}
	return nil
}

func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// kwokHeartbeatBound is how long after a node left the kwok binary a
// heartbeat it had scheduled may still play: its node-heartbeat stage's
// delay (20 s) and jitter (25 s), with room for a busy machine.
const kwokHeartbeatBound = 60 * time.Second

// stopSettleChecks × stopSettleInterval is how long StopKubelets watches
// for the kwok binary undoing its status write before it returns;
// keepDownInterval is how often it looks afterwards. A raised Ready is
// visible for about that long.
const (
	stopSettleChecks   = 4
	stopSettleInterval = 250 * time.Millisecond
	keepDownInterval   = 50 * time.Millisecond
)

// markNotReady writes Ready=ready on the node unless it already says so,
// and reports whether it wrote. A changed status gets since as its
// transition time, or now when since is zero.
func markNotReady(ctx context.Context, kube client.Client, key types.NamespacedName, ready corev1.ConditionStatus, reason, message string, since metav1.Time) (bool, error) {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wrote = false
		node := &corev1.Node{}
		if err := kube.Get(ctx, key, node); err != nil {
			return err
		}
		c := readyCondition(node)
		if c != nil && c.Status == ready {
			return nil
		}
		wrote = true
		now := metav1.Now()
		transition := since
		if transition.IsZero() {
			transition = now
		}
		if c == nil {
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type: corev1.NodeReady, Status: ready, Reason: reason, Message: message,
				LastHeartbeatTime: now, LastTransitionTime: transition,
			})
		} else {
			c.Status, c.Reason, c.Message, c.LastHeartbeatTime, c.LastTransitionTime = ready, reason, message, now, transition
		}
		return kube.Status().Update(ctx, node)
	})
	if err != nil {
		return false, fmt.Errorf("marking node %s not ready: %w", key.Name, err)
	}
	return wrote, nil
}
