package disruption

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/pkg/disruption"
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

// markRetry is how the marks' writes retry a Conflict. Most come from
// the informer's cache not having delivered one of this process's own
// writes yet (the planner's drain taint on a Node a drift command then
// takes), which guardedpatch refuses without a request. Twelve tries over
// about 1.7s give the cache time to catch up, where client-go's
// DefaultRetry (five within about 50ms) fails the command and rolls it
// back. No Cap: reaching it would end the tries early.
var markRetry = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.1}

// setTaint adds or removes taint on a Node, retrying when another writer
// changed the taints since the read, so no taint is lost. A Node that is
// gone needs nothing.
func setTaint(ctx context.Context, kube client.Client, name string, taint corev1.Taint, on bool) error {
	err := retry.RetryOnConflict(markRetry, func() error {
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		if hasTaint(node, taint) == on {
			return nil
		}
		stored := node.DeepCopy()
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
		return guardedpatch.Patch(ctx, kube, stored, node)
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

// drain keeps disruption.DrainTaint on exactly the managed nodes the
// strategy asks to drain (Strategy.Drain, given the pass's commands still
// to be validated; none under upstream's consolidation, so a switch back to
// it leaves no taint behind); and disruption.LaunchTaint on none but the
// nodes of NodeClaims a command in flight launched (the queue creates them
// with it; a restart forgets the queue, so the first pass takes it off).
// Deleting nodes are left to termination.
func (c *Controller) drain(ctx context.Context, validating []*disruption.Command) error {
	want := map[string]bool{}
	for _, name := range c.opts.Strategy.Drain(validating) {
		want[name] = true
	}
	launching := c.queue.Launching()
	var jobs []func() error
	for _, sn := range c.cluster.Nodes() {
		if sn.Node == nil || !sn.Managed() || sn.Deleting() {
			continue
		}
		name := sn.Node.Name
		if on := want[name]; hasTaint(sn.Node, disruption.DrainTaint) != on {
			jobs = append(jobs, func() error { return setTaint(ctx, c.kube, name, disruption.DrainTaint, on) })
		}
		if hasTaint(sn.Node, disruption.LaunchTaint) && (sn.NodeClaim == nil || !launching[sn.NodeClaim.Name]) {
			jobs = append(jobs, func() error { return setTaint(ctx, c.kube, name, disruption.LaunchTaint, false) })
		}
		// Costs are taken off every pod not on a drained node, also with
		// the option off, so that turning it off leaves none behind.
		drained := want[name] && c.opts.DrainDeletionCost
		for _, p := range sn.Pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			if patch := disruption.DeletionCostPatch(p, drained); patch != nil {
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
	disruption.ApplyAnnotations(changed, patch)
	err := kube.Patch(ctx, changed, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("setting the pod-deletion-cost of pod %s/%s: %w", p.Namespace, p.Name, err)
}

// setDisruptionReason sets the NodeClaim's DisruptionReason condition
// (True, with the reason) or, for an empty reason, removes it. The write
// is a guarded patch of the conditions: a lastPodEventTime or another
// status field written since the read does not refuse it (an update would
// lose to them and read again), a changed conditions list does.
func setDisruptionReason(ctx context.Context, kube client.Client, name, reason string) error {
	err := retry.RetryOnConflict(markRetry, func() error {
		nc := &v1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			return err
		}
		stored := nc.DeepCopy()
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
		return guardedpatch.PatchStatus(ctx, kube, stored, nc)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting the %s condition of nodeclaim %s: %w", v1.ConditionTypeDisruptionReason, name, err)
	}
	return nil
}
