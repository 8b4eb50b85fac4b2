package snapshot_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// fakeCluster serves the nodes and usage a test sets.
type fakeCluster struct {
	unsynced bool
	nodes    []*scheduling.ExistingNode
	usage    map[string]corev1.ResourceList
}

func (f *fakeCluster) Synced(context.Context) bool { return !f.unsynced }
func (f *fakeCluster) SchedulingNodes() []*scheduling.ExistingNode {
	return append([]*scheduling.ExistingNode(nil), f.nodes...)
}
func (f *fakeCluster) NodePoolResources(name string) corev1.ResourceList {
	return f.usage[name].DeepCopy()
}

// fakeCloud resolves one instance type per pool, fails for pools named
// "broken" and returns none for pools named "empty".
type fakeCloud struct{}

func (fakeCloud) GetInstanceTypes(_ context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	switch np.Name {
	case "broken":
		return nil, errors.New("catalog unavailable")
	case "empty":
		return nil, nil
	}
	return []*scheduling.InstanceType{{
		Name:      "m-4x",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")},
		Offerings: []scheduling.Offering{{Zone: "zone-a", CapacityType: "on-demand", Price: 1, Available: true}},
	}}, nil
}

func cleanup(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		zero := client.GracePeriodSeconds(0)
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), zero))
		pools := &v1.NodePoolList{}
		require.NoError(t, cp.Client.List(ctx, pools))
		for i := range pools.Items {
			if len(pools.Items[i].Finalizers) > 0 {
				pools.Items[i].Finalizers = nil
				require.NoError(t, cp.Client.Update(ctx, &pools.Items[i]))
			}
		}
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodePool{}))
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &corev1.Node{}))
		require.Eventually(t, func() bool {
			pods, nps, nodes := &corev1.PodList{}, &v1.NodePoolList{}, &corev1.NodeList{}
			return cp.Client.List(ctx, pods) == nil && len(pods.Items) == 0 &&
				cp.Client.List(ctx, nps) == nil && len(nps.Items) == 0 &&
				cp.Client.List(ctx, nodes) == nil && len(nodes.Items) == 0
		}, 10*time.Second, 50*time.Millisecond)
	})
}

func nodePool(t *testing.T, name string, ready bool, mutate func(*v1.NodePool)) *v1.NodePool {
	t.Helper()
	ctx := context.Background()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	if mutate != nil {
		mutate(np)
	}
	require.NoError(t, cp.Client.Create(ctx, np))
	status := metav1.ConditionTrue
	if !ready {
		status = metav1.ConditionFalse
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, np))
	return np
}

func node(t *testing.T, name string, taints ...corev1.Taint) *scheduling.ExistingNode {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "general"}},
		Spec: corev1.NodeSpec{Taints: taints}}
	require.NoError(t, cp.Client.Create(context.Background(), n))
	return &scheduling.ExistingNode{Name: name, NodeClaim: name + "-claim", Labels: n.Labels, Taints: taints,
		Initialized: true, Managed: true}
}

// pod creates a pod, bound to nodeName when it is set and otherwise pending
// (marked Unschedulable).
func pod(t *testing.T, name, nodeName string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	if mutate != nil {
		mutate(p)
	}
	require.NoError(t, cp.Client.Create(ctx, p))
	p.Status.Phase = corev1.PodRunning
	if nodeName == "" {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}}
	}
	if mutate != nil {
		mutate(p) // status fields the test set survive the create
	}
	require.NoError(t, cp.Client.Status().Update(ctx, p))
	return p
}

