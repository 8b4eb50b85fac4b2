package disruption_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	pure "github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

func TestEmptyNodeIsDeleted(t *testing.T) {
	e := newEnv(t, nil, "100%")
	empty, emptyNode := e.managedNode(consolidatable)
	busy, _ := e.managedNode(consolidatable)
	busyNode := e.node(busy.Name)
	e.pod(busyNode, "app", nil)

	require.True(t, e.reconcile(), "the pass starts a command")
	assert.True(t, hasTaint(e.node(emptyNode.Name)))
	assert.Equal(t, "Empty", disruptionReason(e.nodeClaim(empty.Name)))
	sn, ok := e.cluster.Node(emptyNode.Name)
	require.True(t, ok)
	assert.True(t, sn.MarkedForDeletion())
	assert.True(t, e.ctrl.Queue().Has(empty.Name))

	e.step(0)
	got := &v1.NodeClaim{}
	err := cp.Client.Get(e.ctx, client.ObjectKey{Name: empty.Name}, got)
	assert.True(t, isGoneOrDeleting(err, got), "an empty command deletes its NodeClaim at once")
	assert.Zero(t, e.ctrl.Queue().Len())
	assert.NotEmpty(t, e.events.Events(disruption.ReasonDisruptionTerminating))

	// The busy node is untouched.
	assert.False(t, hasTaint(e.node(busy.Name)))
	assert.True(t, e.nodeClaim(busy.Name).DeletionTimestamp.IsZero())
}

func TestDriftedNodeIsReplacedFirst(t *testing.T) {
	e := newEnv(t, nil, "100%")
	old, oldNode := e.managedNode(drifted)
	e.pod(oldNode, "app", nil)
	e.sim.newClaims = []*scheduling.NewNodeClaim{{NodePool: e.pool.Name, Requirements: onDemand(t)}}

	require.True(t, e.reconcile())
	assert.Equal(t, 1, e.sim.calls)
	assert.True(t, hasTaint(e.node(oldNode.Name)))
	assert.Equal(t, "Drifted", disruptionReason(e.nodeClaim(old.Name)))

	// The replacement exists, launched the provisioner's way.
	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(e.ctx, list))
	var replacement *v1.NodeClaim
	for i := range list.Items {
		if list.Items[i].Name != old.Name {
			replacement = &list.Items[i]
		}
	}
	require.NotNil(t, replacement, "a replacement NodeClaim is created")
	assert.Equal(t, e.pool.Name, replacement.Labels[v1.NodePoolLabelKey])
	assert.NotEmpty(t, replacement.Annotations[v1.NodePoolHashAnnotationKey])
	assert.NotEmpty(t, e.events.Events(disruption.ReasonDisruptionLaunching))

	// Not initialized yet: the old one stays.
	e.step(time.Second)
	e.step(2 * time.Second)
	assert.True(t, e.nodeClaim(old.Name).DeletionTimestamp.IsZero(), "the candidate waits for its replacement")
	assert.NotEmpty(t, e.events.Events(disruption.ReasonDisruptionWaitingReadiness))
	// A second pass does not pick the same node again.
	assert.False(t, e.reconcile())
	assert.Equal(t, 1, e.ctrl.Queue().Len())

	replacement.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeInitialized, Status: "True", Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, replacement))
	e.step(10 * time.Second)
	got := &v1.NodeClaim{}
	err := cp.Client.Get(e.ctx, client.ObjectKey{Name: old.Name}, got)
	assert.True(t, isGoneOrDeleting(err, got), "once the replacement is initialized the candidate is deleted")
	assert.Zero(t, e.ctrl.Queue().Len())
}

func TestRollbackWhenReplacementIsDeleted(t *testing.T) {
	e := newEnv(t, nil, "100%")
	old, oldNode := e.managedNode(drifted)
	e.pod(oldNode, "app", nil)
	e.sim.newClaims = []*scheduling.NewNodeClaim{{NodePool: e.pool.Name, Requirements: onDemand(t)}}
	require.True(t, e.reconcile())

	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(e.ctx, list))
	for i := range list.Items {
		if list.Items[i].Name != old.Name {
			require.NoError(t, cp.Client.Delete(e.ctx, &list.Items[i]))
		}
	}
	e.step(6 * time.Second)
	assert.Zero(t, e.ctrl.Queue().Len(), "the failed command leaves the queue")
	assert.False(t, hasTaint(e.node(oldNode.Name)), "rollback untaints")
	assert.Empty(t, disruptionReason(e.nodeClaim(old.Name)), "rollback clears the condition")
	sn, ok := e.cluster.Node(oldNode.Name)
	require.True(t, ok)
	assert.False(t, sn.MarkedForDeletion(), "rollback unmarks")
	assert.True(t, e.nodeClaim(old.Name).DeletionTimestamp.IsZero())
}

