package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestDedupeRecorder: the recorder sends what upstream's would, by reason:
// identical events once per window, some reasons once per object whatever
// the message, and nominations rate-limited across pods.
func TestDedupeRecorder(t *testing.T) {
	pod := func(uid string) runtime.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "claim-uid"}}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
	type event struct {
		after   time.Duration // since the previous event
		obj     runtime.Object
		reason  string
		message string
	}
	for _, tc := range []struct {
		name   string
		events []event
		want   int
	}{
		{"an identical event is sent once in 2 minutes", []event{
			{0, node, "Evicted", "m"}, {time.Minute, node, "Evicted", "m"}, {59 * time.Second, node, "Evicted", "m"},
		}, 1},
		{"and again after 2 minutes", []event{
			{0, node, "Evicted", "m"}, {2 * time.Minute, node, "Evicted", "m"},
		}, 2},
		{"another message is another event", []event{
			{0, node, "Evicted", "a"}, {0, node, "Evicted", "b"},
		}, 2},
		{"another object is another event", []event{
			{0, node, "DisruptionTerminating", "m"}, {0, claim, "DisruptionTerminating", "m"},
		}, 2},
		{"a node's blocker once in 2 minutes whatever it says", []event{
			{0, node, "DisruptionBlocked", "pod a has do-not-disrupt"}, {10 * time.Second, node, "DisruptionBlocked", "pdb b prevents"},
			{10 * time.Second, claim, "DisruptionBlocked", "pdb b prevents"}, {2 * time.Minute, node, "DisruptionBlocked", "pdb b prevents"},
		}, 3},
		{"a NodePool's budget block per message, once a minute", []event{
			{0, pool, "DisruptionBlocked", "for reason Drifted"}, {0, pool, "DisruptionBlocked", "for reason Empty"},
			{30 * time.Second, pool, "DisruptionBlocked", "for reason Drifted"}, {30 * time.Second, pool, "DisruptionBlocked", "for reason Drifted"},
		}, 3},
		{"unconsolidatable once in 15 minutes", []event{
			{0, node, "Unconsolidatable", "a"}, {5 * time.Minute, node, "Unconsolidatable", "b"},
			{9 * time.Minute, node, "Unconsolidatable", "b"}, {time.Minute, node, "Unconsolidatable", "b"},
		}, 2},
		{"a pod fails to schedule once in 5 minutes", []event{
			{0, pod("a"), "FailedScheduling", "x"}, {4 * time.Minute, pod("a"), "FailedScheduling", "y"}, {time.Minute, pod("a"), "FailedScheduling", "y"},
		}, 2},
		{"a pod is nominated once in 2 minutes wherever", []event{
			{0, pod("a"), "Nominated", "Pod should schedule on: nodeclaim/x"},
			{time.Second, pod("a"), "Nominated", "Pod should schedule on: nodeclaim/x, node/y"},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			sink := record.NewFakeRecorder(100)
			r := newDedupeRecorder(sink, clk, 0)
			for _, e := range tc.events {
				clk.Step(e.after)
				r.Eventf(e.obj, corev1.EventTypeNormal, e.reason, "%s", e.message)
			}
			assert.Len(t, sink.Events, tc.want)
		})
	}
}

// TestDedupeWindowOverride: --event-dedupe-window replaces every reason's
// window, FailedScheduling's 5 minutes included.
func TestDedupeWindowOverride(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	sink := record.NewFakeRecorder(10)
	r := newDedupeRecorder(sink, clk, 5*time.Second)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "p-uid"}}
	r.Event(pod, corev1.EventTypeWarning, "FailedScheduling", "x")
	clk.Step(4 * time.Second)
	r.Event(pod, corev1.EventTypeWarning, "FailedScheduling", "x")
	assert.Len(t, sink.Events, 1, "within the window")
	clk.Step(2 * time.Second)
	r.Event(pod, corev1.EventTypeWarning, "FailedScheduling", "x")
	assert.Len(t, sink.Events, 2, "past the window")
}

// TestNominationRateLimit: nominations of many pods at once go out at
// upstream's rate, a burst of 10 then 5 per second.
func TestNominationRateLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	sink := record.NewFakeRecorder(1000)
	r := newDedupeRecorder(sink, clk, 0)
	nominate := func(from, to int) {
		for i := from; i < to; i++ {
			r.Event(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID(rune('a' + i))}}, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/x")
		}
	}
	nominate(0, 100)
	assert.Len(t, sink.Events, 10, "the burst")
	clk.Step(time.Second)
	nominate(100, 200)
	assert.Len(t, sink.Events, 15, "a second later, 5 more")
}
