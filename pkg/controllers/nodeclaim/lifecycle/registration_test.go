package lifecycle_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestRegistrationKeepsAConcurrentTaint: another writer (a node controller
// adding a taint) writes the Node between registration's read and its
// write. The Node's taints are an atomic list, which any patch replaces
// whole, so registration writes them under an optimistic lock: its patch
// loses the race once and lands on the retry, keeping the other writer's
// taint. This is the lock the registration's Node 409s pay for.
func TestRegistrationKeepsAConcurrentTaint(t *testing.T) {
	e := newEnv(t)
	race := &nodeWriterRace{Client: cp.Client}
	e.withClient(race)
	nc := e.nodeClaim()
	e.reconcile(nc.Name) // launch
	node := e.kubeletNode(e.get(nc.Name))

	e.reconcile(nc.Name) // loses the race: a requeue, not an error
	require.Equal(t, 1, race.conflicts, "the stale write is refused")
	e.reconcile(nc.Name)
	requireCondition(t, e.get(nc.Name), v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.Equal(t, "true", node.Labels[v1.NodeRegisteredLabelKey])
	keys := taintKeys(node)
	require.Contains(t, keys, meanwhile.Key, "the other writer's taint survives")
	require.Contains(t, keys, "example.com/special")
	require.NotContains(t, keys, v1.UnregisteredTaintKey)
}

// meanwhile is the taint the other writer adds.
var meanwhile = corev1.Taint{Key: "example.com/meanwhile", Effect: corev1.TaintEffectNoSchedule}

// nodeWriterRace has another writer add a taint to the Node just before
// the controller's first patch of it, and counts the patches that conflict.
type nodeWriterRace struct {
	client.Client
	mu        sync.Mutex
	raced     bool
	conflicts int
}

func (c *nodeWriterRace) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.Node); !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.raced {
		c.raced = true
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
				return err
			}
			current.Spec.Taints = append(current.Spec.Taints, meanwhile)
			return c.Client.Update(ctx, current)
		}); err != nil {
			return err
		}
	}
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) {
		c.conflicts++
	}
	return err
}
