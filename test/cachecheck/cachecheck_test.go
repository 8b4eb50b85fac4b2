package cachecheck_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/test/cachecheck"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// TestDetector: a write into an object the informer cache holds is
// reported; an object the cache replaced on a watch update is not, however
// much the new one differs from the recorded copy.
func TestDetector(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cache.New(cp.Config, cache.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	go func() { _ = c.Start(ctx) }()
	require.True(t, c.WaitForCacheSync(ctx))

	// cached is the informer store's own Node (a Get, even with
	// UnsafeDisableDeepCopy, copies the struct and shares only its maps and
	// slices; the snapshots hand out the store's pods themselves).
	inf, err := c.GetInformer(ctx, &corev1.Node{})
	require.NoError(t, err)
	store := inf.(interface{ GetStore() toolscache.Store }).GetStore()
	cached := func(t *testing.T, name string) *corev1.Node {
		var n *corev1.Node
		require.Eventually(t, func() bool {
			o, ok, err := store.GetByKey(name)
			n, _ = o.(*corev1.Node)
			return err == nil && ok && n != nil
		}, 10*time.Second, 20*time.Millisecond)
		return n
	}
	tests := []struct {
		name string
		// act runs between Record and Check on the cache's own Node.
		act  func(t *testing.T, n *corev1.Node)
		want string // a substring of the one finding; empty for none
	}{
		{
			name: "untouched",
			act:  func(*testing.T, *corev1.Node) {},
		},
		{
			name: "label written into the cached map",
			act:  func(_ *testing.T, n *corev1.Node) { n.Labels["team"] = "b" },
			want: "team",
		},
		{
			name: "taint appended to the cached object",
			act: func(_ *testing.T, n *corev1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "leaving", Effect: corev1.TaintEffectNoSchedule})
			},
			want: "leaving",
		},
		{
			name: "status field set before a patch",
			act:  func(_ *testing.T, n *corev1.Node) { n.Status.Phase = corev1.NodeTerminated },
			want: "Terminated",
		},
		{
			name: "replaced by a watch update",
			act: func(t *testing.T, n *corev1.Node) {
				updated := n.DeepCopy()
				updated.Labels["team"] = "c"
				require.NoError(t, cp.Client.Update(ctx, updated))
				require.Eventually(t, func() bool {
					got := &corev1.Node{}
					return c.Get(ctx, client.ObjectKeyFromObject(n), got) == nil && got.Labels["team"] == "c"
				}, 10*time.Second, 20*time.Millisecond)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "cachecheck-" + strings.ReplaceAll(tt.name, " ", "-")
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}}}
			require.NoError(t, cp.Client.Create(ctx, node))
			t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), node) })
			n := cached(t, name)

			d := cachecheck.New(c, &corev1.Node{})
			require.NoError(t, d.Record(ctx))
			tt.act(t, n)
			found, err := d.Check(ctx)
			require.NoError(t, err)
			if tt.want == "" {
				assert.Empty(t, found)
				return
			}
			require.Len(t, found, 1, "findings: %v", found)
			assert.Contains(t, found[0], name)
			assert.Contains(t, found[0], tt.want)
		})
	}
}
