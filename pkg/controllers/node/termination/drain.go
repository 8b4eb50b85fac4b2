package termination

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/recovery"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// stuckTerminatingAfter is how long past its deletion deadline a pod may
// linger before drain stops waiting for it (its kubelet is likely gone).
const stuckTerminatingAfter = time.Minute

// evictionWorkers bounds concurrent eviction calls for one node.
const evictionWorkers = 16

// drainGroup orders eviction: workloads first, then the DaemonSet pods
// that may serve them, then critical pods, then critical DaemonSet pods,
// so that logging, networking and the like stay up while others leave.
type drainGroup int

const (
	groupNonCriticalNonDaemon drainGroup = iota
	groupNonCriticalDaemon
	groupCriticalNonDaemon
	groupCriticalDaemon
	numGroups
)

// drainResult says whether the node is empty of drainable pods and, if not,
// why not (for the FailedDraining event).
type drainResult struct {
	done    bool
	waiting string
	blocked bool // an eviction was refused (PDB) or a pod is protected
}

// drain makes one pass over the node's pods. Before the deadline it evicts
// the first non-empty group; pods whose own grace period would run past the
// deadline are deleted early with a grace period that ends at it; at the
// deadline every remaining drainable pod is deleted immediately.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, deadline *time.Time) (drainResult, error) {
	pods, err := index.PodsOnNode(ctx, c.kube, node.Name)
	if err != nil {
		return drainResult{}, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	now := c.clock.Now()
	var groups [numGroups][]*corev1.Pod
	total := 0
	for _, p := range pods {
		if !c.drainable(p, now) {
			continue
		}
		groups[groupOf(p)] = append(groups[groupOf(p)], p)
		total++
	}
	if total == 0 {
		return drainResult{done: true}, nil
	}

	if deadline != nil {
		if err := c.deleteForDeadline(ctx, node, groups[:], *deadline, now); err != nil {
			return drainResult{}, err
		}
	}

	var current []*corev1.Pod
	for _, g := range groups {
		if len(g) > 0 {
			current = g
			break
		}
	}
	sort.Slice(current, func(i, j int) bool {
		return current[i].Namespace+"/"+current[i].Name < current[j].Namespace+"/"+current[j].Name
	})

	var (
		mu        sync.Mutex
		refused   []string
		protected []string
		firstErr  error
		wg        sync.WaitGroup
		sem       = make(chan struct{}, evictionWorkers)
	)
	for _, p := range current {
		if !p.DeletionTimestamp.IsZero() {
			continue // already leaving; wait for it
		}
		if doNotDisrupt(p, now) {
			protected = append(protected, p.Namespace+"/"+p.Name)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(p *corev1.Pod) {
			defer func() { <-sem; wg.Done() }()
			var ok bool
			var err error
			// A panic here would take the process down with it (only the
			// reconciler itself is recovered); fail this pass instead.
			if perr := recovery.Do(ctx, "evicting pod "+p.Namespace+"/"+p.Name, func() { ok, err = c.evict(ctx, p) }); perr != nil {
				err = perr
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && firstErr == nil:
				firstErr = err
			case err == nil && !ok:
				refused = append(refused, p.Namespace+"/"+p.Name)
			}
		}(p)
	}
	wg.Wait()
	if firstErr != nil {
		return drainResult{}, firstErr
	}
	sort.Strings(refused)
	var why []string
	if len(refused) > 0 {
		why = append(why, fmt.Sprintf("eviction of %s refused by a PodDisruptionBudget", strings.Join(refused, ", ")))
	}
	if len(protected) > 0 {
		why = append(why, fmt.Sprintf("%s has the %s annotation", strings.Join(protected, ", "), v1.DoNotDisruptAnnotationKey))
	}
	waiting := fmt.Sprintf("%d pods are waiting to be evicted", total)
	if len(why) > 0 {
		waiting += ": " + strings.Join(why, "; ")
	}
	return drainResult{waiting: waiting, blocked: len(why) > 0}, nil
}

// drainable is false for pods drain must not or need not wait for: finished
// pods, static pods (the kubelet owns them), pods that tolerate the
// disrupted taint (they are meant to stay to the end) and pods stuck
// terminating long past their deadline.
func (c *Controller) drainable(p *corev1.Pod, now time.Time) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if scheduling.IsStaticPod(p) || scheduling.Tolerates(p.Spec.Tolerations, &v1.DisruptedNoScheduleTaint) {
		return false
	}
	if !p.DeletionTimestamp.IsZero() && now.After(p.DeletionTimestamp.Add(stuckTerminatingAfter)) {
		return false
	}
	return true
}

