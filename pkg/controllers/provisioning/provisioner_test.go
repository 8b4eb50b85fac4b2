package provisioning_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

func newProvisioner(t *testing.T) (*provisioning.Provisioner, *fakeCluster, *fakeRecorder) {
	t.Helper()
	cloud, err := kwok.New(context.Background(), cp.Client, kwok.Options{})
	require.NoError(t, err)
	cluster := &fakeCluster{kube: cp.Client}
	rec := &fakeRecorder{}
	return provisioning.NewProvisioner(cp.Client, cloud, cluster, rec, provisioning.Options{}), cluster, rec
}

func requirement(nc *v1.NodeClaim, key string) *v1.NodeSelectorRequirementWithMinValues {
	for i := range nc.Spec.Requirements {
		if nc.Spec.Requirements[i].Key == key {
			return &nc.Spec.Requirements[i]
		}
	}
	return nil
}

// logLines captures log lines as "message key=value ..." strings.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx() context.Context {
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 0})
	return log.IntoContext(context.Background(), logger)
}

func (l *logLines) find(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, `"msg"="`+msg+`"`) {
			out = append(out, line)
		}
	}
	return out
}

func TestProvisionCreatesNodeClaims(t *testing.T) {
	cleanup(t)
	logs := &logLines{}
	ctx := logs.ctx()
	np := nodePool(t, "lab-general", nil)
	for _, name := range []string{"inflate-0", "inflate-1", "inflate-2", "inflate-3", "inflate-4"} {
		pendingPod(t, name, "1", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "lab-general"}
		})
	}
	p, _, rec := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	require.NotNil(t, round)
	claims := nodeClaims(t)
	require.Len(t, claims, 1, "five 1-cpu pods fit one node")
	nc := &claims[0]

	assert.True(t, strings.HasPrefix(nc.Name, "lab-general-"), nc.Name)
	require.Len(t, nc.OwnerReferences, 1)
	owner := nc.OwnerReferences[0]
	assert.Equal(t, metav1.OwnerReference{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: "lab-general",
		UID: np.UID, BlockOwnerDeletion: ptr(true)}, owner)

	assert.Equal(t, "lab-general", nc.Labels[v1.NodePoolLabelKey])
	assert.Equal(t, "lab-general", nc.Labels["capacity.example.io/pool"])
	assert.Equal(t, "default", nc.Labels["karpenter.kwok.sh/kwoknodeclass"])
	assert.Equal(t, "team-a", nc.Annotations["example.io/owner"])
	assert.Equal(t, np.Hash(), nc.Annotations[v1.NodePoolHashAnnotationKey])
	assert.Equal(t, "v3", nc.Annotations[v1.NodePoolHashVersionAnnotationKey])
	assert.Equal(t, []string{v1.TerminationFinalizer}, nc.Finalizers,
		"created with the termination finalizer, so the lifecycle sends no patch to add it before the launch")

	assert.Equal(t, np.Spec.Template.Spec.Taints, nc.Spec.Taints)
	assert.Equal(t, np.Spec.Template.Spec.StartupTaints, nc.Spec.StartupTaints)
	assert.Equal(t, np.Spec.Template.Spec.NodeClassRef, nc.Spec.NodeClassRef)
	assert.Equal(t, np.Spec.Template.Spec.ExpireAfter.String(), nc.Spec.ExpireAfter.String(), "defaulted 720h copied")

	arch := requirement(nc, corev1.LabelArchStable)
	require.NotNil(t, arch)
	assert.Equal(t, []string{"amd64"}, arch.Values)
	it := requirement(nc, corev1.LabelInstanceTypeStable)
	require.NotNil(t, it)
	assert.Equal(t, corev1.NodeSelectorOpIn, it.Operator)
	assert.NotEmpty(t, it.Values)
	assert.LessOrEqual(t, len(it.Values), 600)
	ct := requirement(nc, v1.CapacityTypeLabelKey)
	require.NotNil(t, ct)
	assert.Equal(t, []string{"on-demand"}, ct.Values)

	cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]
	assert.True(t, cpu.Cmp(resource.MustParse("5")) >= 0, "requests cover the pods: %s", cpu.String())
	podCount := nc.Spec.Resources.Requests[corev1.ResourcePods]
	assert.Equal(t, int64(5), podCount.Value(), "requests count the pods")

	// The plan maps every pod to the new NodeClaim.
	for _, pl := range round.Result.Placements {
		assert.True(t, pl.Scheduled(), pl.Pod.Name)
	}
	assert.Empty(t, rec.forObject("inflate-0"), "no event for pods planned onto new capacity")

	found := logs.find("found provisionable pod(s)")
	require.Len(t, found, 1)
	assert.Contains(t, found[0], `"Pods"="default/inflate-`)
	assert.Contains(t, found[0], `"duration"=`)
	computed := logs.find("computed new nodeclaim(s) to fit pod(s)")
	require.Len(t, computed, 1)
	assert.Contains(t, computed[0], `"nodeclaims"=1 "pods"=5`)
	created := logs.find("created nodeclaim")
	require.Len(t, created, 1)
	assert.Contains(t, created[0], `"NodePool"={"name"="lab-general"}`)
	assert.Contains(t, created[0], `"NodeClaim"={"name"="`+nc.Name+`"}`)
	assert.Contains(t, created[0], `"requests"=`)
	assert.Contains(t, created[0], ` other(s)"`, "instance types are summarised")

	// Once launched, a second round sees the in-flight NodeClaim and
	// nominates the pods to it instead of launching again.
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("58")}
	nc.Status.Allocatable = nc.Status.Capacity
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	round, err = p.Provision(ctx)
	require.NoError(t, err)
	assert.Empty(t, round.Result.NewNodeClaims)
	assert.Len(t, nodeClaims(t), 1)
	evs := rec.forObject("inflate-0")
	require.Len(t, evs, 1)
	assert.Equal(t, provisioning.ReasonNominated, evs[0].reason)
	assert.Equal(t, "Pod should schedule on: node/"+nc.Name, evs[0].message)
}

