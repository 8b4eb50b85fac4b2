package snapshot

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ExpectedPodAnnotation marks the pods a round plans for that do not exist
// yet: the ones a ReplicaSet is about to create. They never reach the API
// server; the annotation lets events, logs and "why" output tell them apart.
const ExpectedPodAnnotation = "karpenter-go.io/expected-pod"

// IsExpected reports whether pod is a placeholder for a pod a ReplicaSet has
// yet to create.
func IsExpected(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[ExpectedPodAnnotation]
	return ok
}

// Anticipatable reports whether pod's siblings can be planned for before
// they exist: it is owned by a ReplicaSet and carries no volume whose claim
// is per pod (a generic ephemeral volume's claim is named after the pod, so
// a copy would point at a claim that never exists).
func Anticipatable(pod *corev1.Pod) (types.UID, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return "", false
	}
	for _, v := range pod.Spec.Volumes {
		if v.Ephemeral != nil {
			return "", false
		}
	}
	return ref.UID, true
}

// ExpectedPods returns the pods the ReplicaSets of this round's pending pods
// are about to create: spec.replicas minus the live pods the cache shows.
//
// A Deployment scaled to 500 gets its pods over several seconds, because the
// ReplicaSet controller creates them under its client rate limit. Planning
// only for the pods that exist so far would either wait for the last one
// (the batch window stays open while pods keep arriving) or split the work
// into several rounds whose plans cannot see each other. The missing pods are
// copies of a pending sibling, not of the ReplicaSet's template, so that
// whatever admission added to the real pods (LimitRange defaults, injected
// sidecars) is planned for too.
//
// A ReplicaSet that reports ReplicaFailure (quota, a rejecting webhook) is
// left alone: its pods may never come. Pods that never come cost nothing
// more than capacity consolidation later removes.
func ExpectedPods(ctx context.Context, view View, all []*corev1.Pod, pending []*corev1.Pod) ([]*corev1.Pod, error) {
	// One pending pod per ReplicaSet serves as the model for its siblings:
	// the last by name, so that the copies (named after it) sort after
	// every real sibling. The solver breaks ties by name, so when a limit
	// leaves room for only some of them, the real pods get it and the
	// copies get the refusal, which no one sees.
	models := map[types.UID]*corev1.Pod{}
	for _, pod := range pending {
		if uid, ok := Anticipatable(pod); ok {
			if m, seen := models[uid]; !seen || pod.Name > m.Name {
				models[uid] = pod
			}
		}
	}
	if len(models) == 0 {
		return nil, nil
	}
	live := map[types.UID]int32{}
	for _, pod := range all {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || models[ref.UID] == nil {
			continue
		}
		// The ReplicaSet controller counts the same pods as active.
		if pod.DeletionTimestamp.IsZero() && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			live[ref.UID]++
		}
	}
	uids := make([]types.UID, 0, len(models))
	for uid := range models {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })

	var out []*corev1.Pod
	for _, uid := range uids {
		model := models[uid]
		ref := metav1.GetControllerOf(model)
		rs, err := view.ReplicaSet(ctx, model.Namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		if rs == nil || rs.UID != uid || !rs.DeletionTimestamp.IsZero() || rs.Spec.Replicas == nil || replicaFailure(rs) {
			continue
		}
		for i := live[uid]; i < *rs.Spec.Replicas; i++ {
			out = append(out, ExpectedPod(model, int(i)))
		}
	}
	return out, nil
}

func replicaFailure(rs *appsv1.ReplicaSet) bool {
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// ExpectedPod is a placeholder for the i-th missing sibling of model. The
// name and UID are derived from the model so that planning is deterministic.
// The spec is shared with the model: the solver only reads pods.
func ExpectedPod(model *corev1.Pod, i int) *corev1.Pod {
	ann := make(map[string]string, len(model.Annotations)+1)
	for k, v := range model.Annotations {
		ann[k] = v
	}
	ann[ExpectedPodAnnotation] = model.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         model.Namespace,
			Name:              fmt.Sprintf("%s-expected-%d", model.Name, i),
			UID:               types.UID(fmt.Sprintf("%s-expected-%d", model.UID, i)),
			Labels:            model.Labels,
			Annotations:       ann,
			OwnerReferences:   model.OwnerReferences,
			CreationTimestamp: model.CreationTimestamp,
		},
		Spec:   model.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// VirtualPodAnnotation marks a CapacityBuffer's virtual pod (upstream's
// karpenter.sh/capacity-buffer-fake-pod): a pod that does not exist, planned
// for so that room is kept for it.
const VirtualPodAnnotation = "karpenter.sh/capacity-buffer-fake-pod"

// IsVirtual reports whether pod is a CapacityBuffer's virtual pod.
func IsVirtual(pod *corev1.Pod) bool {
	return pod.Annotations[VirtualPodAnnotation] == "true"
}