func names(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func nodeNames(nodes []*scheduling.ExistingNode) []string {
	out := []string{}
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

func TestBuildRemoveMovesReschedulablePods(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "general", true, nil)
	cluster := &fakeCluster{}
	cluster.nodes = []*scheduling.ExistingNode{node(t, "candidate"), node(t, "keeper"), node(t, "draining", v1.DisruptedNoScheduleTaint),
		{Name: "unregistered", NodeClaim: "unregistered", Managed: true}}
	owner := func(kind string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: "owner", UID: "owner-uid"}}
		}
	}
	pod(t, "web", "candidate", nil)
	pod(t, "api", "candidate", nil)
	pod(t, "logger", "candidate", func(p *corev1.Pod) { owner("DaemonSet")(p) })
	pod(t, "mirror", "candidate", func(p *corev1.Pod) { owner("Node")(p) })
	pod(t, "finished", "candidate", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	pod(t, "tolerant", "candidate", func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: v1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
	})
	pod(t, "stays", "keeper", nil)
	pod(t, "evictee", "draining", nil)
	pod(t, "pending", "", nil)

	view := snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: cluster}
	snap, err := snapshot.Build(ctx, view, snapshot.Request{Remove: map[string]bool{"candidate": true, "unregistered": true}})
	require.NoError(t, err)

	assert.Equal(t, []string{"keeper"}, nodeNames(snap.Input.Nodes), "removed and disrupted nodes are left out")
	assert.ElementsMatch(t, []string{"web", "api"}, names(snap.Moved), "only reschedulable pods move")
	for _, p := range snap.Moved {
		assert.Empty(t, p.Spec.NodeName, "moved pods are unbound")
	}
	assert.ElementsMatch(t, []string{"pending", "web", "api", "evictee"}, names(snap.Input.Pods),
		"pending pods, pods of removed nodes and pods of disrupted nodes")
	assert.Equal(t, "pending", snap.Input.Pods[0].Name, "pending pods come first")
	assert.Equal(t, map[string]string{"keeper": "keeper-claim"}, snap.ClaimOf)

	// The cluster's own objects are untouched: the snapshot holds copies.
	web := &corev1.Pod{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, web))
	assert.Equal(t, "candidate", web.Spec.NodeName)

	// Without Remove, only the disrupted node's pods move, and Moved is empty.
	snap, err = snapshot.Build(ctx, view, snapshot.Request{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"candidate", "keeper", "unregistered"}, nodeNames(snap.Input.Nodes))
	assert.ElementsMatch(t, []string{"pending", "evictee"}, names(snap.Input.Pods))
	assert.Empty(t, snap.Moved)

	// NoPending leaves pending pods out; ExtraPods go in as they are.
	extra := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: "default", UID: "extra-uid"}}
	snap, err = snapshot.Build(ctx, view, snapshot.Request{NoPending: true, ExtraPods: []*corev1.Pod{extra},
		Remove: map[string]bool{"candidate": true}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"web", "api", "evictee", "extra"}, names(snap.Input.Pods))
	assert.Same(t, extra, snap.Input.Pods[len(snap.Input.Pods)-1])
}

func TestBuildNodePools(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	w := func(n int32) func(*v1.NodePool) { return func(np *v1.NodePool) { np.Spec.Weight = &n } }
	nodePool(t, "light-b", true, nil)
	nodePool(t, "light-a", true, nil)
	nodePool(t, "heavy", true, w(50))
	nodePool(t, "middle", true, w(10))
	nodePool(t, "unready", false, w(90))
	nodePool(t, "broken", true, w(80))
	nodePool(t, "empty", true, w(70))
	nodePool(t, "static", true, func(np *v1.NodePool) { np.Spec.Replicas = ptr[int64](2) })
	deleting := nodePool(t, "deleting", true, func(np *v1.NodePool) { np.Finalizers = []string{"example.io/hold"} })
	require.NoError(t, cp.Client.Delete(ctx, deleting))
	pod(t, "pending", "", nil)

	view := snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: &fakeCluster{}}
	snap, err := snapshot.Build(ctx, view, snapshot.Request{})
	require.NoError(t, err)
	got := []string{}
	for _, np := range snap.Input.NodePools {
		got = append(got, np.Name)
		require.NotNil(t, snap.NodePools[np.Name])
		assert.Equal(t, np.Name, np.Labels[v1.NodePoolLabelKey])
		assert.Equal(t, "default", np.Labels[v1.NodeClassLabelKey(snap.NodePools[np.Name].Spec.Template.Spec.NodeClassRef.GroupKind())])
		assert.Len(t, np.InstanceTypes, 1)
	}
	assert.Equal(t, []string{"heavy", "middle", "light-a", "light-b"}, got,
		"ready dynamic pools with instance types, heaviest first, then by name")
	assert.Len(t, snap.NodePools, 4)
}