func groupOf(p *corev1.Pod) drainGroup {
	critical := p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
	daemon := false
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			daemon = true
		}
	}
	switch {
	case !critical && !daemon:
		return groupNonCriticalNonDaemon
	case !critical:
		return groupNonCriticalDaemon
	case !daemon:
		return groupCriticalNonDaemon
	}
	return groupCriticalDaemon
}

// doNotDisrupt is true for "true" and, for a duration value, while the pod
// is younger than it. Other values are ignored, as upstream does.
func doNotDisrupt(p *corev1.Pod, now time.Time) bool {
	v, ok := p.Annotations[v1.DoNotDisruptAnnotationKey]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	return now.Sub(p.CreationTimestamp.Time) < d
}

// evict asks the API server to evict the pod, which enforces PDBs. It
// returns false when the eviction was refused (429, or the 500 the server
// returns when several PDBs match) so the caller retries later.
func (c *Controller) evict(ctx context.Context, p *corev1.Pod) (bool, error) {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	// Preconditions make sure a same-named replacement pod is not evicted
	// in this one's place.
	eviction.DeleteOptions = &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}
	var err error
	if c.evictor != nil {
		err = c.evictor.Post().Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("eviction").
			MaxRetries(0).Body(eviction).Do(ctx).Error()
	} else {
		err = c.kube.SubResource("eviction").Create(ctx, p, eviction)
	}
	switch {
	case err == nil:
		c.event(p, corev1.EventTypeNormal, "Evicted", "Evicted pod")
		log.FromContext(ctx).V(1).Info("evicted pod", "Pod", map[string]string{"name": p.Name, "namespace": p.Namespace})
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true, nil // gone, or replaced by another pod of the same name
	case apierrors.IsTooManyRequests(err):
		return false, nil
	case apierrors.IsInternalError(err) && strings.Contains(err.Error(), "PodDisruptionBudget"):
		return false, nil
	}
	return false, fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
}

// deleteForDeadline deletes pods that cannot otherwise be gone by the
// deadline: those whose own terminationGracePeriodSeconds would end after
// it get a grace period that ends at it, and once it has passed everything
// goes with no grace at all, ignoring PDBs and do-not-disrupt.
func (c *Controller) deleteForDeadline(ctx context.Context, node *corev1.Node, groups [][]*corev1.Pod, deadline, now time.Time) error {
	remaining := deadline.Sub(now)
	for _, g := range groups {
		for _, p := range g {
			podGrace := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if p.Spec.TerminationGracePeriodSeconds != nil {
				podGrace = *p.Spec.TerminationGracePeriodSeconds
			}
			if remaining > time.Duration(podGrace)*time.Second {
				continue
			}
			grace := int64(math.Max(0, math.Floor(remaining.Seconds())))
			// A pod already terminating within the deadline needs nothing.
			if !p.DeletionTimestamp.IsZero() && !p.DeletionTimestamp.Time.After(deadline) && grace > 0 {
				continue
			}
			if !p.DeletionTimestamp.IsZero() && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds <= grace && grace > 0 {
				continue
			}
			err := c.kube.Delete(ctx, p, client.GracePeriodSeconds(grace), client.Preconditions{UID: &p.UID})
			if err == nil && grace == 0 && !p.DeletionTimestamp.IsZero() {
				// For a pod already terminating, the first call only cuts
				// its grace period to zero; the second removes it.
				err = client.IgnoreNotFound(c.kube.Delete(ctx, p, client.GracePeriodSeconds(0), client.Preconditions{UID: &p.UID}))
			}
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting pod %s/%s for the termination deadline: %w", p.Namespace, p.Name, err)
			}
			if err == nil {
				c.event(p, corev1.EventTypeNormal, "Disrupted",
					"Deleting the pod to accommodate the terminationTime %s of the node. The pod was granted %d seconds of grace-period of its %d terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
					deadline.Format(time.RFC3339), grace, podGrace)
				log.FromContext(ctx).Info("deleted pod for the termination deadline", "Pod", map[string]string{"name": p.Name, "namespace": p.Namespace},
					"Node", map[string]string{"name": node.Name}, "grace-period-seconds", grace)
			}
		}
	}
	return nil
}
