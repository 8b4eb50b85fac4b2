package disruption_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	ctrltestutil "github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	pure "github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/strategies"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

const zone = "test-zone-a"

// itype is an instance type with cpu cores at $0.05 per core and hour,
// on-demand only, in one zone.
func itype(cpu int64) *scheduling.InstanceType {
	name := fmt.Sprintf("c.%dx", cpu)
	return &scheduling.InstanceType{
		Name: name,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(cpu*4<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, name),
			scheduling.NewRequirement(corev1.LabelArchStable, scheduling.OpIn, "amd64"),
			scheduling.NewRequirement(corev1.LabelOSStable, scheduling.OpIn, "linux"),
			scheduling.NewRequirement(corev1.LabelTopologyZone, scheduling.OpIn, zone),
			scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeOnDemand),
		),
		Offerings: []scheduling.Offering{{Zone: zone, CapacityType: v1.CapacityTypeOnDemand, Price: 0.05 * float64(cpu), Available: true}},
	}
}

// consolidationEnv is env with a controller that really simulates: the
// snapshot builder over the API server and cluster state, the fake cloud's
// catalog for pricing, and the 15 s validation on the fake clock.
type consolidationEnv struct {
	*env
	cloud    *fakecloud.Provider
	strategy *startRecorder
}

// startRecorder is a strategy that remembers the commands the controller
// told it started, and the NodeClaims each launched.
type startRecorder struct {
	pure.Strategy
	started  []*pure.Command
	launched [][]string
}

func (r *startRecorder) Started(now time.Time, cmds []*pure.Command, launched [][]string) {
	r.started = append(r.started, cmds...)
	r.launched = append(r.launched, launched...)
	r.Strategy.Started(now, cmds, launched)
}

// newConsolidationEnv runs upstream's strategy, or with planner the
// planner.
func newConsolidationEnv(t *testing.T, planner ...bool) *consolidationEnv {
	e := &consolidationEnv{env: newEnv(t, nil, "100%")}
	e.cloud = fakecloud.New(e.clock)
	e.cloud.Catalog = []*scheduling.InstanceType{itype(2), itype(4), itype(8), itype(16)}
	strategy := disruption.UpstreamStrategy(e.clock, false)
	if len(planner) > 0 && planner[0] {
		var err error
		strategy, err = strategies.New(strategies.Options{Algorithm: strategies.Planner})
		require.NoError(t, err)
	}
	launcher := provisioning.NewProvisioner(cp.Client, e.cloud, e.cluster, e.events, provisioning.Options{Clock: e.clock})
	sim := disruption.SimulateOver(snapshot.Live{Reader: cp.Client, Cloud: e.cloud, Cluster: e.cluster}, snapshot.Request{})
	e.strategy = &startRecorder{Strategy: strategy}
	e.ctrl = disruption.NewController(cp.Client, e.cluster, launcher, sim, disruption.Options{
		Clock: e.clock, Recorder: e.events, InstanceTypes: e.cloud,
		Strategy: e.strategy,
	})
	// The snapshot builder plans replacements only from Ready pools.
	e.pool.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, e.pool))
	return e
}

// typed gives the node an instance type's labels and allocatable, and
// dates its conditions a minute back on the fake clock (which runs behind
// the real one), so consolidateAfter has elapsed.
func (e *consolidationEnv) typed(it *scheduling.InstanceType) nodeOpt {
	return func(nc *v1.NodeClaim, n *corev1.Node) {
		for i := range nc.Status.Conditions {
			nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(e.clock.Now().Add(-time.Minute))
		}
		for _, obj := range []map[string]string{nc.Labels, n.Labels} {
			obj[corev1.LabelInstanceTypeStable] = it.Name
			obj[corev1.LabelTopologyZone] = zone
			obj[corev1.LabelArchStable] = "amd64"
			obj[corev1.LabelOSStable] = "linux"
		}
		n.Labels[corev1.LabelHostname] = n.Name
		alloc := corev1.ResourceList{}
		for res, q := range it.Capacity {
			q := q.DeepCopy()
			if o, ok := it.Overhead[res]; ok {
				q.Sub(o)
			}
			alloc[res] = q
		}
		n.Status.Capacity, n.Status.Allocatable = it.Capacity, alloc
	}
}

