package provisioning_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// burstCatalog offers a 2-cpu and an 8-cpu type, linux/amd64 on-demand.
func burstCatalog() []*cloudprovider.InstanceType {
	it := func(name, cpu string, price float64) *cloudprovider.InstanceType {
		return &cloudprovider.InstanceType{
			Name: name,
			Requirements: scheduling.NewRequirements(
				scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, name),
				scheduling.NewRequirement(corev1.LabelArchStable, scheduling.OpIn, "amd64"),
				scheduling.NewRequirement(corev1.LabelOSStable, scheduling.OpIn, "linux"),
				scheduling.NewRequirement(corev1.LabelTopologyZone, scheduling.OpIn, "zone-a"),
				scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeOnDemand),
			),
			Offerings: []cloudprovider.Offering{{Zone: "zone-a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("32Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
		}
	}
	return []*cloudprovider.InstanceType{it("burst.small", "2", 0.1), it("burst.large", "8", 0.3)}
}

// TestLimitsHoldAcrossRoundsBeforeLaunch: two provisioning rounds run
// before the first round's NodeClaim has launched. The cluster state must
// charge that NodeClaim what the solver charged it (the largest type it may
// still become), or the second round sees headroom that is not there and
// the pool can end up past its cpu limit once both launch.
func TestLimitsHoldAcrossRoundsBeforeLaunch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	burstCleanup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fakecloud.New(clk)
	cloud.Catalog = burstCatalog()
	byName := map[string]*cloudprovider.InstanceType{}
	for _, it := range cloud.Catalog {
		byName[it.Name] = it
	}
	cluster := state.NewCluster(clk, cp.Client, state.Options{
		InstanceTypes: func(string) []*cloudprovider.InstanceType { return cloud.Catalog },
	})
	prov := provisioning.NewProvisioner(cp.Client, cloud, cluster, &testutil.Recorder{}, provisioning.Options{Clock: clk})

	const limit = "10"
	pool := testutil.UniqueName("burst")
	burstNodePool(t, ctx, pool, limit)

	// Round 1: one 1-cpu pod. Its NodeClaim may become either type.
	burstPod(t, ctx, testutil.UniqueName("burst-a"), pool)
	round, err := prov.Provision(ctx)
	require.NoError(t, err)
	require.NotNil(t, round)
	require.Len(t, round.NodeClaims, 1)
	require.NotNil(t, round.NodeClaims[0])

	// Round 2, still before any launch: more pods than the first NodeClaim
	// has room for.
	for range 3 {
		burstPod(t, ctx, testutil.UniqueName("burst-b"), pool)
	}
	_, err = prov.Provision(ctx)
	require.NoError(t, client.IgnoreNotFound(err))

	// Whatever each NodeClaim launches as, the pool stays within its limit.
	claims := &v1.NodeClaimList{}
	require.NoError(t, cp.Client.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: pool}))
	require.GreaterOrEqual(t, len(claims.Items), 1)
	worst := resource.Quantity{}
	for i := range claims.Items {
		reqs, err := cloudprovider.NodeClaimRequirements(&claims.Items[i])
		require.NoError(t, err)
		largest := resource.Quantity{}
		for _, name := range reqs.Get(corev1.LabelInstanceTypeStable).Values() {
			it, ok := byName[name]
			require.True(t, ok, "unknown instance type %s", name)
			if c := it.Capacity[corev1.ResourceCPU]; c.Cmp(largest) > 0 {
				largest = c.DeepCopy()
			}
		}
		worst.Add(largest)
	}
	max := resource.MustParse(limit)
	require.True(t, worst.Cmp(max) <= 0, "%d NodeClaims could launch %s cpu, over the limit of %s", len(claims.Items), worst.String(), limit)
}

func burstCleanup(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		zero := client.GracePeriodSeconds(0)
		_ = cp.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.HasLabels{"burst.example.io/pool"}, zero)
		_ = testutil.DeleteNodeClaims(ctx, cp.Client, client.HasLabels{"burst.example.io/pool"})
		_ = cp.Client.DeleteAllOf(ctx, &v1.NodePool{}, client.HasLabels{"burst.example.io/pool"})
	})
}

func burstNodePool(t *testing.T, ctx context.Context, name, cpuLimit string) {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"burst.example.io/pool": name}}}
	np.Spec.Template.SetLabelMap(map[string]string{"burst.example.io/pool": name})
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
	}
	np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse(cpuLimit)}
	require.NoError(t, cp.Client.Create(ctx, np))
	now := metav1.Now()
	np.Status.Conditions = []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: now},
		{Type: v1.ConditionTypeValidationSucceeded, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeValidationSucceeded, LastTransitionTime: now},
		{Type: v1.ConditionTypeNodeClassReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeNodeClassReady, LastTransitionTime: now},
	}
	require.NoError(t, cp.Client.Status().Update(ctx, np))
}

// burstPod is a pending 1-cpu pod that selects the pool (so other tests'
// pools are not used for it).
func burstPod(t *testing.T, ctx context.Context, name, pool string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"burst.example.io/pool": pool}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"burst.example.io/pool": pool},
			Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			}}},
		},
	}
	require.NoError(t, cp.Client.Create(ctx, pod))
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, pod))
}
