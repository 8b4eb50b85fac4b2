package cloudprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

func TestFleetRequestShape(t *testing.T) {
	ctx := context.Background()
	rec := &recordingEC2{Client: ec2API}
	e := newEnvWith(t, rec)

	cases := []struct {
		name          string
		capacityTypes []string
		wantType      ec2types.DefaultTargetCapacityType
	}{
		{"on-demand is lowest-price", []string{"on-demand"}, ec2types.DefaultTargetCapacityTypeOnDemand},
		// Spot only: with on-demand allowed too, the spot offerings dearer
		// than the cheapest on-demand one are dropped (launchfilter.go),
		// which leaves fewer than the cap.
		{"spot is price-capacity-optimized", []string{"spot"}, ec2types.DefaultTargetCapacityTypeSpot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := e.nodeClaim(t, tc.capacityTypes...)
			// No instance-type requirement: every amd64 type of the class
			// is a candidate, far more than the cap.
			nc.Spec.Requirements = nc.Spec.Requirements[1:]
			nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
				Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}})
			got, err := e.cp.Create(ctx, nc)
			require.NoError(t, err)
			in := rec.last(t)
			assert.Equal(t, ec2types.FleetTypeInstant, in.Type)
			assert.Equal(t, tc.wantType, in.TargetCapacitySpecification.DefaultTargetCapacityType)
			assert.Equal(t, int32(1), aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity))
			if tc.wantType == ec2types.DefaultTargetCapacityTypeSpot {
				require.NotNil(t, in.SpotOptions)
				assert.Equal(t, ec2types.SpotAllocationStrategyPriceCapacityOptimized, in.SpotOptions.AllocationStrategy)
			} else {
				require.NotNil(t, in.OnDemandOptions)
				assert.Equal(t, ec2types.FleetOnDemandAllocationStrategyLowestPrice, in.OnDemandOptions.AllocationStrategy)
			}
			types := map[string]bool{}
			for _, c := range in.LaunchTemplateConfigs {
				for _, o := range c.Overrides {
					types[string(o.InstanceType)] = true
					assert.Equal(t, e.nodeClass.Status.Subnets[0].ID, aws.ToString(o.SubnetId))
				}
			}
			assert.Len(t, types, instance.MaxInstanceTypes, "the override cap")
			resources := map[ec2types.ResourceType]bool{}
			for _, ts := range in.TagSpecifications {
				resources[ts.ResourceType] = true
				tags := map[string]string{}
				for _, tag := range ts.Tags {
					tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
				}
				assert.Equal(t, nc.Name, tags[awsv1.NodeClaimTagKey], ts.ResourceType)
			}
			assert.True(t, resources[ec2types.ResourceTypeInstance] && resources[ec2types.ResourceTypeVolume])
			cleanup(t, e, got)
		})
	}
}

// TestLaunchedInstanceBootsFromItsUserData: the instance joins as the Node
// its user data describes (the NodeClaim's labels and taints, the
// unregistered taint, max-pods of its type), with the provider ID Create
// returned.
func TestLaunchedInstanceBootsFromItsUserData(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	booter := local.Boot(ctx, kube, awslocal.BootOptions{ClusterName: clusterName})
	defer booter.Stop()

	nc := e.nodeClaim(t)
	nc.Labels["team"] = "ml"
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	id, err := instance.ParseProviderID(got.Status.ProviderID)
	require.NoError(t, err)

	var res awslocal.BootResult
	require.Eventually(t, func() bool {
		var ok bool
		res, ok = booter.Result(id)
		return ok && (res.Node != "" || res.Error != "")
	}, 30*time.Second, 200*time.Millisecond)
	require.Empty(t, res.Error)
	node := &corev1.Node{}
	require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: res.Node}, node))
	assert.Equal(t, got.Status.ProviderID, node.Spec.ProviderID)
	assert.Equal(t, "ml", node.Labels["team"])
	assert.Equal(t, "default", node.Labels[v1.NodePoolLabelKey])
	assert.Equal(t, got.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelInstanceTypeStable])
	assert.Contains(t, node.Spec.Taints, nc.Spec.Taints[0])
	assert.Contains(t, node.Spec.Taints, v1.UnregisteredNoExecuteTaint, "registered with the unregistered taint, as upstream's user data does")
	assert.True(t, got.Status.Capacity.Pods().Equal(*node.Status.Capacity.Pods()), "max-pods %s from the user data, nodeclaim says %s",
		node.Status.Capacity.Pods(), got.Status.Capacity.Pods())

	cleanup(t, e, got)
	require.Eventually(t, func() bool {
		r, _ := booter.Result(id)
		return r.Gone
	}, 30*time.Second, 200*time.Millisecond, "the terminated instance's Node goes away")
}
