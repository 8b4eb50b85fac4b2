package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
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
//   - a cluster placement group made in EC2 and selected by name in the
//     examples' EC2NodeClass: PlacementGroupReady=True, the class Ready;
//   - the selector changed to a name EC2 does not know:
//     PlacementGroupReady=False with reason PlacementGroupNotFound, the
//     class not Ready.
func TestAWSPlacementGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	const groupName = "hpc-cluster"
	pg, err := e.ec2.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String(groupName), Strategy: ec2types.PlacementStrategyCluster})
	require.NoError(t, err)
	t.Logf("placement group %s (%s)", groupName, aws.ToString(pg.PlacementGroup.GroupId))

	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml")
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

	// A group EC2 does not know.
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
