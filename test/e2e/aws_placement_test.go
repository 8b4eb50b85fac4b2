package e2e_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// metaCondition is the condition of type t, or nil.
func metaCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// TestAWSPlacementGroups runs placementGroupSelector through the controller
// binary and the local AWS, under the shipped IAM policy:
//   - a partition placement group made in EC2 and selected by name in the
//     examples' EC2NodeClass: PlacementGroupReady=True, the class Ready;
//   - one inflate pod: its instance is launched in the group (EC2 reports
//     the group and a partition in DescribeInstances), and the NodeClaim
//     and its Node carry placement-group-id, the NodeClaim the partition;
//   - the selector changed to another partition group: the NodeClaim goes
//     Drifted (NodeClassDrift: the selector is part of the class hash, as
//     upstream's) and is replaced by one whose instance EC2 launched in
//     the new group, labelled with its id;
//   - the selector changed to a name EC2 does not know:
//     PlacementGroupReady=False with reason PlacementGroupNotFound, the
//     class not Ready.
func TestAWSPlacementGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	const groupName = "kafka"
	pg, err := e.ec2.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String(groupName), Strategy: ec2types.PlacementStrategyPartition,
		PartitionCount: aws.Int32(3)})
	require.NoError(t, err)
	t.Logf("placement group %s (%s)", groupName, aws.ToString(pg.PlacementGroup.GroupId))

	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsInflate)))
	class := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	class.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelectorTerm{Name: groupName}
	require.NoError(t, cp.Client.Update(ctx, class))
	e.startAWSController(t, "controller")

	require.Eventually(t, func() bool {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return false
		}
		return metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady)
	}, 2*time.Minute, time.Second, "EC2NodeClass default should go Ready with its placement group")
	require.True(t, metaTrue(class.Status.Conditions, awsv1.ConditionTypePlacementGroupReady))

	// A node in the group.
	scale(t, ctx, cp, "inflate", 1)
	var claims []v1.NodeClaim
	require.Eventually(t, func() bool {
		claims = readyClaims(ctx, cp)
		return len(claims) == 1 && runningOnOurNodes(ctx, t, cp, "app=inflate") == 1
	}, 3*time.Minute, time.Second, "the inflate pod should run on a Ready NodeClaim")
	nc := claims[0]
	_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
	require.Truef(t, ok, "providerID %q", nc.Status.ProviderID)
	inst, found := e.liveInstances(t, ctx)[id]
	require.Truef(t, found, "instance %s of %s is live", id, nc.Name)
	require.NotNil(t, inst.Placement)
	require.Equal(t, groupName, aws.ToString(inst.Placement.GroupName), "EC2 launched the instance in the group")
	require.Equal(t, aws.ToString(pg.PlacementGroup.GroupId), aws.ToString(inst.Placement.GroupId))
	partition := aws.ToInt32(inst.Placement.PartitionNumber)
	require.True(t, partition >= 1 && partition <= 3, "partition %d", partition)
	require.Equal(t, aws.ToString(pg.PlacementGroup.GroupId), nc.Labels[awsv1.LabelPlacementGroupID])
	// The partition is labelled at launch when EC2 already reports the
	// instance; with EC2's eventual consistency it may not yet, and the
	// partition controller labels it once it does.
	require.Eventually(t, func() bool {
		got := &v1.NodeClaim{}
		return cp.Client.Get(ctx, client.ObjectKey{Name: nc.Name}, got) == nil &&
			got.Labels[awsv1.LabelPlacementGroupPartition] == strconv.Itoa(int(partition))
	}, time.Minute, time.Second, "the NodeClaim carries partition %d", partition)
	node := &corev1.Node{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
	require.Equal(t, aws.ToString(pg.PlacementGroup.GroupId), node.Labels[awsv1.LabelPlacementGroupID])
	t.Logf("%s: %s in %s partition %d", nc.Name, id, groupName, partition)

	// Another group: the node drifts and its replacement runs in the new
	// group.
	const otherName = "kafka-b"
	other, err := e.ec2.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String(otherName), Strategy: ec2types.PlacementStrategyPartition,
		PartitionCount: aws.Int32(2)})
	require.NoError(t, err)
	otherID := aws.ToString(other.PlacementGroup.GroupId)
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	class.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelectorTerm{Name: otherName}
	require.NoError(t, cp.Client.Update(ctx, class))
	driftedWith := ""
	var replacement v1.NodeClaim
	require.Eventually(t, func() bool {
		old := &v1.NodeClaim{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: nc.Name}, old); err == nil {
			if c := condition(old.Status.Conditions, v1.ConditionTypeDrifted); c != nil && c.Status == metav1.ConditionTrue {
				driftedWith = c.Reason
			}
			return false
		}
		claims = readyClaims(ctx, cp)
		if len(claims) != 1 || runningOnOurNodes(ctx, t, cp, "app=inflate") != 1 {
			return false
		}
		replacement = claims[0]
		return replacement.Labels[awsv1.LabelPlacementGroupID] == otherID
	}, 4*time.Minute, time.Second, "the drifted NodeClaim should be replaced by one in %s", otherName)
	require.Equal(t, "NodeClassDrift", driftedWith, "the old NodeClaim went Drifted before it was replaced")
	_, newID, ok := parseAWSProviderID(replacement.Status.ProviderID)
	require.True(t, ok)
	inst, found = e.liveInstances(t, ctx)[newID]
	require.Truef(t, found, "instance %s of %s is live", newID, replacement.Name)
	require.Equal(t, otherID, aws.ToString(inst.Placement.GroupId), "EC2 launched the replacement in the new group")
	t.Logf("drifted %s (%s) replaced by %s: %s in %s", nc.Name, driftedWith, replacement.Name, newID, otherName)

	// A group EC2 does not know.
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	class.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelectorTerm{Name: "no-such-group"}
	require.NoError(t, cp.Client.Update(ctx, class))
	var cond *metav1.Condition
	require.Eventually(t, func() bool {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return false
		}
		cond = metaCondition(class.Status.Conditions, awsv1.ConditionTypePlacementGroupReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.ObservedGeneration == class.Generation
	}, time.Minute, time.Second, "PlacementGroupReady should go False for an unknown group")
	require.Equal(t, nodeclass.ReasonPlacementGroupNotFound, cond.Reason)
	require.False(t, metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady), "the class is not Ready without its group")
}