// typedNode is managedNode of type it, without the not-ready taint the
// API server's admission adds (no node lifecycle controller runs here to
// take it off).
func (e *consolidationEnv) typedNode(it *scheduling.InstanceType) (*v1.NodeClaim, *corev1.Node) {
	e.t.Helper()
	nc, _ := e.managedNode(consolidatable, e.typed(it))
	node := e.node(nc.Name)
	node.Spec.Taints = nil
	require.NoError(e.t, cp.Client.Update(e.ctx, node))
	e.sync()
	return nc, node
}

// busyPod binds a running pod with a cpu request to node.
func (e *consolidationEnv) busyPod(node *corev1.Node, name, cpu string) {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, p))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, p))
	e.cluster.UpdatePod(p)
}

// reconcileThroughValidation runs a pass in the background and, once it
// waits on the validation delay, runs during (to change the cluster) and
// then advances the fake clock past the delay.
func (e *consolidationEnv) reconcileThroughValidation(during func()) bool {
	e.t.Helper()
	return e.passThroughValidation(during).Started
}

// passThroughValidation is reconcileThroughValidation's pass, with what
// it did.
func (e *consolidationEnv) passThroughValidation(during func()) disruption.PassResult {
	e.t.Helper()
	done := e.passWaitingForValidation()
	if during != nil {
		during()
	}
	e.clock.Step(disruption.DefaultValidationDelay)
	got := <-done
	require.NoError(e.t, got.err)
	e.sync()
	return got.r
}

func TestUnderusedNodeIsDeletedAfterValidation(t *testing.T) {
	e := newConsolidationEnv(t)
	c8 := itype(8)
	light, lightNode := e.typedNode(c8)
	e.busyPod(lightNode, "small", "1")
	heavy, heavyNode := e.typedNode(c8)
	e.busyPod(heavyNode, "big-1", "3")
	e.busyPod(heavyNode, "big-2", "3")

	require.True(t, e.reconcileThroughValidation(nil), "the pass starts a command after validation")
	assert.True(t, hasTaint(e.node(light.Name)))
	assert.Equal(t, "Underutilized", disruptionReason(e.nodeClaim(light.Name)))
	assert.False(t, hasTaint(e.node(heavy.Name)), "the destination is untouched")

	e.step(0)
	got := &v1.NodeClaim{}
	err := cp.Client.Get(e.ctx, client.ObjectKey{Name: light.Name}, got)
	assert.True(t, isGoneOrDeleting(err, got), "a delete command deletes its NodeClaim at once")
	assert.Equal(t, 1, countNodeClaims(t, e), "no replacement was launched")
}

func TestConsolidationAbandonedWhenValidationFails(t *testing.T) {
	e := newConsolidationEnv(t)
	c8 := itype(8)
	light, lightNode := e.typedNode(c8)
	e.busyPod(lightNode, "small", "1")
	_, heavyNode := e.typedNode(c8)
	e.busyPod(heavyNode, "big-1", "3")
	e.busyPod(heavyNode, "big-2", "3")

	failed := func() float64 {
		m := &dto.Metric{}
		require.NoError(t, metrics.FailedValidationsTotal.WithLabelValues(pure.ConsolidationTypeSingle).Write(m))
		return m.GetCounter().GetValue()
	}
	before := failed()
	r := e.passThroughValidation(func() {
		// The kube-scheduler filled the destination meanwhile.
		e.busyPod(heavyNode, "late", "1")
	})
	assert.False(t, r.Started, "the command no longer holds and is abandoned")
	assert.True(t, r.Abandoned)
	assert.Zero(t, disruption.NextPass(e.ctrl, r, nil), "the next pass plans again at once, on the changed cluster")
	assert.Equal(t, before+1, failed(), "karpenter_voluntary_disruption_failed_validations_total counts it")
	assert.False(t, hasTaint(e.node(light.Name)))
	assert.Zero(t, e.ctrl.Queue().Len())
}

