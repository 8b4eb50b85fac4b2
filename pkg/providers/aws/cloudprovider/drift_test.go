package cloudprovider_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// setClass writes the class's annotations and status as mutate leaves them
// (starting from the env's original), so each case starts clean.
func (e *env) setClass(t *testing.T, mutate func(*awsv1.EC2NodeClass)) {
	t.Helper()
	ctx := context.Background()
	nc := &awsv1.EC2NodeClass{}
	require.NoError(t, kube.Get(ctx, client.ObjectKeyFromObject(e.nodeClass), nc))
	want := e.nodeClass.DeepCopy()
	mutate(want)
	nc.Annotations = want.Annotations
	require.NoError(t, kube.Update(ctx, nc))
	nc.Status = want.Status
	require.NoError(t, kube.Status().Update(ctx, nc))
}

// TestCreateStampsHashAndProfile: the launch records the class hash it was
// made from (static drift's baseline) and the instance profile.
func TestCreateStampsHashAndProfile(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := e.nodeClaim(t)
	nc.Annotations = map[string]string{"keep": "me"}
	got, err := e.cp.Create(ctx, nc)
	require.NoError(t, err)
	t.Cleanup(func() { cleanup(t, e, got) })
	assert.Equal(t, e.nodeClass.Hash(nil), got.Annotations[awsv1.AnnotationEC2NodeClassHash])
	assert.Equal(t, awsv1.EC2NodeClassHashVersion, got.Annotations[awsv1.AnnotationEC2NodeClassHashVersion])
	assert.Equal(t, e.nodeClass.Status.InstanceProfile, got.Annotations[awsv1.AnnotationInstanceProfile])
	assert.Equal(t, "me", got.Annotations["keep"], "the NodeClaim's own annotations stay")
	assert.NotContains(t, nc.Annotations, awsv1.AnnotationEC2NodeClassHash, "the input NodeClaim is not modified")
}

// TestIsDrifted launches one real instance and changes its class's
// annotations and status under it, one reason at a time.
// rebalanced marks a NodeClaim as the interruption controller does on a
// rebalance recommendation when it replaces on them.
func rebalanced(nc *v1.NodeClaim) {
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[awsv1.AnnotationRebalanceRecommendation] = "2026-12-02T00:00:00Z"
}

