package provisioning

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// plannedFor is why a round planned for a pod. The round's log line that
// announces new NodeClaims counts their pods by it: whether capacity was
// bought for pods the kube-scheduler already failed to place (as upstream
// does) or ahead of it, which is what tells a launch upstream would also
// make from one only our anticipation makes.
type plannedFor string

const (
	// forUnschedulable: the kube-scheduler marked the pod Unschedulable.
	forUnschedulable plannedFor = "unschedulable"
	// forUntried: the kube-scheduler has not tried the pod yet.
	forUntried plannedFor = "untried"
	// forExpected: a pod its ReplicaSet has yet to create.
	forExpected plannedFor = "expected"
	// forLeaving: the pod still runs on a node being disrupted or deleted.
	forLeaving plannedFor = "leaving"
	// forBuffer: a CapacityBuffer's virtual pod.
	forBuffer plannedFor = "buffer"
)

// plannedForOrder is the order the log line lists the kinds in.
var plannedForOrder = []plannedFor{forUnschedulable, forUntried, forExpected, forLeaving, forBuffer}

// whyPlanned classifies one of a round's pods. A pod on a leaving node
// reaches the round as a copy with spec.nodeName cleared; its
// PodScheduled=True condition is what still tells it apart from a pending
// pod.
func whyPlanned(pod *corev1.Pod) plannedFor {
	switch {
	case snapshot.IsVirtual(pod):
		return forBuffer
	case snapshot.IsExpected(pod):
		return forExpected
	case snapshot.FailedToSchedule(pod):
		return forUnschedulable
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return forLeaving
		}
	}
	return forUntried
}

// logNewNodeClaims announces a round's new NodeClaims with their pods
// counted by why they were planned for, and at debug level names them. The
// names are built only when debug logging is on: a burst plans thousands of
// pods a round.
func logNewNodeClaims(logger logr.Logger, claims []*scheduling.NewNodeClaim) {
	debug := logger.V(1).Enabled()
	counts := map[plannedFor]int{}
	names := map[plannedFor][]string{}
	pods := 0
	for _, nc := range claims {
		for _, pod := range nc.Pods {
			w := whyPlanned(pod)
			counts[w]++
			pods++
			if debug {
				names[w] = append(names[w], pod.Namespace+"/"+pod.Name)
			}
		}
	}
	if pods == 0 {
		return
	}
	kv := []any{"nodeclaims", len(claims), "pods", pods}
	for _, w := range plannedForOrder {
		if counts[w] > 0 {
			kv = append(kv, string(w), counts[w])
		}
	}
	logger.WithValues(kv...).Info("computed new nodeclaim(s) to fit pod(s)")
	for _, w := range plannedForOrder {
		if len(names[w]) > 0 {
			logger.V(1).Info("pods planned onto new nodeclaim(s)", "why", string(w), "Pods", prettySlice(names[w], 20))
		}
	}
}