func TestNodeIsReplacedByACheaperOne(t *testing.T) {
	e := newConsolidationEnv(t)
	old, oldNode := e.typedNode(itype(16))
	e.busyPod(oldNode, "app", "1")
	logs := &ctrltestutil.Logs{}
	e.ctx = logs.Context(e.ctx)

	require.True(t, e.reconcileThroughValidation(nil))
	assert.True(t, hasTaint(e.node(old.Name)))
	// Upstream's line: a constant message, the command in fields.
	lines := logs.Matching("disrupting node(s)")
	require.Len(t, lines, 1)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	assert.Regexp(t, `^Underutilized/[0-9a-f-]+: replace: nodepools=\[`+e.pool.Name+`\]: \[`+old.Name+`\] -> \[1 replacement\] \(savings: \$0\.70\)$`, line["command"])
	assert.Equal(t, "replace", line["decision"])
	assert.EqualValues(t, 1, line["disrupted-node-count"])
	assert.EqualValues(t, 1, line["replacement-node-count"])
	assert.EqualValues(t, 1, line["pod-count"])
	require.Len(t, line["disrupted-nodes"], 1)
	assert.Equal(t, "c.16x", line["disrupted-nodes"].([]any)[0].(map[string]any)["instance-type"])
	assert.Equal(t, "c.2x, c.4x, c.8x", line["replacement-nodes"].([]any)[0].(map[string]any)["instance-types"])
	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(e.ctx, list))
	var replacement *v1.NodeClaim
	for i := range list.Items {
		if list.Items[i].Name != old.Name {
			replacement = &list.Items[i]
		}
	}
	require.NotNil(t, replacement, "a replacement NodeClaim is launched first")
	var types []string
	for _, r := range replacement.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable {
			types = r.Values
		}
	}
	assert.ElementsMatch(t, []string{"c.2x", "c.4x", "c.8x"}, types, "only types cheaper than the c.16x")
	assert.True(t, e.nodeClaim(old.Name).DeletionTimestamp.IsZero(), "the old node waits for its replacement")

	// It launches as a c.4x, dearer than the c.2x the command planned.
	replacement.Labels[corev1.LabelInstanceTypeStable] = "c.4x"
	replacement.Labels[corev1.LabelTopologyZone] = zone
	replacement.Labels[v1.CapacityTypeLabelKey] = v1.CapacityTypeOnDemand
	require.NoError(t, cp.Client.Update(e.ctx, replacement))
	replacement.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeInitialized, Status: "True", Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, replacement))
	predicted := metrics.DisruptionSavingsPerHourTotal.WithLabelValues("underutilized", e.pool.Name, metrics.EstimatePredicted)
	realized := metrics.DisruptionSavingsPerHourTotal.WithLabelValues("underutilized", e.pool.Name, metrics.EstimateRealized)
	predictedBefore, realizedBefore := testutil.ToFloat64(predicted), testutil.ToFloat64(realized)
	e.step(10 * time.Second)
	got := &v1.NodeClaim{}
	err := cp.Client.Get(e.ctx, client.ObjectKey{Name: old.Name}, got)
	assert.True(t, isGoneOrDeleting(err, got), "once the replacement is initialized the old node is deleted")
	// $0.80/h for the c.16x; the plan's c.2x costs $0.10/h, the c.4x that
	// launched $0.20/h.
	assert.InDelta(t, 0.70, testutil.ToFloat64(predicted)-predictedBefore, 1e-9, "predicted saving")
	assert.InDelta(t, 0.60, testutil.ToFloat64(realized)-realizedBefore, 1e-9, "realized saving")
}

// A replacement that launches dearer than the node it replaces (found by the
// soak, test/soak: a drift onto a pricier type) is a negative realized
// saving; it used to panic the queue (a counter cannot go down) on every
// retry of the command's step.
func TestDearerReplacementDoesNotPanicTheQueue(t *testing.T) {
	e := newConsolidationEnv(t)
	e.cloud.Catalog = append(e.cloud.Catalog, itype(32))
	old, oldNode := e.typedNode(itype(16))
	e.busyPod(oldNode, "app", "1")
	require.True(t, e.reconcileThroughValidation(nil))
	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(e.ctx, list))
	var replacement *v1.NodeClaim
	for i := range list.Items {
		if list.Items[i].Name != old.Name {
			replacement = &list.Items[i]
		}
	}
	require.NotNil(t, replacement)
	replacement.Labels[corev1.LabelInstanceTypeStable] = "c.32x"
	replacement.Labels[corev1.LabelTopologyZone] = zone
	replacement.Labels[v1.CapacityTypeLabelKey] = v1.CapacityTypeOnDemand
	require.NoError(t, cp.Client.Update(e.ctx, replacement))
	replacement.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeInitialized, Status: "True", Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, replacement))
	realized := metrics.DisruptionSavingsPerHourTotal.WithLabelValues("underutilized", e.pool.Name, metrics.EstimateRealized)
	before := testutil.ToFloat64(realized)
	require.NotPanics(t, func() { e.step(10 * time.Second) })
	got := &v1.NodeClaim{}
	err := cp.Client.Get(e.ctx, client.ObjectKey{Name: old.Name}, got)
	assert.True(t, isGoneOrDeleting(err, got), "the old node is deleted")
	assert.Zero(t, testutil.ToFloat64(realized)-before, "a dearer replacement adds no saving")
	assert.Zero(t, e.ctrl.Queue().Len(), "the command is done")
}