func TestIsDrifted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	got, err := e.cp.Create(ctx, e.nodeClaim(t))
	require.NoError(t, err)
	t.Cleanup(func() { cleanup(t, e, got) })

	// What the class could resolve to instead: a newer image of the same
	// series, an image for the other architecture, another subnet and
	// another security group, all real.
	series := awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"}
	newer, err := local.PublishImage(ctx, series)
	require.NoError(t, err)
	series.Arch = "arm64"
	armImage, ok := local.LatestImage(series)
	require.True(t, ok)
	otherSubnets, err := ec2API.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	require.NotEmpty(t, otherSubnets.Subnets)
	otherSubnet := awsv1.Subnet{ID: aws.ToString(otherSubnets.Subnets[0].SubnetId), Zone: "us-east-1b"}
	sg, err := ec2API.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("extra-" + uuid.NewString()[:8]), Description: aws.String("extra")})
	require.NoError(t, err)
	otherSG := awsv1.SecurityGroup{ID: aws.ToString(sg.GroupId), Name: "extra"}

	amd64 := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	arm64 := []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}
	hashed := func(hash, version string) func(*awsv1.EC2NodeClass) {
		return func(c *awsv1.EC2NodeClass) {
			c.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: hash, awsv1.AnnotationEC2NodeClassHashVersion: version}
		}
	}
	newerImage := func(c *awsv1.EC2NodeClass) {
		c.Status.AMIs = append([]awsv1.AMI{{ID: newer.ID, Name: newer.Name, Requirements: amd64}}, c.Status.AMIs...)
	}
	moveSubnet := func(c *awsv1.EC2NodeClass) { c.Status.Subnets = []awsv1.Subnet{otherSubnet} }
	addSG := func(c *awsv1.EC2NodeClass) { c.Status.SecurityGroups = append(c.Status.SecurityGroups, otherSG) }
	all := func(fs ...func(*awsv1.EC2NodeClass)) func(*awsv1.EC2NodeClass) {
		return func(c *awsv1.EC2NodeClass) {
			for _, f := range fs {
				f(c)
			}
		}
	}

	for _, tc := range []struct {
		name     string
		class    func(*awsv1.EC2NodeClass)
		claim    func(*v1.NodeClaim)
		want     cloudprovider.DriftReason
		wantErr  bool
		describe bool // whether the answer needs DescribeInstances
	}{
		{name: "unchanged", class: func(*awsv1.EC2NodeClass) {}, describe: true},
		{name: "same hash", class: hashed(got.Annotations[awsv1.AnnotationEC2NodeClassHash], awsv1.EC2NodeClassHashVersion), describe: true},
		{name: "hash changed", class: hashed("1", awsv1.EC2NodeClassHashVersion), want: awscloudprovider.NodeClassDrift},
		{name: "hash changed under another version", class: hashed("1", "v5"), describe: true},
		{name: "nodeclaim without hash", class: hashed("1", awsv1.EC2NodeClassHashVersion), describe: true,
			claim: func(nc *v1.NodeClaim) { nc.Annotations = nil }},
		{name: "newer image", class: newerImage, want: awscloudprovider.AMIDrift},
		{name: "image deselected", class: func(c *awsv1.EC2NodeClass) { c.Status.AMIs[0].ID = newer.ID }, want: awscloudprovider.AMIDrift},
		{name: "image of the other architecture", describe: true, class: func(c *awsv1.EC2NodeClass) {
			c.Status.AMIs = append([]awsv1.AMI{{ID: armImage.ID, Name: armImage.Name, Requirements: arm64}}, c.Status.AMIs...)
		}},
		{name: "newer image deprecated", describe: true, class: func(c *awsv1.EC2NodeClass) {
			c.Status.AMIs = append([]awsv1.AMI{{ID: newer.ID, Name: newer.Name, Requirements: amd64, Deprecated: true}}, c.Status.AMIs...)
		}},
		{name: "subnet deselected", class: moveSubnet, want: awscloudprovider.SubnetDrift, describe: true},
		{name: "subnet added", describe: true, class: func(c *awsv1.EC2NodeClass) { c.Status.Subnets = append(c.Status.Subnets, otherSubnet) }},
		{name: "security group added", class: addSG, want: awscloudprovider.SecurityGroupDrift, describe: true},
		{name: "security group replaced", want: awscloudprovider.SecurityGroupDrift, describe: true,
			class: func(c *awsv1.EC2NodeClass) { c.Status.SecurityGroups = []awsv1.SecurityGroup{otherSG} }},
		// Order: static before AMI before security groups before subnets.
		{name: "hash and image", class: all(hashed("1", awsv1.EC2NodeClassHashVersion), newerImage), want: awscloudprovider.NodeClassDrift},
		{name: "image and subnet", class: all(newerImage, moveSubnet), want: awscloudprovider.AMIDrift},
		{name: "security group and subnet", class: all(addSG, moveSubnet), want: awscloudprovider.SecurityGroupDrift, describe: true},
		{name: "no subnets resolved", class: func(c *awsv1.EC2NodeClass) { c.Status.Subnets = nil }, wantErr: true, describe: true},
		{name: "no security groups resolved", class: func(c *awsv1.EC2NodeClass) { c.Status.SecurityGroups = nil }, wantErr: true, describe: true},
		{name: "no amis resolved", class: func(c *awsv1.EC2NodeClass) { c.Status.AMIs = nil }, wantErr: true},
		{name: "not launched yet", class: moveSubnet, claim: func(nc *v1.NodeClaim) { nc.Status.ProviderID = "" }},
		{name: "class gone", class: moveSubnet, claim: func(nc *v1.NodeClaim) { nc.Spec.NodeClassRef.Name = "missing" }},
		{name: "image unknown to the nodeclaim", class: newerImage, want: awscloudprovider.AMIDrift, describe: true,
			claim: func(nc *v1.NodeClaim) { nc.Status.ImageID = "" }},
		// Marked on a rebalance recommendation (INTERRUPTION_REPLACE_ON_REBALANCE):
		// drifted whatever the class says, and before anything else.
		{name: "rebalance recommended", class: func(*awsv1.EC2NodeClass) {}, want: awscloudprovider.RebalanceDrift,
			claim: rebalanced},
		{name: "rebalance recommended and hash changed", class: hashed("1", awsv1.EC2NodeClassHashVersion), want: awscloudprovider.RebalanceDrift,
			claim: rebalanced},
		{name: "rebalance recommended, not launched yet", class: func(*awsv1.EC2NodeClass) {},
			claim: func(nc *v1.NodeClaim) { rebalanced(nc); nc.Status.ProviderID = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.setClass(t, tc.class)
			claim := got.DeepCopy()
			if tc.claim != nil {
				tc.claim(claim)
			}
			before := local.Calls("ec2", "DescribeInstances")
			reason, err := e.cp.IsDrifted(ctx, claim)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, reason)
			described := local.Calls("ec2", "DescribeInstances") > before
			assert.Equal(t, tc.describe, described, "DescribeInstances called")
		})
	}
}