func TestProvisionIncompatiblePod(t *testing.T) {
	cleanup(t)
	logs := &logLines{}
	ctx := logs.ctx()
	nodePool(t, "lab-general", nil)
	pendingPod(t, "impossible-arch", "100m", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "lab-general", corev1.LabelArchStable: "arm64"}
	})
	p, _, rec := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	assert.Empty(t, round.Result.NewNodeClaims)
	assert.Empty(t, nodeClaims(t))
	evs := rec.forObject("impossible-arch")
	require.Len(t, evs, 1)
	assert.Equal(t, corev1.EventTypeWarning, evs[0].eventType)
	assert.Equal(t, provisioning.ReasonFailedScheduling, evs[0].reason)
	assert.Contains(t, evs[0].message, "Failed to schedule pod, ")
	assert.Contains(t, evs[0].message, "lab-general")
	assert.Contains(t, evs[0].message, corev1.LabelArchStable)
	assert.Contains(t, evs[0].message, "arm64")
	failed := logs.find("could not schedule pod")
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0], corev1.LabelArchStable)
	assert.Contains(t, failed[0], `"Pod"={"name"="impossible-arch" "namespace"="default"}`)
}

func TestProvisionRespectsLimits(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "limited", func(np *v1.NodePool) {
		np.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse("1")}
	})
	// Two pods too big to share a node.
	pendingPod(t, "big-0", "100", nil)
	pendingPod(t, "big-1", "100", nil)
	p, cluster, rec := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	assert.Len(t, round.Result.NewNodeClaims, 1, "the nodes limit allows one")
	assert.Len(t, nodeClaims(t), 1)
	failed := 0
	for _, name := range []string{"big-0", "big-1"} {
		for _, e := range rec.forObject(name) {
			if e.reason == provisioning.ReasonFailedScheduling {
				failed++
			}
		}
	}
	assert.Equal(t, 1, failed, "the pod left over is told why")

	// Now the pool is at its limit: nothing more is planned.
	round, err = p.Provision(ctx)
	require.NoError(t, err)
	assert.Empty(t, round.Result.NewNodeClaims)
	assert.Len(t, nodeClaims(t), 1)

	// Limits are re-checked just before creating: a plan made with headroom
	// is not executed once usage has caught up with the limit.
	require.NoError(t, testutil.DeleteNodeClaims(ctx, cp.Client))
	res, pools, err := p.Schedule(ctx)
	require.NoError(t, err)
	require.Len(t, res.NewNodeClaims, 1)
	cluster.pinUsage("limited", corev1.ResourceList{v1.ResourceNodes: resource.MustParse("1")})
	created, err := p.CreateNodeClaims(ctx, res.NewNodeClaims, pools)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nodes resource usage")
	assert.Equal(t, []*v1.NodeClaim{nil}, created)
	assert.Empty(t, nodeClaims(t))
}

// existingNode creates a Ready-looking lab-general node named "existing"
// with the given cpu, as a kubelet would have registered it.
func existingNode(t *testing.T, cpu string) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "existing", Labels: map[string]string{
		corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelHostname: "existing",
		v1.NodePoolLabelKey: "lab-general", "capacity.example.io/pool": "lab-general",
	}}}
	require.NoError(t, cp.Client.Create(ctx, node))
	// The API server adds the not-ready taint at creation; play kubelet.
	node.Spec.Taints = nil
	require.NoError(t, cp.Client.Update(ctx, node))
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	require.NoError(t, cp.Client.Status().Update(ctx, node))
}

