package provisioning_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// TestWhyPlanned checks the kinds the "computed new nodeclaim(s)" line
// counts a round's pods by: only pods the kube-scheduler marked
// Unschedulable or that still run on a leaving node are pods upstream's
// provisioner plans for too.
func TestWhyPlanned(t *testing.T) {
	cond := func(status corev1.ConditionStatus, reason string) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodScheduled, Status: status, Reason: reason}}
	}
	model := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"no PodScheduled condition yet", &corev1.Pod{}, "untried"},
		{"marked Unschedulable", &corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}}, "unschedulable"},
		{"PodScheduled=False for another reason", &corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionFalse, "SchedulingGated")}}, "untried"},
		// A pod on a leaving node reaches the round with spec.nodeName
		// cleared; its condition still says it was scheduled.
		{"copied off a leaving node", &corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionTrue, "")}}, "leaving"},
		{"a ReplicaSet's pod yet to be created", snapshot.ExpectedPod(model, 3), "expected"},
		{"a CapacityBuffer's virtual pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{snapshot.VirtualPodAnnotation: "true"}}}, "buffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, provisioning.WhyPlanned(tc.pod))
		})
	}
}