func TestRollbackWhenLaunchFails(t *testing.T) {
	e := newEnv(t, failingLauncher{}, "100%")
	old, oldNode := e.managedNode(drifted)
	e.pod(oldNode, "app", nil)
	e.sim.newClaims = []*scheduling.NewNodeClaim{{NodePool: e.pool.Name, Requirements: onDemand(t)}}
	_, err := e.ctrl.Reconcile(e.ctx)
	require.Error(t, err)
	e.sync()
	assert.Zero(t, e.ctrl.Queue().Len())
	assert.False(t, hasTaint(e.node(oldNode.Name)))
	assert.Empty(t, disruptionReason(e.nodeClaim(old.Name)))
}

func TestDriftSkippedWhenPodsWouldNotFit(t *testing.T) {
	e := newEnv(t, nil, "100%")
	_, oldNode := e.managedNode(drifted)
	e.pod(oldNode, "app", nil)
	e.sim.unschedulable = true
	assert.False(t, e.reconcile())
	assert.False(t, hasTaint(e.node(oldNode.Name)))
	blocked := e.events.Events(disruption.ReasonDisruptionBlocked)
	require.NotEmpty(t, blocked)
	assert.Contains(t, blocked[0].Message, "default/moved")
}

func TestStaleTaintsAndConditionsAreCleaned(t *testing.T) {
	e := newEnv(t, nil, "0")
	stale, staleNode := e.managedNode(tainted, conditionOpt(v1.ConditionTypeDisruptionReason))
	// A deleting node keeps its taint: termination owns it.
	leaving, _ := e.managedNode(tainted)
	require.NoError(t, cp.Client.Delete(e.ctx, e.node(leaving.Name)))
	e.sync()

	assert.False(t, e.reconcile(), "budget 0: nothing to do but clean up")
	assert.False(t, hasTaint(e.node(staleNode.Name)))
	assert.Empty(t, disruptionReason(e.nodeClaim(stale.Name)))
	assert.True(t, hasTaint(e.node(leaving.Name)))
}

func TestBlockedCandidatesGetEvents(t *testing.T) {
	e := newEnv(t, nil, "100%")
	_, node := e.managedNode(consolidatable)
	e.pod(node, "precious", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
	_, other := e.managedNode(consolidatable)
	e.pod(other, "odd", map[string]string{v1.DoNotDisruptAnnotationKey: "later"})
	_, graced := e.managedNode(consolidatable)
	young := e.pod(graced, "young", map[string]string{v1.DoNotDisruptAnnotationKey: "1h"})
	e.pod(graced, "old", map[string]string{v1.DoNotDisruptAnnotationKey: "1s"})
	// Past the old pod's second (the fake clock starts before the pods).
	e.clock.SetTime(young.CreationTimestamp.Add(time.Minute))
	e.reconcile()

	onNode := e.events.Messages(disruption.ReasonDisruptionBlocked, node.Name)
	require.NotEmpty(t, onNode)
	assert.Contains(t, onNode[0], e.ns+"/precious")
	invalid := e.events.Events(disruption.ReasonInvalidDoNotDisruptAnnotation)
	require.Len(t, invalid, 1)
	assert.Equal(t, "odd", invalid[0].Object)
	// A duration annotation: still protecting, with when it ends, or over.
	until := e.events.Events(disruption.ReasonDoNotDisruptUntil)
	require.Len(t, until, 1)
	assert.Equal(t, "young", until[0].Object)
	assert.Equal(t, "The karpenter.sh/do-not-disrupt grace period will elapse at "+young.CreationTimestamp.Add(time.Hour).UTC().Format(time.RFC3339), until[0].Message)
	elapsed := e.events.Events(disruption.ReasonDoNotDisruptGracePeriodElapsed)
	require.Len(t, elapsed, 1)
	assert.Equal(t, "old", elapsed[0].Object)
	assert.Equal(t, "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable", elapsed[0].Message)
	// Repeated passes do not repeat identical events.
	e.reconcile()
	assert.Len(t, e.events.Events(disruption.ReasonInvalidDoNotDisruptAnnotation), 1)
	assert.Len(t, e.events.Events(disruption.ReasonDoNotDisruptUntil), 1)
}

func TestBudgetZeroBlocksWithPoolEvent(t *testing.T) {
	e := newEnv(t, nil, "0")
	nc, node := e.managedNode(consolidatable)
	assert.False(t, e.reconcile())
	assert.False(t, hasTaint(e.node(node.Name)))
	assert.True(t, e.nodeClaim(nc.Name).DeletionTimestamp.IsZero())
	var onPool bool
	for _, ev := range e.events.Events(disruption.ReasonDisruptionBlocked) {
		onPool = onPool || ev.Object == e.pool.Name
	}
	assert.True(t, onPool, "a fully blocked pool gets DisruptionBlocked")
}

func onDemand(t *testing.T) scheduling.Requirements {
	reqs, err := scheduling.RequirementsFromMinValues([]scheduling.RequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: "In", Values: []string{"on-demand"}}})
	require.NoError(t, err)
	return reqs
}