func TestUnconsolidatableEventNamesTheReason(t *testing.T) {
	e := newConsolidationEnv(t)
	_, node := e.typedNode(itype(2))
	e.busyPod(node, "app", "1500m")

	assert.False(t, e.reconcile(), "a well-packed node is kept")
	msgs := e.events.Messages(disruption.ReasonUnconsolidatable, node.Name)
	require.NotEmpty(t, msgs, "Unconsolidatable is sent on the node")
	assert.Contains(t, strings.Join(msgs, "\n"), "Can't replace with a cheaper node (current price $0.1000/h, cheapest replacement $0.1000/h)")
	n := len(e.events.Events(disruption.ReasonUnconsolidatable))
	e.reconcile()
	assert.Len(t, e.events.Events(disruption.ReasonUnconsolidatable), n, "repeated passes do not repeat it")
}

func countNodeClaims(t *testing.T, e *consolidationEnv) int {
	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(e.ctx, list))
	n := 0
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n
}

// The planner sees pending pods: the room they need on a node is not
// room for a consolidated node's pods (upstream simulates pending pods
// with the moved ones).
func TestPlannerLeavesRoomForPendingPods(t *testing.T) {
	e := newConsolidationEnv(t, true)
	c8 := itype(8)
	// The smallest type: light can only be deleted, into heavy's room.
	light, lightNode := e.typedNode(itype(2))
	e.busyPod(lightNode, "small", "1500m")
	_, heavyNode := e.typedNode(c8)
	e.busyPod(heavyNode, "big-1", "3")
	e.busyPod(heavyNode, "big-2", "3")
	waiting := e.pendingPod("waiting", "1")

	acted, err := e.ctrl.Reconcile(e.ctx)
	require.NoError(t, err)
	assert.False(t, acted, "the heavy node's free room is the pending pod's")
	assert.False(t, hasTaint(e.node(light.Name)))

	require.NoError(t, cp.Client.Delete(e.ctx, waiting))
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		return cp.Client.List(e.ctx, &pods, client.InNamespace(e.ns)) == nil && len(pods.Items) == 3
	}, 10*time.Second, 10*time.Millisecond)
	require.True(t, e.reconcileThroughValidation(nil), "without the pending pod the light node is deleted")
	assert.Equal(t, "Underutilized", disruptionReason(e.nodeClaim(light.Name)))
}

