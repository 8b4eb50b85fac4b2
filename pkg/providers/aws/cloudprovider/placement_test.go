package cloudprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

// selectGroup points the env's class at a placement group by name.
func (e *env) selectGroup(t *testing.T, sel *awsv1.PlacementGroupSelectorTerm) {
	t.Helper()
	ctx := context.Background()
	nc := &awsv1.EC2NodeClass{}
	require.NoError(t, kube.Get(ctx, client.ObjectKeyFromObject(e.nodeClass), nc))
	nc.Spec.PlacementGroupSelector = sel
	require.NoError(t, kube.Update(ctx, nc))
	e.nodeClass = nc
}

func makeGroup(t *testing.T, in *ec2.CreatePlacementGroupInput) ec2types.PlacementGroup {
	t.Helper()
	out, err := ec2API.CreatePlacementGroup(context.Background(), in)
	require.NoError(t, err)
	return *out.PlacementGroup
}

// TestPlacementGroupLaunch launches a class's NodeClaims into its
// partition placement group: the template places the instance in the
// group (and in the partition a NodeClaim pins), the NodeClaim carries the
// group's id and the partition EC2 reports, the instance types carry the
// group's labels as requirements; a group deleted and made again under
// the same name drifts the NodeClaim (PlacementGroupDrift), and a group
// EC2 does not know fails the launch; a type without the group's strategy
// offers nothing.
func TestPlacementGroupLaunch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	name := "pg-" + uuid.NewString()[:8]
	pg := makeGroup(t, &ec2.CreatePlacementGroupInput{GroupName: &name, Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(3)})
	e.selectGroup(t, &awsv1.PlacementGroupSelectorTerm{Name: name})

	// The types carry the group's requirements.
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: e.nodeClass.Name}}}}}
	its, err := e.cp.GetInstanceTypes(ctx, pool)
	require.NoError(t, err)
	require.NotEmpty(t, its)
	assert.Equal(t, []string{aws.ToString(pg.GroupId)}, its[0].Requirements.Get(awsv1.LabelPlacementGroupID).Values())
	assert.ElementsMatch(t, []string{"1", "2", "3"}, its[0].Requirements.Get(awsv1.LabelPlacementGroupPartition).Values())

	// EC2 chooses the partition.
	nc := e.nodeClaim(t)
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	insts := instancesOf(t, nc.Name)
	require.Len(t, insts, 1)
	require.Equal(t, name, aws.ToString(insts[0].Placement.GroupName))
	require.Equal(t, aws.ToString(pg.GroupId), aws.ToString(insts[0].Placement.GroupId))
	assert.Equal(t, aws.ToString(pg.GroupId), got.Labels[awsv1.LabelPlacementGroupID])
	assert.Equal(t, "1", got.Labels[awsv1.LabelPlacementGroupPartition], "the first instance goes to partition 1")
	reason, err := e.cp.IsDrifted(ctx, got)
	require.NoError(t, err)
	assert.Empty(t, reason)

	// A NodeClaim pinning partition 3.
	pinned := e.nodeClaim(t)
	pinned.Spec.Requirements = append(pinned.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
		Key: awsv1.LabelPlacementGroupPartition, Operator: corev1.NodeSelectorOpIn, Values: []string{"3"}})
	gotPinned, err := e.cp.Create(ctx, pinned)
	require.NoError(t, err)
	insts = instancesOf(t, pinned.Name)
	require.Len(t, insts, 1)
	require.Equal(t, int32(3), aws.ToInt32(insts[0].Placement.PartitionNumber))
	assert.Equal(t, "3", gotPinned.Labels[awsv1.LabelPlacementGroupPartition])
	cleanup(t, e, gotPinned)

	// The provider's view of the instance reports the group too.
	viaGet, err := e.cp.Get(ctx, got.Status.ProviderID)
	require.NoError(t, err)
	assert.Equal(t, aws.ToString(pg.GroupId), viaGet.Labels[awsv1.LabelPlacementGroupID])
	assert.Equal(t, "1", viaGet.Labels[awsv1.LabelPlacementGroupPartition])

	// The class now selects another group: the instance is outside it.
	other := "pg-" + uuid.NewString()[:8]
	makeGroup(t, &ec2.CreatePlacementGroupInput{GroupName: &other, Strategy: ec2types.PlacementStrategyCluster})
	e.selectGroup(t, &awsv1.PlacementGroupSelectorTerm{Name: other})
	// t3 types do not support cluster groups (EC2's PlacementGroupInfo):
	// no offering of theirs is available in it.
	its, err = e.cp.GetInstanceTypes(ctx, pool)
	require.NoError(t, err)
	available := map[string]bool{}
	for _, it := range its {
		for _, o := range it.Offerings {
			available[it.Name] = available[it.Name] || o.Available
		}
	}
	assert.False(t, available["t3.large"], "t3.large cannot join a cluster group")
	assert.True(t, available["m5.large"])
	reason, err = e.cp.IsDrifted(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, awscloudprovider.PlacementGroupDrift, reason)
	cleanup(t, e, got)

	// A group EC2 does not know fails the launch; nothing runs.
	e.selectGroup(t, &awsv1.PlacementGroupSelectorTerm{Name: "missing-" + name})
	missing := e.nodeClaim(t)
	_, err = e.cp.Create(ctx, missing)
	var createErr *cloudprovider.CreateError
	require.ErrorAs(t, err, &createErr)
	assert.Equal(t, "PlacementGroupNotFound", createErr.ConditionReason)
	assert.Empty(t, instancesOf(t, missing.Name))
}