func TestProvisionNominatesExistingNode(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "lab-general", nil)
	existingNode(t, "4")
	pendingPod(t, "fits", "1", nil)
	p, _, rec := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	assert.Empty(t, round.Result.NewNodeClaims)
	assert.Empty(t, nodeClaims(t))
	evs := rec.forObject("fits")
	require.Len(t, evs, 1)
	assert.Equal(t, provisioning.ReasonNominated, evs[0].reason)
	assert.Equal(t, "Pod should schedule on: node/existing", evs[0].message)
}

// TestProvisionPlansAheadOfTheScheduler covers pods the kube-scheduler has
// not tried yet: one that fits an existing node asks for nothing and gets no
// event (the scheduler will place it); one that fits nowhere gets capacity
// in the same round, without waiting for the Unschedulable mark.
func TestProvisionPlansAheadOfTheScheduler(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "lab-general", nil)
	existingNode(t, "2")
	untried := func(name, cpu string) {
		pod := pendingPod(t, name, cpu, nil)
		pod.Status.Conditions = nil
		require.NoError(t, cp.Client.Status().Update(ctx, pod))
	}
	untried("fits", "1")
	p, _, rec := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	assert.Empty(t, round.Result.NewNodeClaims, "the pod fits the existing node")
	assert.Empty(t, rec.forObject("fits"), "no event for a pod the scheduler will place")

	untried("too-big", "8")
	round, err = p.Provision(ctx)
	require.NoError(t, err)
	require.Len(t, round.Result.NewNodeClaims, 1)
	require.Len(t, round.Result.NewNodeClaims[0].Pods, 1)
	assert.Equal(t, "too-big", round.Result.NewNodeClaims[0].Pods[0].Name)
	assert.Len(t, nodeClaims(t), 1)
}

func TestProvisionSkipsUnreadyNodePools(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	np := nodePool(t, "not-ready", nil)
	np.Status.Conditions[0].Status = metav1.ConditionFalse
	np.Status.Conditions[0].Reason = "UnhealthyDependents"
	require.NoError(t, cp.Client.Status().Update(ctx, np))
	pendingPod(t, "waiting", "1", nil)
	p, _, _ := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	assert.Empty(t, round.Result.NewNodeClaims)
	assert.Empty(t, nodeClaims(t))
}

func TestProvisionIgnoresInvalidPods(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "lab-general", nil)
	pendingPod(t, "restricted", "1", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"karpenter.sh/custom": "x"}
	})
	pendingPod(t, "opted-out", "1", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpDoesNotExist}},
			}}},
		}}
	})
	p, _, rec := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	assert.Nil(t, round, "no valid pod is pending")
	assert.Empty(t, nodeClaims(t))
	evs := rec.forObject("restricted")
	require.Len(t, evs, 1)
	assert.Equal(t, provisioning.ReasonFailedScheduling, evs[0].reason)
	assert.Contains(t, evs[0].message, "karpenter.sh/custom")
	assert.Empty(t, rec.forObject("opted-out"))
}

func TestProvisionPlansForPodsOnDisruptedNodes(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "lab-general", nil)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaving", Labels: map[string]string{
		corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", v1.NodePoolLabelKey: "lab-general",
	}}}
	require.NoError(t, cp.Client.Create(ctx, node))
	node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
	require.NoError(t, cp.Client.Update(ctx, node))
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	require.NoError(t, cp.Client.Status().Update(ctx, node))
	for _, name := range []string{"evictee", "tolerant"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
			NodeName: "leaving",
			Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
			Tolerations: []corev1.Toleration{{Key: "example.io/dedicated", Operator: corev1.TolerationOpExists}},
		}}
		if name == "tolerant" {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: v1.DisruptedTaintKey, Operator: corev1.TolerationOpExists})
		}
		require.NoError(t, cp.Client.Create(ctx, pod))
	}
	p, _, _ := newProvisioner(t)

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	require.NotNil(t, round)
	require.Len(t, round.Result.NewNodeClaims, 1, "replacement capacity for the pod that must move")
	require.Len(t, round.Result.NewNodeClaims[0].Pods, 1)
	assert.Equal(t, "evictee", round.Result.NewNodeClaims[0].Pods[0].Name)
}

// triggers records what the pod controller triggered.
type triggers struct{ uids []string }

func (t *triggers) Trigger(uid string) { t.uids = append(t.uids, uid) }