// A planner command still feasible after the validation delay is dropped
// when a fresh plan no longer moves its nodes: here the pods of the node
// the delete would fill left meanwhile (a scale-in), so that node is the
// one to go, by Emptiness and without an eviction.
func TestPlannerValidationDropsCommandsTheFreshPlanDoesNotMake(t *testing.T) {
	e := newConsolidationEnv(t, true)
	// The smallest type: light can only be deleted, into heavy's room.
	light, lightNode := e.typedNode(itype(2))
	e.busyPod(lightNode, "small", "1500m")
	heavy, heavyNode := e.typedNode(itype(8))
	e.busyPod(heavyNode, "big-1", "3")
	e.busyPod(heavyNode, "big-2", "3")

	failed := func() float64 {
		m := &dto.Metric{}
		require.NoError(t, metrics.FailedValidationsTotal.WithLabelValues(e.strategy.Methods()[0].ConsolidationType()).Write(m))
		return m.GetCounter().GetValue()
	}
	before := failed()
	acted := e.reconcileThroughValidation(func() {
		for _, name := range []string{"big-1", "big-2"} {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
			require.NoError(t, cp.Client.Delete(e.ctx, p, client.GracePeriodSeconds(0)))
			e.cluster.DeletePod(client.ObjectKeyFromObject(p))
		}
		require.Eventually(t, func() bool {
			var pods corev1.PodList
			return cp.Client.List(e.ctx, &pods, client.InNamespace(e.ns)) == nil && len(pods.Items) == 1
		}, 10*time.Second, 10*time.Millisecond)
	})
	assert.False(t, acted, "the delete of the light node is abandoned")
	assert.Equal(t, before+1, failed(), "karpenter_voluntary_disruption_failed_validations_total counts it")
	assert.False(t, hasTaint(e.node(light.Name)), "the light node's pod is not evicted")

	require.True(t, e.reconcileThroughValidation(nil), "the next pass deletes the emptied node")
	assert.Equal(t, "Empty", disruptionReason(e.nodeClaim(heavy.Name)))
	assert.False(t, hasTaint(e.node(light.Name)))
}

// A planner command's replacements are created with pure.LaunchTaint,
// so that the kube-scheduler does not fill them with other pods while
// they come up; the queue takes it off as the command deletes its
// candidates, so that their evicted pods go to the nodes bought for them,
// and a node no command in flight launched loses it at the next pass.
func TestPlannerReplacementsCarryTheLaunchTaint(t *testing.T) {
	e := newConsolidationEnv(t, true)
	old, oldNode := e.typedNode(itype(16))
	e.busyPod(oldNode, "app", "1")
	// A node a command launched before a restart: nothing owns it now
	// (do-not-disrupt keeps it out of this pass's plan).
	_, stale := e.typedNode(itype(8))
	stale.Spec.Taints = append(stale.Spec.Taints, pure.LaunchTaint)
	stale.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	require.NoError(t, cp.Client.Update(e.ctx, stale))
	e.busyPod(stale, "busy", "7")
	e.sync()

	require.True(t, e.reconcileThroughValidation(nil))
	assert.True(t, hasTaint(e.node(old.Name)))
	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(e.ctx, list))
	var replacement *v1.NodeClaim
	for i := range list.Items {
		if nc := &list.Items[i]; nc.Name != old.Name && nc.Name != stale.Name {
			replacement = nc
		}
	}
	require.NotNil(t, replacement, "a replacement NodeClaim is launched")
	launch := false
	for _, tt := range replacement.Spec.Taints {
		launch = launch || tt.MatchTaint(&pure.LaunchTaint)
	}
	assert.True(t, launch, "the replacement is created with %s", pure.LaunchTaint.ToString())
	// The strategy is told the move started and what it launched, so that
	// its cool-down leaves the new node alone.
	require.Len(t, e.strategy.started, 1)
	require.Len(t, e.strategy.started[0].Candidates, 1)
	assert.Equal(t, old.Name, e.strategy.started[0].Candidates[0].Name())
	assert.Equal(t, [][]string{{replacement.Name}}, e.strategy.launched)
	for _, tt := range e.node(stale.Name).Spec.Taints {
		assert.False(t, tt.MatchTaint(&pure.LaunchTaint), "no command in flight launched %s", stale.Name)
	}

	// The replacement registers (its Node carries the taint, as the
	// NodeClaim's taints go to the Node) and initializes.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: replacement.Name + "-node", Labels: map[string]string{v1.NodePoolLabelKey: e.pool.Name}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{pure.LaunchTaint}}}
	require.NoError(t, cp.Client.Create(e.ctx, node))
	replacement.Status.NodeName = node.Name
	replacement.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeInitialized, Status: "True", Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, replacement))
	e.step(10 * time.Second) // the queue only, no disruption pass
	got := &v1.NodeClaim{}
	err := cp.Client.Get(e.ctx, client.ObjectKey{Name: old.Name}, got)
	assert.True(t, isGoneOrDeleting(err, got), "once the replacement is initialized the old node is deleted")
	for _, tt := range e.node(node.Name).Spec.Taints {
		assert.False(t, tt.MatchTaint(&pure.LaunchTaint), "the queue takes the launch taint off as it deletes the candidates")
	}
}

