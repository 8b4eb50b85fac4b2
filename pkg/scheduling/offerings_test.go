package scheduling_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

func TestOfferingCompatible(t *testing.T) {
	spotA := &scheduling.Offering{Zone: "a", CapacityType: "spot"}
	reserved := &scheduling.Offering{Zone: "a", CapacityType: "reserved", ReservationID: "cr-1"}
	extra := &scheduling.Offering{Zone: "a", CapacityType: "on-demand",
		Requirements: scheduling.NewRequirements(scheduling.NewRequirement("example.com/rack", scheduling.OpIn, "r1"))}
	req := func(k, op string, v ...string) scheduling.Requirement { return scheduling.NewRequirement(k, op, v...) }
	tests := []struct {
		name string
		o    *scheduling.Offering
		reqs scheduling.Requirements
		want bool
	}{
		{"unconstrained", spotA, scheduling.NewRequirements(), true},
		{"zone matches", spotA, scheduling.NewRequirements(req(scheduling.LabelZone, scheduling.OpIn, "a", "b")), true},
		{"zone differs", spotA, scheduling.NewRequirements(req(scheduling.LabelZone, scheduling.OpIn, "b")), false},
		{"capacity type excluded", spotA, scheduling.NewRequirements(req(scheduling.LabelCapacityType, scheduling.OpNotIn, "spot")), false},
		{"reservation allowed", reserved, scheduling.NewRequirements(req(scheduling.LabelReservationID, scheduling.OpIn, "cr-1")), true},
		{"reservation excluded", reserved, scheduling.NewRequirements(req(scheduling.LabelReservationID, scheduling.OpIn, "cr-2")), false},
		{"extra requirement matches", extra, scheduling.NewRequirements(req("example.com/rack", scheduling.OpIn, "r1")), true},
		{"extra requirement conflicts", extra, scheduling.NewRequirements(req("example.com/rack", scheduling.OpIn, "r2")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, scheduling.OfferingCompatible(tt.o, tt.reqs))
		})
	}

	reqs := scheduling.OfferingRequirements(reserved)
	assert.Equal(t, []string{"cr-1"}, reqs.Get(scheduling.LabelReservationID).Values())
	assert.Equal(t, []string{"reserved"}, reqs.Get(scheduling.LabelCapacityType).Values())
	assert.Equal(t, []string{"a"}, reqs.Get(scheduling.LabelZone).Values())
}

// Narrow keeps the instance-type requirement (and its minValues) in step,
// and prices the NodeClaim as the solver does: the cheapest available
// offering of its first type compatible with its requirements.
func TestNarrow(t *testing.T) {
	offer := func(zone, ct string, price float64, available bool) scheduling.Offering {
		return scheduling.Offering{Zone: zone, CapacityType: ct, Price: price, Available: available}
	}
	small := &scheduling.InstanceType{Name: "small", Offerings: []scheduling.Offering{
		offer("a", "spot", 0.05, false), offer("a", "on-demand", 0.10, true), offer("b", "on-demand", 0.08, true)}}
	big := &scheduling.InstanceType{Name: "big", Offerings: []scheduling.Offering{offer("a", "on-demand", 0.20, true)}}
	typeReq := scheduling.NewRequirement(scheduling.LabelInstanceType, scheduling.OpIn, "small", "big", "huge")
	typeReq.MinValues = 2
	nc := &scheduling.NewNodeClaim{Requirements: scheduling.NewRequirements(typeReq,
		scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, "a"))}
	nc.Narrow([]*scheduling.InstanceType{small, big})
	got := nc.Requirements.Get(scheduling.LabelInstanceType)
	assert.ElementsMatch(t, []string{"small", "big"}, got.Values())
	assert.Equal(t, 2, got.MinValues)
	assert.Equal(t, 0.10, nc.Price, "zone a, available only")
	assert.True(t, math.IsInf(big.CheapestPrice(scheduling.NewRequirements(scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, "b"))), 1))

	price, ok := small.PriceFor(map[string]string{corev1.LabelTopologyZone: "a", "karpenter.sh/capacity-type": "spot"})
	assert.True(t, ok)
	assert.Equal(t, 0.05, price, "a running node is priced by its offering, available or not")
	_, ok = small.PriceFor(map[string]string{corev1.LabelTopologyZone: "c"})
	assert.False(t, ok)
}

func TestTolerates(t *testing.T) {
	taint := &corev1.Taint{Key: "k", Value: "5", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		tol  corev1.Toleration
		want bool
	}{
		{"exists, any key", corev1.Toleration{Operator: corev1.TolerationOpExists}, true},
		{"exists, key", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists}, true},
		{"equal", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "5"}, true},
		{"empty operator is Equal", corev1.Toleration{Key: "k", Value: "5"}, true},
		{"other value", corev1.Toleration{Key: "k", Value: "6"}, false},
		{"other effect", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, false},
		// As the kube-scheduler with TaintTolerationComparisonOperators off
		// (its default): a comparison tolerates nothing.
		{"Gt", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpGt, Value: "4"}, false},
		{"Lt", corev1.Toleration{Key: "k", Operator: corev1.TolerationOpLt, Value: "6"}, false},
	} {
		assert.Equal(t, tc.want, scheduling.Tolerates([]corev1.Toleration{tc.tol}, taint), tc.name)
	}
}

func TestStaticPodAndFits(t *testing.T) {
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}
	nodeOwned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "Node", Name: "n"}}}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "r"}}}}
	assert.True(t, scheduling.IsStaticPod(mirror))
	assert.True(t, scheduling.IsStaticPod(nodeOwned))
	assert.False(t, scheduling.IsStaticPod(plain))

	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	assert.True(t, scheduling.Fits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, alloc))
	assert.False(t, scheduling.Fits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2001m")}, alloc))
	assert.True(t, scheduling.Fits(corev1.ResourceList{"example.com/gpu": resource.MustParse("0")}, alloc), "a zero request of a missing resource fits")
	assert.False(t, scheduling.Fits(corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}, alloc))
}