// drainingStrategy is upstream's consolidation asking to drain names.
type drainingStrategy struct {
	pure.Strategy
	names []string
}

func (d drainingStrategy) Drain([]*pure.Command) []string { return d.names }

func draining(names ...string) pure.Strategy {
	return drainingStrategy{Strategy: pure.NewUpstream(pure.ConsolidationOptions{}), names: names}
}

// TestDrainTaintFollowsTheStrategy: after a pass the nodes the strategy
// asks to drain carry the drain taint and no other node does; under a
// strategy that drains nothing every drain taint is taken off.
func TestDrainTaintFollowsTheStrategy(t *testing.T) {
	e := newEnv(t, nil, "0")
	_, a := e.managedNode()
	_, b := e.managedNode(func(_ *v1.NodeClaim, n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, pure.DrainTaint) })
	want := []string{a.Name}
	ctrl := disruption.NewController(cp.Client, e.cluster, failingLauncher{}, simulating(e.sim), disruption.Options{
		Clock: e.clock, Recorder: e.events, ValidationDelay: -1, Strategy: draining(want...),
	})
	drained := func(name string) bool { return hasDrainTaint(e.node(name)) }
	_, err := ctrl.Reconcile(e.ctx)
	require.NoError(t, err)
	e.sync()
	assert.True(t, drained(a.Name), "the strategy drains %s", a.Name)
	assert.False(t, drained(b.Name), "%s is no longer drained", b.Name)

	without := disruption.NewController(cp.Client, e.cluster, failingLauncher{}, simulating(e.sim), disruption.Options{
		Clock: e.clock, Recorder: e.events, ValidationDelay: -1,
	})
	_, err = without.Reconcile(e.ctx)
	require.NoError(t, err)
	e.sync()
	assert.False(t, drained(a.Name), "under upstream's strategy no node is drained")
}

// TestDrainDeletionCost: the ReplicaSet pods on a drained node get
// pure.DrainDeletionCost (a pod whose cost someone else set keeps it,
// a pod no ReplicaSet controls gets none); a pod off a drained node loses
// the cost the controller set, as every pod does with the option off.
func TestDrainDeletionCost(t *testing.T) {
	e := newEnv(t, nil, "0")
	_, a := e.managedNode()
	_, b := e.managedNode()
	yes := true
	owned := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "web-uid", Controller: &yes}}
	}
	pod := func(node *corev1.Node, name string, annotations map[string]string, opts ...func(*corev1.Pod)) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: annotations},
			Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		for _, o := range opts {
			o(p)
		}
		require.NoError(t, cp.Client.Create(e.ctx, p))
		e.cluster.UpdatePod(p)
	}
	pod(a, "mine", nil, owned)
	pod(a, "theirs", map[string]string{corev1.PodDeletionCost: "5"}, owned)
	pod(a, "bare", nil)
	pod(b, "left", map[string]string{corev1.PodDeletionCost: "-1000", pure.DeletionCostMark: "-1000"}, owned)
	annotations := func(name string) map[string]string {
		p := &corev1.Pod{}
		require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, p))
		e.cluster.UpdatePod(p)
		return p.Annotations
	}
	pass := func(on bool) {
		ctrl := disruption.NewController(cp.Client, e.cluster, failingLauncher{}, simulating(e.sim), disruption.Options{
			Clock: e.clock, Recorder: e.events, ValidationDelay: -1, Strategy: draining(a.Name),
			DrainDeletionCost: on,
		})
		_, err := ctrl.Reconcile(e.ctx)
		require.NoError(t, err)
		for _, name := range []string{"mine", "theirs", "bare", "left"} {
			annotations(name) // state sees the patches, as the informer would
		}
	}

	pass(true)
	assert.Equal(t, map[string]string{corev1.PodDeletionCost: "-1000", pure.DeletionCostMark: "-1000"}, annotations("mine"))
	assert.Equal(t, map[string]string{corev1.PodDeletionCost: "5"}, annotations("theirs"))
	assert.Empty(t, annotations("bare"))
	assert.Empty(t, annotations("left"), "off a drained node the cost goes")

	pass(false)
	assert.Empty(t, annotations("mine"), "with the option off the cost goes")
	assert.Equal(t, map[string]string{corev1.PodDeletionCost: "5"}, annotations("theirs"))
}