// TestIsDriftedCapacityReservation launches an instance into a targeted
// reservation, as a reserved launch does, and drops the reservation from
// the class's status.
func TestIsDriftedCapacityReservation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: zone, TotalInstanceCount: 1})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
	image := e.nodeClass.Status.AMIs[0].ID
	lt, err := ec2API.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("reserved-" + uuid.NewString()[:8]),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:          aws.String(image),
			SecurityGroupIds: []string{e.nodeClass.Status.SecurityGroups[0].ID},
			CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr.ID)},
			},
		},
	})
	require.NoError(t, err)
	fleet, err := ec2API.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(e.nodeClass.Status.Subnets[0].ID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
	require.NoError(t, err)
	require.NotEmpty(t, fleet.Instances, "fleet errors: %v", fleet.Errors)
	id := fleet.Instances[0].InstanceIds[0]
	t.Cleanup(func() {
		_, _ = ec2API.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	})

	claim := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "reserved", Labels: map[string]string{
			corev1.LabelInstanceTypeStable: "m5.large", v1.CapacityTypeLabelKey: v1.CapacityTypeReserved, awsv1.LabelCapacityReservationID: cr.ID}},
		Spec:   v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: e.nodeClass.Name}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///" + zone + "/" + id, ImageID: image},
	}
	selected := func(c *awsv1.EC2NodeClass) {
		c.Status.CapacityReservations = []awsv1.CapacityReservation{{ID: cr.ID, AvailabilityZone: zone, InstanceType: "m5.large",
			InstanceMatchCriteria: "targeted", OwnerID: cr.OwnerID, ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive}}
	}
	for _, tc := range []struct {
		name         string
		class        func(*awsv1.EC2NodeClass)
		capacityType string
		want         cloudprovider.DriftReason
	}{
		{name: "reservation selected", class: selected, capacityType: v1.CapacityTypeReserved},
		{name: "reservation deselected", class: func(*awsv1.EC2NodeClass) {}, capacityType: v1.CapacityTypeReserved, want: awscloudprovider.CapacityReservationDrift},
		{name: "on-demand in a reservation nobody asked for", class: func(*awsv1.EC2NodeClass) {}, capacityType: v1.CapacityTypeOnDemand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.setClass(t, tc.class)
			c := claim.DeepCopy()
			c.Labels[v1.CapacityTypeLabelKey] = tc.capacityType
			reason, err := e.cp.IsDrifted(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, tc.want, reason)
		})
	}
}
