package snapshot

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// IsProvisionable reports whether pod may need capacity from Karpenter: it
// is not bound or being preempted into room on a node, it is not a DaemonSet
// or static pod (those are tied to a node and never need a new one), and
// either the kube-scheduler tried and failed to place it (PodScheduled=False
// with reason Unschedulable) or it is still waiting for its first attempt.
//
// Upstream Karpenter waits for the Unschedulable mark. With many new pods
// that mark is the bottleneck: the kube-scheduler writes it one pod at a
// time under its client rate limit, so a burst of 1,000 pods trickles into
// two or three provisioning rounds. Planning for pods the scheduler has not
// reached yet is safe because the solver places pods on existing nodes (and
// in-flight NodeClaims) first: a pod that fits what is there asks for
// nothing new.
func IsProvisionable(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" &&
		pod.Status.NominatedNodeName == "" &&
		pod.DeletionTimestamp.IsZero() &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed &&
		(FailedToSchedule(pod) || awaitingScheduler(pod)) &&
		!scheduling.IsOwnedBy(pod, "DaemonSet") && !scheduling.IsStaticPod(pod)
}

// FailedToSchedule reports whether the kube-scheduler marked pod
// Unschedulable.
func FailedToSchedule(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// awaitingScheduler reports whether the default kube-scheduler has yet to
// look at pod. Pods held by scheduling gates, or handed to another scheduler,
// are not ours to anticipate: they count only once marked Unschedulable.
func awaitingScheduler(pod *corev1.Pod) bool {
	if len(pod.Spec.SchedulingGates) > 0 {
		return false
	}
	if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return false
		}
	}
	return true
}

// PendingPods selects the provisionable pods of all that pass validation,
// and returns the others that failed it with the reason.
func PendingPods(all []*corev1.Pod) (pods []*corev1.Pod, ignored []IgnoredPod) {
	for _, pod := range all {
		if !IsProvisionable(pod) {
			continue
		}
		if err := ValidatePod(pod); err != nil {
			ignored = append(ignored, IgnoredPod{Pod: pod, Err: err})
			continue
		}
		pods = append(pods, pod)
	}
	return pods, ignored
}

// PendingPods are the pending pods of all a round built with these options
// plans for (PendingPods), without those with ResourceClaims while
// IgnoreDRARequests: disruption counts as pending only what provisioning
// would plan for, so a pod that stays Pending by design holds no room.
func (o Options) PendingPods(all []*corev1.Pod) (pods []*corev1.Pod, ignored []IgnoredPod) {
	pods, ignored = PendingPods(all)
	if o.IgnoreDRARequests {
		pods, ignored = withoutDRARequests(pods, ignored)
	}
	return pods, ignored
}

// ErrNotManaged marks pods that opted out of Karpenter; callers skip them
// without an event.
var ErrNotManaged = errors.New("pod opted out of karpenter: it requires karpenter.sh/nodepool DoesNotExist")

// ErrDRARequests is why a pod with ResourceClaims is left out of planning
// while IGNORE_DRA_REQUESTS is true (the default).
var ErrDRARequests = errors.New("pod has resource claims (Dynamic Resource Allocation), which Karpenter does not provision for while IGNORE_DRA_REQUESTS is true")

// withoutDRARequests moves the pods that claim resources through DRA from
// pods to ignored.
func withoutDRARequests(pods []*corev1.Pod, ignored []IgnoredPod) ([]*corev1.Pod, []IgnoredPod) {
	kept := pods[:0:0]
	for _, pod := range pods {
		if len(pod.Spec.ResourceClaims) > 0 {
			ignored = append(ignored, IgnoredPod{Pod: pod, Err: ErrDRARequests})
			continue
		}
		kept = append(kept, pod)
	}
	return kept, ignored
}

// ValidatePod returns why Karpenter cannot plan for pod at all, independent
// of any NodePool: node selectors it cannot interpret. Such pods are left
// out of the snapshot instead of failing it.
func ValidatePod(pod *corev1.Pod) error {
	var errs []error
	for k, v := range pod.Spec.NodeSelector {
		errs = append(errs, v1.NodeSelectorRequirementWithMinValues{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v},
		}.Validate())
	}
	if aff := pod.Spec.Affinity; aff != nil && aff.NodeAffinity != nil {
		if req := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			for _, term := range req.NodeSelectorTerms {
				for _, e := range term.MatchExpressions {
					if e.Key == v1.NodePoolLabelKey && e.Operator == corev1.NodeSelectorOpDoesNotExist {
						return ErrNotManaged
					}
				}
				errs = append(errs, validateTerm(term))
			}
		}
		for _, pref := range aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			errs = append(errs, validateTerm(pref.Preference))
		}
	}
	return errors.Join(errs...)
}

func validateTerm(term corev1.NodeSelectorTerm) error {
	var errs []error
	if len(term.MatchFields) > 0 {
		errs = append(errs, fmt.Errorf("node selector term with matchFields is not supported"))
	}
	for _, e := range term.MatchExpressions {
		errs = append(errs, v1.NodeSelectorRequirementWithMinValues{
			Key: e.Key, Operator: e.Operator, Values: e.Values,
		}.Validate())
	}
	return errors.Join(errs...)
}

// Reschedulable reports whether pod must find a new home when its node
// goes away: DaemonSet and static (mirror) pods stay with their node,
// terminating and terminal pods need none, and pods tolerating the
// disrupted taint are not drained.
func Reschedulable(pod *corev1.Pod) bool {
	return !scheduling.IsOwnedBy(pod, "DaemonSet") && !scheduling.IsStaticPod(pod) && pod.DeletionTimestamp.IsZero() &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed &&
		!scheduling.Tolerates(pod.Spec.Tolerations, &v1.DisruptedNoScheduleTaint)
}

// reschedulablePods returns copies, unbound and sorted by UID (then name), of the
// reschedulable pods on leaving nodes, and the subset that was on a node in
// remove.
func reschedulablePods(all []*corev1.Pod, leaving, remove map[string]bool) (moving, moved []*corev1.Pod) {
	for _, pod := range all {
		if !leaving[pod.Spec.NodeName] || !Reschedulable(pod) {
			continue
		}
		cp := pod.DeepCopy()
		cp.Spec.NodeName = ""
		moving = append(moving, cp)
		if remove[pod.Spec.NodeName] {
			moved = append(moved, cp)
		}
	}
	byUID := func(pods []*corev1.Pod) {
		sort.Slice(pods, func(i, j int) bool {
			if pods[i].UID != pods[j].UID {
				return pods[i].UID < pods[j].UID
			}
			return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
		})
	}
	byUID(moving)
	byUID(moved)
	return moving, moved
}