func (t *triggers) TriggerPod(pod *corev1.Pod) { t.Trigger(string(pod.UID)) }

func TestPodControllerTriggers(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	pending := pendingPod(t, "pending", "1", nil)
	daemon := pendingPod(t, "daemon", "1", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid"}}
	})
	plain := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
		if mutate != nil {
			mutate(pod)
		}
		require.NoError(t, cp.Client.Create(ctx, pod))
		return pod
	}
	// Not yet seen by the kube-scheduler: planned for at once, so a burst
	// of new pods lands in one round.
	notYetTried := plain("fresh", nil)
	gated := plain("gated", func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	})
	otherScheduler := plain("other-scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" })
	// Tried and found a place (the scheduler is about to bind it): not ours.
	scheduling := plain("being-bound", nil)
	scheduling.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, scheduling))

	tr := &triggers{}
	c := provisioning.NewPodController(cp.Client, tr)
	for _, pod := range []*corev1.Pod{pending, daemon, notYetTried, gated, otherScheduler, scheduling} {
		res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: pod.Name}})
		require.NoError(t, err)
		if pod == pending {
			assert.NotZero(t, res.RequeueAfter, "a pending pod keeps re-triggering")
		}
	}
	assert.Equal(t, []string{string(pending.UID), string(notYetTried.UID)}, tr.uids)
}

func ptr[T any](v T) *T { return &v }

// TestNoCompatibleInstanceTypes warns a NodePool whose requirements leave
// no instance type (once a minute, as upstream), and one whose minValues
// the remaining types cannot meet; a pool with types gets nothing.
func TestNoCompatibleInstanceTypes(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "no-types", func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"no-such-type"}})
	})
	nodePool(t, "too-few", func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"c7a.xlarge", "no-such-type"}, MinValues: ptr(2)})
	})
	nodePool(t, "fine", nil)
	pendingPod(t, "waiting", "100m", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "no-types"}
	})
	p, _, rec := newProvisioner(t)

	_, err := p.Provision(ctx)
	require.NoError(t, err)
	_, err = p.Provision(ctx)
	require.NoError(t, err)
	none := rec.forObject("no-types")
	require.Len(t, none, 1, "warned once within the dedupe window")
	assert.Equal(t, corev1.EventTypeWarning, none[0].eventType)
	assert.Equal(t, provisioning.ReasonNoCompatibleInstanceTypes, none[0].reason)
	assert.Equal(t, "NodePool requirements filtered out all compatible available instance types", none[0].message)
	few := rec.forObject("too-few")
	require.Len(t, few, 1)
	assert.Equal(t, "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility", few[0].message)
	assert.Empty(t, rec.forObject("fine"))
}

// TestDRARequests: under IGNORE_DRA_REQUESTS=true (the default) a pod with
// ResourceClaims gets no NodeClaim and a FailedScheduling saying why, while
// an ordinary pod beside it is provisioned for; false plans for it as for
// any pod (the solver ignores the claims).
func TestDRARequests(t *testing.T) {
	claimed := func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "lab-general"}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr("gpu-template")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	for _, ignore := range []bool{true, false} {
		t.Run(fmt.Sprintf("ignore=%t", ignore), func(t *testing.T) {
			cleanup(t)
			ctx := context.Background()
			nodePool(t, "lab-general", nil)
			pod := pendingPod(t, "claims-a-gpu", "100m", claimed)
			require.NotEmpty(t, pod.Spec.ResourceClaims, "the API server kept the claims")
			pendingPod(t, "plain", "100m", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "lab-general"}
			})
			cloud, err := kwok.New(ctx, cp.Client, kwok.Options{})
			require.NoError(t, err)
			rec := &fakeRecorder{}
			p := provisioning.NewProvisioner(cp.Client, cloud, &fakeCluster{kube: cp.Client}, rec, provisioning.Options{IgnoreDRARequests: ignore})

			round, err := p.Provision(ctx)
			require.NoError(t, err)
			var planned []string
			for _, nc := range round.Result.NewNodeClaims {
				for _, pod := range nc.Pods {
					planned = append(planned, pod.Name)
				}
			}
			evs := rec.forObject("claims-a-gpu")
			if ignore {
				assert.Equal(t, []string{"plain"}, planned)
				require.Len(t, evs, 1)
				assert.Equal(t, provisioning.ReasonFailedScheduling, evs[0].reason)
				assert.Equal(t, "Failed to schedule pod, "+snapshot.ErrDRARequests.Error(), evs[0].message)
				return
			}
			assert.ElementsMatch(t, []string{"plain", "claims-a-gpu"}, planned)
			assert.Empty(t, evs)
		})
	}
}