func TestBuildLimitHeadroom(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	limits := func(l v1.Limits) func(*v1.NodePool) { return func(np *v1.NodePool) { np.Spec.Limits = l } }
	nodePool(t, "capped", true, limits(v1.Limits{corev1.ResourceCPU: resource.MustParse("10"), v1.ResourceNodes: resource.MustParse("3")}))
	nodePool(t, "full", true, limits(v1.Limits{corev1.ResourceCPU: resource.MustParse("8")}))
	nodePool(t, "open", true, nil)
	pod(t, "pending", "", nil)
	cluster := &fakeCluster{usage: map[string]corev1.ResourceList{
		"capped": {corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourceNodes: resource.MustParse("1")},
		"full":   {corev1.ResourceCPU: resource.MustParse("12")},
		"open":   {corev1.ResourceCPU: resource.MustParse("100")},
	}}

	opts := snapshot.Options{WellKnownLabels: []string{"example.com/instance-family"}}
	snap, err := snapshot.Build(ctx, snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: cluster}, snapshot.Request{Options: opts})
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com/instance-family"}, snap.Input.WellKnownLabels, "the provider's keys reach the solver")
	remaining := map[string]corev1.ResourceList{}
	for _, np := range snap.Input.NodePools {
		remaining[np.Name] = np.Remaining
	}
	require.Len(t, remaining, 3)
	capped := remaining["capped"]
	assert.Len(t, capped, 2, "only limited resources have headroom")
	assert.Zero(t, capped.Cpu().Cmp(resource.MustParse("6")), "cpu headroom %s", capped.Cpu())
	nodes := capped[v1.ResourceNodes]
	assert.Zero(t, nodes.Cmp(resource.MustParse("2")), "nodes headroom %s", nodes.String())
	full := remaining["full"]
	assert.Zero(t, full.Cpu().Sign(), "usage over the limit leaves no headroom, never negative")
	assert.Nil(t, remaining["open"], "a pool without limits is unlimited")
	for _, np := range snap.Input.NodePools {
		if np.Name == "capped" {
			limit := np.Limits[corev1.ResourceCPU]
			assert.Zero(t, limit.Cmp(resource.MustParse("10")), "limits ride along for refusal figures")
		}
	}
}

func TestBuildWaitsForSync(t *testing.T) {
	_, err := snapshot.Build(context.Background(), snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: &fakeCluster{unsynced: true}}, snapshot.Request{})
	assert.ErrorIs(t, err, snapshot.ErrNotSynced)
}

func TestBuildSkipIfNoPods(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "general", true, nil)
	pod(t, "restricted", "", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"karpenter.sh/custom": "x"} })

	snap, err := snapshot.Build(ctx, snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: &fakeCluster{}}, snapshot.Request{SkipIfNoPods: true})
	require.NoError(t, err)
	assert.Nil(t, snap.Input, "no pod to plan")
	require.Len(t, snap.Ignored, 1, "the invalid pod is reported, not planned")
	assert.Equal(t, "restricted", snap.Ignored[0].Pod.Name)
	assert.Contains(t, snap.Ignored[0].Err.Error(), "karpenter.sh/custom")
}

func ptr[T any](v T) *T { return &v }

// IgnoreTaints: a soft taint that only steers the kube-scheduler is not
// in the plan's nodes, and the nodes the cluster serves are not changed.
func TestBuildIgnoreTaints(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "general", true, nil)
	pod(t, "waiting", "", nil)
	steer := corev1.Taint{Key: "example.com/steer", Effect: corev1.TaintEffectPreferNoSchedule}
	keep := corev1.Taint{Key: "example.com/keep", Effect: corev1.TaintEffectNoSchedule}
	cluster := &fakeCluster{nodes: []*scheduling.ExistingNode{node(t, "steered", steer, keep), node(t, "plain")}}

	snap, err := snapshot.Build(ctx, snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: cluster}, snapshot.Request{Options: snapshot.Options{IgnoreTaints: []corev1.Taint{steer}}})
	require.NoError(t, err)
	taints := map[string][]corev1.Taint{}
	for _, n := range snap.Input.Nodes {
		taints[n.Name] = n.Taints
	}
	assert.Equal(t, []corev1.Taint{keep}, taints["steered"], "only the ignored taint is dropped")
	assert.Empty(t, taints["plain"])
	assert.Equal(t, []corev1.Taint{steer, keep}, cluster.nodes[0].Taints, "the cluster's node is not changed")

	snap, err = snapshot.Build(ctx, snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: cluster}, snapshot.Request{})
	require.NoError(t, err)
	for _, n := range snap.Input.Nodes {
		if n.Name == "steered" {
			assert.Len(t, n.Taints, 2, "without the option every taint stays")
		}
	}
}

func TestRestrictPools(t *testing.T) {
	its := []*scheduling.InstanceType{{Name: "m.2x"}, {Name: "m.4x"}, {Name: "m.8x"}, {Name: "m.16x"}}
	pools := []*scheduling.NodePool{{Name: "p", InstanceTypes: its}, {Name: "q", Weight: 5, InstanceTypes: its}}
	out := snapshot.RestrictPools(pools, map[string]map[string]bool{"p": {"m.4x": true, "m.8x": true}, "q": {"none": true}})
	require.Len(t, out, 1)
	assert.Equal(t, "p", out[0].Name)
	assert.Len(t, out[0].InstanceTypes, 2)
	assert.Equal(t, "m.4x", out[0].InstanceTypes[0].Name)
	assert.Len(t, pools[0].InstanceTypes, 4, "the input is left alone")
	assert.Empty(t, snapshot.RestrictPools(pools, nil))
}
