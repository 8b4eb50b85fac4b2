package capacitytype_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/capacityreservation/capacitytype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const clusterName = "capacitytype-test"

var (
	cp     *controlplane.ControlPlane
	local  *awslocal.Local
	ec2API *ec2.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{KubernetesVersions: []string{"1.34"}}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	ec2API = ec2.NewFromConfig(local.Config(ctx))
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

// launch starts a real instance for the NodeClaim through CreateFleet, the
// way the provider does, targeting the reservation when one is given.
func launch(t *testing.T, nodeClaim, reservationID string) string {
	t.Helper()
	ctx := context.Background()
	img, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.34", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	subnets, err := ec2API.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	require.NotEmpty(t, subnets.Subnets)
	data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(img.ID)}
	if reservationID != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(reservationID)}}
	}
	ltName := "karpenter.k8s.aws/" + uuid.NewString()[:8]
	_, err = ec2API.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &ltName, LaunchTemplateData: data})
	require.NoError(t, err)
	out, err := ec2API.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: &ltName, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: subnets.Subnets[0].SubnetId}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand, TotalTargetCapacity: aws.Int32(1)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(awsv1.NodeClaimTagKey), Value: aws.String(nodeClaim)},
			{Key: aws.String(awsv1.KubernetesClusterTagKeyPrefix + clusterName), Value: aws.String("owned")},
		}}},
	})
	require.NoError(t, err)
	require.Empty(t, out.Errors)
	require.Len(t, out.Instances, 1)
	id := out.Instances[0].InstanceIds[0]
	t.Cleanup(func() {
		_, _ = ec2API.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	})
	return id
}

func reservedLabels(reservationID string) map[string]string {
	return map[string]string{
		v1.CapacityTypeLabelKey:                     v1.CapacityTypeReserved,
		scheduling.LabelReservationID:               reservationID,
		awsv1.LabelCapacityReservationID:            reservationID,
		awsv1.LabelCapacityReservationType:          "default",
		awsv1.LabelCapacityReservationInterruptible: "false",
		corev1.LabelInstanceTypeStable:              "m5.large",
	}
}

// nodeClaim creates a launched NodeClaim (and a registered Node when
// registered) with labels.
func nodeClaim(t *testing.T, name, instanceID string, labels map[string]string, registered bool) {
	t.Helper()
	ctx := context.Background()
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{},
		},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })
	nc.Status.ProviderID = "aws:///us-east-1a/" + instanceID
	if registered {
		nc.Status.NodeName = name + "-node"
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Status.NodeName, Labels: labels}}
		require.NoError(t, cp.Client.Create(ctx, node))
		t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), node) })
	}
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
}

func labelsOf(t *testing.T, name string, node bool) map[string]string {
	t.Helper()
	var obj interface {
		GetLabels() map[string]string
	}
	if node {
		n := &corev1.Node{}
		require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: name + "-node"}, n))
		obj = n
	} else {
		nc := &v1.NodeClaim{}
		require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, nc))
		obj = nc
	}
	return obj.GetLabels()
}

func TestDemotedReservationsAreRelabelledOnDemand(t *testing.T) {
	ctx := context.Background()
	add := func() string {
		cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", TotalInstanceCount: 1})
		require.NoError(t, err)
		t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
		return cr.ID
	}
	active, expired, cancelled := add(), add(), add()
	onDemandLabels := map[string]string{v1.CapacityTypeLabelKey: v1.CapacityTypeOnDemand, corev1.LabelInstanceTypeStable: "m5.large"}

	cases := []struct {
		name        string
		reservation string // the instance launches into it
		endState    string // the reservation's state afterwards
		labels      map[string]string
		registered  bool
		noInstance  bool
		want        map[string]string
	}{
		{name: "still in an active reservation", reservation: active, labels: reservedLabels(active), registered: true, want: reservedLabels(active)},
		{name: "reservation expired", reservation: expired, endState: awslocal.ReservationStateExpired, labels: reservedLabels(expired), registered: true, want: onDemandLabels},
		{name: "reservation cancelled, not registered yet", reservation: cancelled, endState: awslocal.ReservationStateCancelled, labels: reservedLabels(cancelled), want: onDemandLabels},
		{name: "instance not listed by EC2", labels: reservedLabels(active), noInstance: true, registered: true, want: reservedLabels(active)},
		{name: "on-demand stays on-demand", labels: onDemandLabels, registered: true, want: onDemandLabels},
	}
	names := make([]string, len(cases))
	for i, tc := range cases {
		names[i] = "ct-" + uuid.NewString()[:8]
		id := "i-0123456789abcdef0"
		if !tc.noInstance {
			id = launch(t, names[i], tc.reservation)
		}
		nodeClaim(t, names[i], id, tc.labels, tc.registered)
	}
	for _, tc := range cases {
		if tc.endState != "" {
			require.NoError(t, local.SetCapacityReservationState(tc.reservation, tc.endState))
		}
	}

	c := capacitytype.NewController(cp.Client, instance.NewProvider(ec2API, clusterName, nil))
	require.NoError(t, c.Reconcile(ctx))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, labelsOf(t, names[i], false), "nodeclaim")
			if tc.registered {
				assert.Equal(t, tc.want, labelsOf(t, names[i], true), "node")
			}
		})
	}
	// A second pass has nothing left to do.
	require.NoError(t, c.Reconcile(ctx))
}
