package provisioning

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

func TestReservations(t *testing.T) {
	rsRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: ptrTo(true)}
	pod := func(name string, owned bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{rsRef}
		}
		return p
	}
	model := pod("web-a", true)
	solo, webA := pod("solo", false), model
	e0, e1, e2 := snapshot.ExpectedPod(model, 1), snapshot.ExpectedPod(model, 2), snapshot.ExpectedPod(model, 3)

	// Round 1: solo and web-a on a new NodeClaim, two expected web pods
	// split between it and an in-flight NodeClaim already known as a node;
	// a third expected pod fit nowhere.
	res := &scheduling.Result{Placements: []scheduling.Placement{
		{Pod: solo, NodeClaim: 0},
		{Pod: webA, NodeClaim: 0},
		{Pod: e0, NodeClaim: 0},
		{Pod: e1, Node: "nc-old", NodeClaim: -1},
		{Pod: e2, NodeClaim: -1},
	}}
	created := []*v1.NodeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "nc-new"}}}
	var r reservations
	r.record(res, map[string]string{"nc-old": "nc-old"}, created)

	// Round 2: nc-new registered as node "ip-1"; the ReplicaSet created
	// web-b and web-c, and one pod is still expected. Reservations follow
	// the NodeClaim to its node; the ReplicaSet's two places go to its pods
	// by name, existing ones first; the pod beyond its places is free.
	nodes := []*scheduling.ExistingNode{{Name: "ip-1", NodeClaim: "nc-new"}, {Name: "nc-old", NodeClaim: "nc-old"}}
	webB, webC, e3 := pod("web-b", true), pod("web-c", true), snapshot.ExpectedPod(model, 9)
	got := r.nominations([]*corev1.Pod{e3, webC, webB, webA, solo}, nodes)
	assert.Equal(t, map[types.UID]string{
		solo.UID: "ip-1",
		webA.UID: "ip-1",
		webB.UID: "ip-1",
		webC.UID: "nc-old",
	}, got)

	// A NodeClaim that is gone takes its reservations with it.
	got = r.nominations([]*corev1.Pod{solo, webB}, []*scheduling.ExistingNode{{Name: "nc-old", NodeClaim: "nc-old"}})
	assert.Equal(t, map[types.UID]string{webB.UID: "nc-old"}, got)

	// Each round replaces the reservations: nothing placed, nothing kept.
	r.record(&scheduling.Result{}, nil, nil)
	assert.Nil(t, r.nominations([]*corev1.Pod{solo, webB}, nodes))
}

func ptrTo[T any](v T) *T { return &v }
