package cloudprovider_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

func TestCreateLaunchesTheCheapestOnDemandTypeAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	order := e.byPrice(t)
	nc := e.nodeClaim(t)

	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	insts := instancesOf(t, nc.Name)
	require.Len(t, insts, 1)
	inst := insts[0]
	assert.Equal(t, order[0], string(inst.InstanceType), "lowest-price picks the cheapest allowed type")
	assert.Equal(t, "aws:///"+zone+"/"+aws.ToString(inst.InstanceId), got.Status.ProviderID)
	assert.Equal(t, order[0], got.Labels[corev1.LabelInstanceTypeStable])
	assert.Equal(t, zone, got.Labels[corev1.LabelTopologyZone])
	assert.Equal(t, "on-demand", got.Labels[v1.CapacityTypeLabelKey])
	assert.Equal(t, "amd64", got.Labels[corev1.LabelArchStable])
	assert.Equal(t, "default", got.Labels[v1.NodePoolLabelKey])
	assert.Equal(t, aws.ToString(inst.ImageId), got.Status.ImageID)
	assert.Equal(t, e.nodeClass.Status.AMIs[0].ID, got.Status.ImageID)
	assert.False(t, got.Status.Capacity.Cpu().IsZero(), "capacity from the instance type")
	assert.Equal(t, 1, got.Status.Allocatable.Cpu().Cmp(*resourceMilli(1000)), "allocatable cpu above 1 on a 2-vCPU type")
	assert.Equal(t, -1, got.Status.Allocatable.Cpu().Cmp(*got.Status.Capacity.Cpu()), "allocatable below capacity")

	tags := tagsOf(inst)
	assert.Equal(t, nc.Name, tags[awsv1.NodeClaimTagKey])
	assert.Equal(t, "default", tags[v1.NodePoolLabelKey])
	assert.Equal(t, e.nodeClass.Name, tags[awsv1.NodeClassTagKey])
	assert.Equal(t, clusterName, tags[awsv1.EKSClusterNameTagKey])
	assert.Equal(t, "owned", tags[awsv1.KubernetesClusterTagKeyPrefix+clusterName])
	assert.Equal(t, "platform", tags["team"])

	fleets := local.Calls("ec2", "CreateFleet")
	again, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, got.Status.ProviderID, again.Status.ProviderID, "the second Create returns the same instance")
	assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"), "no second CreateFleet")
	assert.Len(t, instancesOf(t, nc.Name), 1)

	// A fresh provider (a restarted controller) finds it by the tag too.
	fresh := newEnvSharingClass(t, e)
	third, err := fresh.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, got.Status.ProviderID, third.Status.ProviderID)
	assert.Len(t, instancesOf(t, nc.Name), 1)
	cleanup(t, e, got)
}

func TestInsufficientCapacityFallsBackAndIsCached(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	order := e.byPrice(t)
	require.NoError(t, local.SetCapacity(order[0], zone, awslocal.CapacityTypeOnDemand, 0))
	var zoneID string
	for _, s := range e.nodeClass.Status.Subnets {
		if s.Zone == zone {
			zoneID = s.ZoneID
		}
	}
	require.NotEmpty(t, zoneID)
	failures := metrics.InstanceLaunchFailuresTotal.WithLabelValues(zone, zoneID, "on-demand", "InsufficientInstanceCapacity")
	before := testutil.ToFloat64(failures)

	nc := e.nodeClaim(t)
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, order[1], got.Labels[corev1.LabelInstanceTypeStable], "the next cheapest launches")
	assert.Equal(t, 1.0, testutil.ToFloat64(failures)-before, "the failed override is counted with its zone id and EC2's code")
	key := cloudprovider.OfferingKey{InstanceType: order[0], Zone: zone, CapacityType: "on-demand"}
	assert.True(t, e.unavailable.IsUnavailable(key), "the ICE'd offering is cached unavailable")
	assert.False(t, e.unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: order[1], Zone: zone, CapacityType: "on-demand"}))

	// The instance-type list now reports it unavailable.
	its, err := e.types.List(ctx, e.nodeClass)
	require.NoError(t, err)
	for _, it := range its {
		if it.Name != order[0] {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == "on-demand" {
				assert.False(t, o.Available)
			}
		}
	}
	cleanup(t, e, got)
}

func TestNoCapacityAnywhereIsInsufficientCapacity(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for _, c := range candidates {
		require.NoError(t, local.SetCapacity(c, zone, awslocal.CapacityTypeOnDemand, 0))
	}
	nc := e.nodeClaim(t)
	_, err := e.cp.Create(ctx, nc)
	require.Error(t, err)
	require.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)
	assert.Empty(t, instancesOf(t, nc.Name))
	for _, c := range candidates {
		assert.True(t, e.unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: c, Zone: zone, CapacityType: "on-demand"}), c)
	}
	// Every offering is now cached unavailable: the next Create fails
	// before calling EC2.
	fleets := local.Calls("ec2", "CreateFleet")
	_, err = e.cp.Create(ctx, nc)
	require.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)
	assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"))
}

