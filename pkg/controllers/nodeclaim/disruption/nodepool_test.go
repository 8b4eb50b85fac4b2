package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestNodePoolChangedIgnoresStatusWrites: the counter's status writes do
// not re-evaluate a pool's NodeClaims; spec, hash and deletion do.
func TestNodePoolChangedIgnoresStatusWrites(t *testing.T) {
	base := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3, ResourceVersion: "10",
		Annotations: map[string]string{v1.NodePoolHashAnnotationKey: "123"}}}
	tests := []struct {
		name   string
		change func(np *v1.NodePool)
		want   bool
	}{
		{"status only", func(np *v1.NodePool) {
			np.ResourceVersion = "11"
			np.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		}, false},
		{"spec (generation)", func(np *v1.NodePool) { np.Generation = 4 }, true},
		{"template hash", func(np *v1.NodePool) { np.Annotations = map[string]string{v1.NodePoolHashAnnotationKey: "456"} }, true},
		{"deleted", func(np *v1.NodePool) { np.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tt.change(updated)
			assert.Equal(t, tt.want, nodePoolChanged(event.UpdateEvent{ObjectOld: base, ObjectNew: updated}))
		})
	}
}
