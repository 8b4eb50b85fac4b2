package provisioning_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// fakeCluster is the cluster state as the API server has it right now:
// every Node with its bound pods, every NodeClaim without a Node, and usage
// counted from NodeClaims. Tests can pin usage to simulate a state that moved
// on between planning and creating.
type fakeCluster struct {
	kube client.Client

	mu    sync.Mutex
	usage map[string]corev1.ResourceList
}

func (f *fakeCluster) Synced(context.Context) bool { return true }

func (f *fakeCluster) SchedulingNodes() []*scheduling.ExistingNode {
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	claims := &v1.NodeClaimList{}
	if f.kube.List(ctx, nodes) != nil || f.kube.List(ctx, pods) != nil || f.kube.List(ctx, claims) != nil {
		panic("listing cluster")
	}
	var out []*scheduling.ExistingNode
	for i := range nodes.Items {
		n := &nodes.Items[i]
		en := &scheduling.ExistingNode{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints,
			Allocatable: n.Status.Allocatable, Initialized: true, Managed: n.Labels[v1.NodePoolLabelKey] != ""}
		for j := range pods.Items {
			if pods.Items[j].Spec.NodeName == n.Name {
				en.Pods = append(en.Pods, &pods.Items[j])
			}
		}
		out = append(out, en)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.NodeName != "" {
			continue
		}
		reqs, err := cloudprovider.NodeClaimRequirements(nc)
		if err != nil {
			panic(err)
		}
		out = append(out, &scheduling.ExistingNode{Name: nc.Name, Labels: nc.Labels, Requirements: reqs,
			Taints: nc.Spec.Taints, Allocatable: nc.Status.Allocatable, Managed: true})
	}
	return out
}

func (f *fakeCluster) NodePoolResources(name string) corev1.ResourceList {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.usage[name]; ok {
		return u.DeepCopy()
	}
	claims := &v1.NodeClaimList{}
	if err := f.kube.List(context.Background(), claims, client.MatchingLabels{v1.NodePoolLabelKey: name}); err != nil {
		panic(err)
	}
	out := corev1.ResourceList{v1.ResourceNodes: *resource.NewQuantity(int64(len(claims.Items)), resource.DecimalSI)}
	for _, nc := range claims.Items {
		for k, q := range nc.Status.Capacity {
			sum := out[k]
			sum.Add(q)
			out[k] = sum
		}
	}
	return out
}

func (f *fakeCluster) pinUsage(pool string, usage corev1.ResourceList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.usage == nil {
		f.usage = map[string]corev1.ResourceList{}
	}
	f.usage[pool] = usage
}

// event is one recorded Kubernetes event.
type event struct {
	object, eventType, reason, message string
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []event
}

func (r *fakeRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := obj.(client.Object).GetName()
	r.events = append(r.events, event{name, eventType, reason, fmt.Sprintf(format, args...)})
}

func (r *fakeRecorder) forObject(name string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if e.object == name {
			out = append(out, e)
		}
	}
	return out
}

// cleanup removes everything a test created. Nothing in this control plane
// adds finalizers, so deletes are immediate.
func cleanup(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		zero := client.GracePeriodSeconds(0)
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), zero))
		require.NoError(t, testutil.DeleteNodeClaims(ctx, cp.Client))
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodePool{}))
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &corev1.Node{}))
		require.Eventually(t, func() bool {
			pods := &corev1.PodList{}
			claims := &v1.NodeClaimList{}
			return cp.Client.List(ctx, pods) == nil && len(pods.Items) == 0 &&
				cp.Client.List(ctx, claims) == nil && len(claims.Items) == 0
		}, 10*time.Second, 50*time.Millisecond)
	})
}

// nodePool creates a Ready NodePool allowing linux/amd64 on-demand capacity
// and returns it as stored.
func nodePool(t *testing.T, name string, mutate func(*v1.NodePool)) *v1.NodePool {
	t.Helper()
	ctx := context.Background()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.SetLabelMap(map[string]string{"capacity.example.io/pool": name})
	np.Spec.Template.Annotations = map[string]string{"example.io/owner": "team-a"}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "example.io/dedicated", Value: name, Effect: corev1.TaintEffectNoSchedule}}
	np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "example.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	if mutate != nil {
		mutate(np)
	}
	require.NoError(t, cp.Client.Create(ctx, np))
	now := metav1.Now()
	np.Status.Conditions = []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now},
		{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded, LastTransitionTime: now},
		{Type: v1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeNodeClassReady, LastTransitionTime: now},
	}
	require.NoError(t, cp.Client.Status().Update(ctx, np))
	return np
}

// pendingPod creates a pod the kube-scheduler has marked Unschedulable.
func pendingPod(t *testing.T, name string, cpu string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "inflate"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
			}}},
			Tolerations: []corev1.Toleration{{Key: "example.io/dedicated", Operator: corev1.TolerationOpExists}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	require.NoError(t, cp.Client.Create(ctx, pod))
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, pod))
	return pod
}

func nodeClaims(t *testing.T) []v1.NodeClaim {
	t.Helper()
	list := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(context.Background(), list))
	return list.Items
}