// emptinessPassFleet is an empty node (Emptiness deletes it), a light one
// whose pod the planner moves, and the heavy one that takes it.
func (e *consolidationEnv) emptinessPassFleet() (empty, light, heavy *v1.NodeClaim) {
	empty, _ = e.typedNode(itype(8))
	light, lightNode := e.typedNode(itype(2))
	e.busyPod(lightNode, "small", "1500m")
	heavy, heavyNode := e.typedNode(itype(8))
	e.busyPod(heavyNode, "big-1", "3")
	e.busyPod(heavyNode, "big-2", "3")
	return empty, light, heavy
}

// passOutcome is what a pass did, and its error.
type passOutcome struct {
	r   disruption.PassResult
	err error
}

// passWaitingForValidation starts a pass and returns, once it waits out
// the validation delay, the channel its outcome comes on.
func (e *consolidationEnv) passWaitingForValidation() <-chan passOutcome {
	e.t.Helper()
	done := make(chan passOutcome, 1)
	go func() {
		r, err := disruption.ReconcilePass(e.ctx, e.ctrl)
		done <- passOutcome{r, err}
	}()
	require.Eventually(e.t, e.clock.HasWaiters, 20*time.Second, 10*time.Millisecond, "the pass waits for validation")
	return done
}

// pendingPod creates an unbound pod with a cpu request and waits until
// the client's cache lists it.
func (e *consolidationEnv) pendingPod(name, cpu string) *corev1.Pod {
	e.t.Helper()
	return e.pendingPodWith(name, cpu, nil)
}

// pendingPodWith is pendingPod changed by mutate before it is created.
func (e *consolidationEnv) pendingPodWith(name, cpu string, mutate func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	if mutate != nil {
		mutate(p)
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, p))
	require.Eventually(e.t, func() bool {
		return cp.Client.Get(e.ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}) == nil
	}, 10*time.Second, 10*time.Millisecond)
	return p
}

// In a pass where Emptiness acts, the planner plans for the nodes left,
// and both commands start after one validation delay (not one each).
func TestPlannerMovesInTheEmptinessPass(t *testing.T) {
	e := newConsolidationEnv(t, true)
	empty, light, heavy := e.emptinessPassFleet()
	done := e.passWaitingForValidation()
	e.clock.Step(disruption.DefaultValidationDelay)
	select {
	case got := <-done:
		require.NoError(t, got.err)
	case <-time.After(20 * time.Second):
		e.clock.Step(disruption.DefaultValidationDelay)
		t.Fatal("the pass waited out a second validation delay")
	}
	e.sync()
	assert.Equal(t, "Empty", disruptionReason(e.nodeClaim(empty.Name)))
	assert.Equal(t, "Underutilized", disruptionReason(e.nodeClaim(light.Name)))
	assert.False(t, hasTaint(e.node(heavy.Name)), "the destination is untouched")
}

// TestValidatingCandidatesAreDrained: while a pass's commands wait out
// the validation delay, their candidates carry pure.DrainTaint, so that
// the kube-scheduler does not put the pods of commands already running on
// the empty nodes Emptiness is about to delete (it prefers the emptiest);
// the destination does not.
func TestValidatingCandidatesAreDrained(t *testing.T) {
	e := newConsolidationEnv(t, true)
	empty, light, heavy := e.emptinessPassFleet()
	done := e.passWaitingForValidation()
	assert.True(t, hasDrainTaint(e.node(empty.Name)), "the empty node is drained while Emptiness validates")
	assert.True(t, hasDrainTaint(e.node(light.Name)), "the planner's candidate is drained while it validates")
	assert.False(t, hasDrainTaint(e.node(heavy.Name)), "the destination is not drained")
	e.clock.Step(disruption.DefaultValidationDelay)
	select {
	case got := <-done:
		require.NoError(t, got.err)
	case <-time.After(20 * time.Second):
		t.Fatal("the pass did not finish")
	}
}

