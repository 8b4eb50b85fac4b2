package staticpool

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

func TestPoolOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   []reconcile.Request
	}{
		{"labelled", map[string]string{v1.NodePoolLabelKey: "fixed"}, []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "fixed"}}}},
		{"no label", map[string]string{"other": "x"}, nil},
		{"empty label", map[string]string{v1.NodePoolLabelKey: ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", Labels: tc.labels}}
			assert.Equal(t, tc.want, PoolOf(context.Background(), nc))
		})
	}
}

func TestReplicas(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas *int64
		want     int64
	}{
		{"dynamic", nil, -1},
		{"zero", ptr.To[int64](0), 0},
		{"three", ptr.To[int64](3), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &v1.NodePool{}
			np.Spec.Replicas = tc.replicas
			assert.Equal(t, tc.want, Replicas(np))
		})
	}
}