// TestClusterGroupOneZone: a cluster placement group lives in one zone, so
// a class in two zones offers only one: the class's first subnet's zone
// while the group has no NodeClaims, then the zone its NodeClaims are in.
func TestClusterGroupOneZone(t *testing.T) {
	ctx := context.Background()
	var subnets []ec2types.Subnet
	for _, z := range []string{"us-east-1a", "us-east-1b"} {
		out, err := ec2API.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("availability-zone"), Values: []string{z}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
		require.NoError(t, err)
		require.NotEmpty(t, out.Subnets)
		subnets = append(subnets, out.Subnets[0])
	}
	e := newEnvIn(t, ec2API, subnets)
	name := "hpc-" + uuid.NewString()[:8]
	pg := makeGroup(t, &ec2.CreatePlacementGroupInput{GroupName: &name, Strategy: ec2types.PlacementStrategyCluster})
	e.selectGroup(t, &awsv1.PlacementGroupSelectorTerm{Name: name})
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: e.nodeClass.Name}}}}}
	zones := func() []string {
		t.Helper()
		its, err := e.cp.GetInstanceTypes(ctx, pool)
		require.NoError(t, err)
		set := map[string]bool{}
		for _, it := range its {
			if it.Name != "m5.large" {
				continue
			}
			for _, o := range it.Offerings {
				if o.Available {
					set[o.Zone] = true
				}
			}
		}
		var out []string
		for z := range set {
			out = append(out, z)
		}
		return out
	}
	assert.Equal(t, []string{"us-east-1a"}, zones(), "the first subnet's zone while the group is empty")

	member := e.nodeClaim(t)
	member.Labels[awsv1.LabelPlacementGroupID] = aws.ToString(pg.GroupId)
	member.Labels[corev1.LabelTopologyZone] = "us-east-1b"
	require.NoError(t, kube.Create(ctx, member))
	t.Cleanup(func() { _ = kube.Delete(context.Background(), member) })
	require.Eventually(t, func() bool {
		z := zones()
		return len(z) == 1 && z[0] == "us-east-1b"
	}, 10*time.Second, 100*time.Millisecond, "the zone the group's NodeClaims are in")
}

// TestSpreadGroupZoneLimit: a rack spread group holds seven instances per
// zone. With seven in us-east-1a, a NodeClaim allowing both zones lands in
// us-east-1b and the refusal makes us-east-1a unavailable to the group's
// offerings (every type: the limit is the zone's), so a NodeClaim allowing
// only us-east-1a meets insufficient capacity. The limit is the group's:
// the shared insufficient-capacity cache stays empty, and a class without
// the group still launches in us-east-1a.
func TestSpreadGroupZoneLimit(t *testing.T) {
	ctx := context.Background()
	var subnets []ec2types.Subnet
	for _, z := range []string{"us-east-1a", "us-east-1b"} {
		out, err := ec2API.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("availability-zone"), Values: []string{z}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
		require.NoError(t, err)
		require.NotEmpty(t, out.Subnets)
		subnets = append(subnets, out.Subnets[0])
	}
	e := newEnvIn(t, ec2API, subnets)
	name := "spread-" + uuid.NewString()[:8]
	pg := makeGroup(t, &ec2.CreatePlacementGroupInput{GroupName: &name, Strategy: ec2types.PlacementStrategySpread})
	e.selectGroup(t, &awsv1.PlacementGroupSelectorTerm{Name: name})
	inZones := func(zones ...string) *v1.NodeClaim {
		nc := e.nodeClaim(t)
		nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones})
		return nc
	}
	// The instances go in one call at the end: deleting them one NodeClaim
	// at a time would take most of the test.
	var launched []string
	t.Cleanup(func() {
		_, err := ec2API.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: launched})
		require.NoError(t, err)
	})
	create := func(nc *v1.NodeClaim) (*v1.NodeClaim, error) {
		got, err := e.cp.Create(ctx, nc)
		if err == nil {
			id, perr := instance.ParseProviderID(got.Status.ProviderID)
			require.NoError(t, perr)
			launched = append(launched, id)
		}
		return got, err
	}
	for range 7 {
		got, err := create(inZones("us-east-1a"))
		require.NoError(t, err)
		require.Equal(t, "us-east-1a", got.Labels[corev1.LabelTopologyZone])
	}

	both := inZones("us-east-1a", "us-east-1b")
	got, err := create(both)
	require.NoError(t, err)
	assert.Equal(t, "us-east-1b", got.Labels[corev1.LabelTopologyZone])
	insts := instancesOf(t, both.Name)
	require.Len(t, insts, 1)
	assert.Equal(t, aws.ToString(pg.GroupId), aws.ToString(insts[0].Placement.GroupId))

	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: e.nodeClass.Name}}}}}
	its, err := e.cp.GetInstanceTypes(ctx, pool)
	require.NoError(t, err)
	available := map[string]bool{}
	for _, it := range its {
		for _, o := range it.Offerings {
			if o.Available && (it.Name == "m5.large" || it.Name == "r5.large") {
				available[it.Name+"/"+o.Zone] = true
			}
		}
	}
	assert.Equal(t, map[string]bool{"m5.large/us-east-1b": true, "r5.large/us-east-1b": true}, available,
		"us-east-1a is unavailable to the group, for types the launch did not try too")
	assert.Empty(t, e.unavailable.Keys(), "the limit is the group's, not the offerings'")

	onlyA := inZones("us-east-1a")
	_, err = create(onlyA)
	assert.True(t, cloudprovider.IsInsufficientCapacityError(err), "%v", err)
	assert.Empty(t, instancesOf(t, onlyA.Name))

	// Without the group, us-east-1a launches.
	e.selectGroup(t, nil)
	free, err := create(inZones("us-east-1a"))
	require.NoError(t, err)
	assert.Equal(t, "us-east-1a", free.Labels[corev1.LabelTopologyZone])
}