// A nomination holds a node while pods are pending; under the planner,
// once none is pending (the pods it stood for bound elsewhere, or a
// scale-in deleted them) it no longer does. Upstream's methods keep it
// for the whole window.
func TestStaleNominationHoldsNoNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		planner bool
		pending bool
		deleted bool
	}{
		{name: "planner, nothing pending", planner: true, deleted: true},
		{name: "planner, a pod pending", planner: true, pending: true},
		{name: "upstream, nothing pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newConsolidationEnv(t, tc.planner)
			empty, _ := e.typedNode(itype(8))
			_, busyNode := e.typedNode(itype(8))
			e.busyPod(busyNode, "app", "7")
			if tc.pending {
				// Too big for any node here: it stays pending.
				e.pendingPod("waiting", "7")
			}
			e.cluster.NominateNodeForPod(e.ctx, empty.Name)

			if !tc.deleted {
				acted, err := e.ctrl.Reconcile(e.ctx)
				require.NoError(t, err)
				assert.False(t, acted, "the nominated node is kept")
				assert.False(t, hasTaint(e.node(empty.Name)))
				msgs := e.events.Messages(disruption.ReasonDisruptionBlocked, empty.Name)
				assert.Contains(t, msgs, "Node is nominated for a pending pod")
				return
			}
			require.True(t, e.reconcileThroughValidation(nil), "the empty node goes at once")
			assert.Equal(t, "Empty", disruptionReason(e.nodeClaim(empty.Name)))
		})
	}
}

// Under the planner, a pass whose every command lost a candidate while it
// waits for validation ends the wait early, abandons them, and lets the
// next pass plan at once; with a command still valid it waits the delay.
func TestPlannerEndsTheValidationDelayEarlyWhenNothingIsValid(t *testing.T) {
	for _, blocked := range []bool{true, false} {
		t.Run(fmt.Sprintf("blocked=%v", blocked), func(t *testing.T) {
			e := newConsolidationEnv(t, true)
			light, lightNode := e.typedNode(itype(2))
			e.busyPod(lightNode, "small", "1500m")
			_, heavyNode := e.typedNode(itype(8))
			e.busyPod(heavyNode, "big-1", "3")
			e.busyPod(heavyNode, "big-2", "3")

			done := e.passWaitingForValidation()
			if blocked {
				// A pod that may not be disrupted lands on the candidate.
				e.pod(lightNode, "pinned", map[string]string{v1.DoNotDisruptAnnotationKey: "true"})
			}
			e.clock.Step(time.Second)
			select {
			case got := <-done:
				require.True(t, blocked, "the pass ended before the delay with its command valid")
				require.NoError(t, got.err)
				assert.True(t, got.r.Abandoned)
				assert.False(t, got.r.Started)
				assert.False(t, hasTaint(e.node(light.Name)))
				return
			case <-time.After(3 * time.Second):
				require.False(t, blocked, "the pass waited on with no command valid")
			}
			require.Eventually(t, e.clock.HasWaiters, 20*time.Second, 10*time.Millisecond, "the pass waits on")
			e.clock.Step(disruption.DefaultValidationDelay)
			got := <-done
			require.NoError(t, got.err)
			assert.True(t, got.r.Started)
			e.sync()
			assert.Equal(t, "Underutilized", disruptionReason(e.nodeClaim(light.Name)))
		})
	}
}

// Upstream sends Unconsolidatable only for nodes its consolidation
// evaluated: a node still inside consolidateAfter is no candidate and gets
// no event (every node is, after each pod event; with one such event per
// node per 15 minutes, it would hide the verdict of its evaluation).
func TestUnconsolidatableOnlyForEvaluatedNodes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		consolidatable bool
		want           string
	}{
		{name: "consolidateAfter elapsed: evaluated", consolidatable: true, want: "Can't replace with a cheaper node"},
		{name: "inside consolidateAfter: no candidate, no event", consolidatable: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newConsolidationEnv(t)
			opts := []nodeOpt{e.typed(itype(2))}
			if tc.consolidatable {
				opts = append(opts, consolidatable)
			}
			nc, _ := e.managedNode(opts...)
			node := e.node(nc.Name)
			node.Spec.Taints = nil
			require.NoError(t, cp.Client.Update(e.ctx, node))
			e.sync()
			e.busyPod(node, "app", "1500m")

			assert.False(t, e.reconcile(), "the node is kept")
			msgs := e.events.Messages(disruption.ReasonUnconsolidatable, node.Name)
			if tc.want == "" {
				assert.Empty(t, msgs)
				return
			}
			assert.Contains(t, strings.Join(msgs, "\n"), tc.want)
		})
	}
}
