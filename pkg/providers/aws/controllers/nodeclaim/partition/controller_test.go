package partition_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-go/karpenter/pkg/apis"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclaim/partition"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/placementgroup"
)

type fakeInstances map[string]*instance.Instance

func (f fakeInstances) Get(_ context.Context, id string) (*instance.Instance, error) {
	return f[id], nil
}

type fakeGroups map[string]*placementgroup.PlacementGroup

func (f fakeGroups) Get(_ context.Context, sel *awsv1.PlacementGroupSelectorTerm) (*placementgroup.PlacementGroup, error) {
	if sel == nil {
		return nil, nil
	}
	return f[sel.Name], nil
}

func claim(name, class, group, instanceID, node string) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{awsv1.LabelPlacementGroupID: group}},
		Spec:       v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}},
		Status:     v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/" + instanceID, NodeName: node},
	}
}

// TestPartitionLabel labels a NodeClaim in a partition group, and its Node,
// with the partition EC2 reports; waits while EC2 reports none; leaves a
// NodeClaim in a cluster group alone.
func TestPartitionLabel(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	require.NoError(t, apis.AddToScheme(scheme))
	classes := []client.Object{
		&awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "kafka"}, Spec: awsv1.EC2NodeClassSpec{PlacementGroupSelector: &awsv1.PlacementGroupSelectorTerm{Name: "kafka"}}},
		&awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "hpc"}, Spec: awsv1.EC2NodeClassSpec{PlacementGroupSelector: &awsv1.PlacementGroupSelectorTerm{Name: "hpc"}}},
	}
	objs := append(classes,
		claim("in-partition", "kafka", "pg-0000000000000000a", "i-1", "node-1"),
		claim("not-reported", "kafka", "pg-0000000000000000a", "i-2", ""),
		claim("in-cluster", "hpc", "pg-0000000000000000b", "i-3", ""),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	c := partition.NewController(kube,
		fakeInstances{"i-1": {ID: "i-1", PartitionNumber: 2}, "i-2": {ID: "i-2"}, "i-3": {ID: "i-3"}},
		fakeGroups{"kafka": {ID: "pg-0000000000000000a", Name: "kafka", Strategy: placementgroup.StrategyPartition, PartitionCount: 3},
			"hpc": {ID: "pg-0000000000000000b", Name: "hpc", Strategy: placementgroup.StrategyCluster}})

	reconcileOne := func(name string) reconcile.Result {
		res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		require.NoError(t, err)
		return res
	}
	label := func(obj client.Object, name string) string {
		require.NoError(t, kube.Get(ctx, client.ObjectKey{Name: name}, obj))
		return obj.GetLabels()[awsv1.LabelPlacementGroupPartition]
	}

	assert.Zero(t, reconcileOne("in-partition"))
	assert.Equal(t, "2", label(&v1.NodeClaim{}, "in-partition"))
	assert.Equal(t, "2", label(&corev1.Node{}, "node-1"))

	assert.Equal(t, partition.RetryAfter, reconcileOne("not-reported").RequeueAfter, "EC2 has not said: look again")
	assert.Empty(t, label(&v1.NodeClaim{}, "not-reported"))

	assert.Zero(t, reconcileOne("in-cluster"))
	assert.Empty(t, label(&v1.NodeClaim{}, "in-cluster"), "a cluster group has no partitions")
}
