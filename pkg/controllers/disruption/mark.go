package disruption

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

// cleanup removes the disrupted taint and the DisruptionReason condition
// from nodes no command in the queue owns: a crash or a lost command left
// them, and the next decision starts from scratch. Deleting nodes keep the
// taint (termination put it there).
func (c *Controller) cleanup(ctx context.Context) error {
	var errs []error
	for _, sn := range c.cluster.Nodes() {
		if sn.Deleting() || c.queue.Has(sn.Name()) || (sn.NodeClaim != nil && c.queue.Has(sn.NodeClaim.Name)) {
			continue
		}
		if sn.Node != nil && !sn.Managed() {
			continue
		}
		if sn.Node != nil && hasDisruptedTaint(sn.Node) {
			if err := setDisruptedTaint(ctx, c.kube, sn.Node.Name, false); err != nil {
				errs = append(errs, err)
			}
		}
		if sn.NodeClaim != nil && meta.FindStatusCondition(sn.NodeClaim.GetConditions(), v1.ConditionTypeDisruptionReason) != nil {
			if err := setDisruptionReason(ctx, c.kube, sn.NodeClaim.Name, ""); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func hasDisruptedTaint(n *corev1.Node) bool { return hasTaint(n, v1.DisruptedNoScheduleTaint) }

func hasTaint(n *corev1.Node, taint corev1.Taint) bool {
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(&taint) {
			return true
		}
	}
	return false
}

// setDisruptedTaint adds or removes karpenter.sh/disrupted:NoSchedule on a
// Node.
func setDisruptedTaint(ctx context.Context, kube client.Client, name string, on bool) error {
	return setTaint(ctx, kube, name, v1.DisruptedNoScheduleTaint, on)
}

// setTaint adds or removes taint on a Node, with optimistic locking so a
// concurrent write is not lost. A Node that is gone needs nothing.
func setTaint(ctx context.Context, kube client.Client, name string, taint corev1.Taint, on bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		if hasTaint(node, taint) == on {
			return nil
		}
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if on {
			node.Spec.Taints = append(node.Spec.Taints, taint)
		} else {
			kept := node.Spec.Taints[:0:0]
			for _, t := range node.Spec.Taints {
				if !t.MatchTaint(&taint) {
					kept = append(kept, t)
				}
			}
			node.Spec.Taints = kept
		}
		return kube.Patch(ctx, node, patch)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		verb := "removing"
		if on {
			verb = "adding"
		}
		return fmt.Errorf("%s the taint %s on node %s: %w", verb, taint.ToString(), name, err)
	}
	return nil
}

// drain keeps repack.DrainTaint on exactly the managed nodes the planner
// last asked to drain (Options.Drain; none without a planner, so a switch
// back to upstream's consolidation leaves no taint behind) and, with a
// planner, on the candidates of the pass's commands (validating) while
// they wait out the validation delay; and repack.LaunchTaint on none but
// the nodes of NodeClaims a command in flight launched (the queue creates
// them with it; a restart forgets the queue, so the first pass takes it
// off). Deleting nodes are left to termination.
//
// A candidate carries no disruption taint before its command starts, and
// an empty one is the emptiest node there is: the kube-scheduler, which
// prefers the emptiest, put the pods the previous pass's commands evicted
// on the empty nodes Emptiness was validating. Emptiness then dropped
// them, and since those pods replace evicted ones, the planner's cool-down
// froze the nodes (in the end-to-end benchmark, four 16-vCPU machines
// holding one to three pods each, $2.15/h, until the end).
func (c *Controller) drain(ctx context.Context, validating []*disruption.Command) error {
	want := map[string]bool{}
	if c.opts.Drain != nil {
		for _, name := range c.opts.Drain() {
			want[name] = true
		}
		for _, cmd := range validating {
			for _, cand := range cmd.Candidates {
				want[cand.Name()] = true
			}
		}
	}
	launching := c.queue.Launching()
	var jobs []func() error
	for _, sn := range c.cluster.Nodes() {
		if sn.Node == nil || !sn.Managed() || sn.Deleting() {
			continue
		}
		name := sn.Node.Name
		if on := want[name]; hasTaint(sn.Node, repack.DrainTaint) != on {
			jobs = append(jobs, func() error { return setTaint(ctx, c.kube, name, repack.DrainTaint, on) })
		}
		if hasTaint(sn.Node, repack.LaunchTaint) && (sn.NodeClaim == nil || !launching[sn.NodeClaim.Name]) {
			jobs = append(jobs, func() error { return setTaint(ctx, c.kube, name, repack.LaunchTaint, false) })
		}
		// Costs are taken off every pod not on a drained node, also with
		// the option off, so that turning it off leaves none behind.
		drained := want[name] && c.opts.DrainDeletionCost
		for _, p := range sn.Pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			if patch := repack.DeletionCostPatch(p, drained); patch != nil {
				jobs = append(jobs, func() error { return patchAnnotations(ctx, c.kube, p, patch) })
			}
		}
	}
	return runParallel(jobs)
}

// drainWorkers bounds the writes drain makes at once. One by one, the
// hundreds of pod and node patches of a pass over a thousand pods took
// 2-5 s of API round trips before the validation delay began.
const drainWorkers = 16

// runParallel runs jobs on up to drainWorkers goroutines and joins their
// errors (one failing does not stop the others).
func runParallel(jobs []func() error) error {
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(drainWorkers)
	for _, job := range jobs {
		g.Go(func() error {
			if err := job(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// patchAnnotations applies patch (a nil value removes the key) to the
// pod's annotations, if the pod is still the version p was read at: a
// pod changed since is patched by a later pass, from its new annotations.
func patchAnnotations(ctx context.Context, kube client.Client, p *corev1.Pod, patch map[string]*string) error {
	changed := p.DeepCopy()
	repack.ApplyAnnotations(changed, patch)
	err := kube.Patch(ctx, changed, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("setting the pod-deletion-cost of pod %s/%s: %w", p.Namespace, p.Name, err)
}

// setDisruptionReason sets the NodeClaim's DisruptionReason condition
// (True, with the reason) or, for an empty reason, removes it.
func setDisruptionReason(ctx context.Context, kube client.Client, name, reason string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nc := &v1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			return err
		}
		conds := nc.GetConditions()
		if reason == "" {
			if !meta.RemoveStatusCondition(&conds, v1.ConditionTypeDisruptionReason) {
				return nil
			}
		} else if !meta.SetStatusCondition(&conds, metav1.Condition{
			Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: reason,
			ObservedGeneration: nc.Generation,
		}) {
			return nil
		}
		nc.SetConditions(conds)
		return kube.Status().Update(ctx, nc)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating the %s condition of nodeclaim %s: %w", v1.ConditionTypeDisruptionReason, name, err)
	}
	return nil
}