func TestSpotUsesPriceCapacityOptimized(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := e.nodeClaim(t, "spot", "on-demand")
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, "spot", got.Labels[v1.CapacityTypeLabelKey])
	insts := instancesOf(t, nc.Name)
	require.Len(t, insts, 1)
	assert.Equal(t, "spot", string(insts[0].InstanceLifecycle))
	cleanup(t, e, got)
}

func TestGetListDelete(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := e.nodeClaim(t)
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)

	viewed, err := e.cp.Get(ctx, got.Status.ProviderID)
	require.NoError(t, err)
	assert.Equal(t, nc.Name, viewed.Name)
	assert.Equal(t, got.Labels[corev1.LabelInstanceTypeStable], viewed.Labels[corev1.LabelInstanceTypeStable])
	assert.Equal(t, zone, viewed.Labels[corev1.LabelTopologyZone])
	assert.True(t, viewed.Status.Capacity.Cpu().Equal(*got.Status.Capacity.Cpu()))
	assert.False(t, viewed.CreationTimestamp.IsZero())

	all, err := e.cp.List(ctx)
	require.NoError(t, err)
	found := false
	for _, c := range all {
		if c.Status.ProviderID == got.Status.ProviderID {
			found = true
			assert.Equal(t, nc.Name, c.Name)
		}
	}
	assert.True(t, found, "List includes the instance")

	claim := nc.DeepCopy()
	claim.Status.ProviderID = got.Status.ProviderID
	require.NoError(t, deleteUntilGone(t, e, claim))
	err = e.cp.Delete(ctx, claim)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err), "second Delete: %v", err)
	_, err = e.cp.Get(ctx, got.Status.ProviderID)
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err), "Get after Delete: %v", err)
	all, err = e.cp.List(ctx)
	require.NoError(t, err)
	for _, c := range all {
		assert.NotEqual(t, got.Status.ProviderID, c.Status.ProviderID, "List leaves out terminated instances")
	}

	_, err = e.cp.Get(ctx, "aws:///us-east-1a/i-0123456789abcdef0")
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err), "unknown instance: %v", err)
	_, err = e.cp.Get(ctx, "kwok://x")
	assert.True(t, cloudprovider.IsNodeClaimNotFoundError(err), "foreign provider ID: %v", err)
}

func TestThrottledCreateFleetIsRetriedWithoutDuplicates(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	order := e.byPrice(t)
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "CreateFleet", Kind: awslocal.FaultThrottle, Count: 2})
	require.NoError(t, err)
	fleets := local.Calls("ec2", "CreateFleet")
	nc := e.nodeClaim(t)
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, order[0], got.Labels[corev1.LabelInstanceTypeStable])
	assert.Len(t, instancesOf(t, nc.Name), 1, "no duplicate instance")
	assert.Equal(t, fleets+3, local.Calls("ec2", "CreateFleet"), "two throttled attempts retried by the SDK, then one launch")
	assert.Empty(t, local.Faults(), "the fault was used up")
	cleanup(t, e, got)
}

func TestNodeClassNotReady(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.nodeClass.Status.Conditions[0].Status = "False"
	e.nodeClass.Status.Conditions[0].Reason = "SubnetsNotFound"
	e.nodeClass.Status.Conditions[0].Message = "SubnetSelector did not match any Subnets"
	require.NoError(t, kube.Status().Update(ctx, e.nodeClass))
	nc := e.nodeClaim(t)
	fleets := local.Calls("ec2", "CreateFleet")
	_, err := e.cp.Create(ctx, nc)
	require.True(t, cloudprovider.IsNodeClassNotReadyError(err), "got %v", err)
	assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"))
}

func TestProviderIdentity(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, "aws", e.cp.Name())
	classes := e.cp.GetSupportedNodeClasses()
	require.Len(t, classes, 1)
	_, ok := classes[0].(*awsv1.EC2NodeClass)
	assert.True(t, ok)
	reason, err := e.cp.IsDrifted(context.Background(), e.nodeClaim(t))
	require.NoError(t, err)
	assert.Empty(t, reason)
	policies := e.cp.RepairPolicies()
	assert.Contains(t, policies, cloudprovider.RepairPolicy{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * 60 * 1e9})
	assert.Contains(t, policies, cloudprovider.RepairPolicy{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * 60 * 1e9})
}
