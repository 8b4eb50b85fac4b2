package v1_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// TestTypedRoundTrip writes a fully populated EC2NodeClass through the Go
// types and reads it back: the types must serialise into something the CRD
// accepts and must survive storage unchanged (apart from defaults).
func TestTypedRoundTrip(t *testing.T) {
	ctx := testContext(t)
	size := resource.MustParse("80Gi")
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "typed"},
		Spec: awsv1.EC2NodeClassSpec{
			SubnetSelectorTerms:              []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c"}}, {ID: "subnet-0a1b"}},
			SecurityGroupSelectorTerms:       []awsv1.SecurityGroupSelectorTerm{{Name: "workers"}},
			CapacityReservationSelectorTerms: []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}, OwnerID: "012345678901"}},
			PlacementGroupSelector:           &awsv1.PlacementGroupSelectorTerm{Name: "training"},
			AssociatePublicIPAddress:         ptr.To(false),
			IPPrefixCount:                    ptr.To[int32](2),
			AMISelectorTerms:                 []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
			AMIFamily:                        ptr.To(awsv1.AMIFamilyCustom),
			UserData:                         ptr.To("[settings]"),
			InstanceProfile:                  ptr.To("KarpenterNodeProfile"),
			Tags:                             map[string]string{"team": "platform"},
			Kubelet: awsv1.KubeletConfiguration{
				"maxPods":             {Raw: []byte(`110`)},
				"containerLogMaxSize": {Raw: []byte(`"50Mi"`)},
				"systemReserved":      {Raw: []byte(`{"cpu":"500m"}`)},
			},
			BlockDeviceMappings: []*awsv1.BlockDeviceMapping{{
				DeviceName: ptr.To("/dev/xvda"),
				RootVolume: true,
				EBS:        &awsv1.BlockDevice{VolumeSize: &size, VolumeType: ptr.To("gp3"), Encrypted: ptr.To(true)},
			}},
			InstanceStorePolicy: ptr.To(awsv1.InstanceStorePolicyRAID0),
			NetworkInterfaces: []*awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
			},
			ConnectionTracking: &awsv1.ConnectionTracking{UDPTimeout: ptr.To[int32](45)},
			CPUOptions:         &awsv1.CPUOptions{NestedVirtualization: ptr.To("enabled")},
			DetailedMonitoring: ptr.To(true),
			MetadataOptions:    &awsv1.MetadataOptions{HTTPTokens: ptr.To("optional")},
			Context:            ptr.To("c-0a1b"),
		},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })

	got := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), got))
	want := nc.Spec.DeepCopy()
	want.MetadataOptions = &awsv1.MetadataOptions{
		HTTPEndpoint:            ptr.To("enabled"),
		HTTPProtocolIPv6:        ptr.To("disabled"),
		HTTPPutResponseHopLimit: ptr.To[int64](1),
		HTTPTokens:              ptr.To("optional"),
	}
	require.Equal(t, jsonOf(t, want), jsonOf(t, got.Spec))
	require.Equal(t, awsv1.AMIFamilyCustom, got.AMIFamily())

	// Status is its own subresource: write it and read it back.
	got.Status = awsv1.EC2NodeClassStatus{
		Subnets:              []awsv1.Subnet{{ID: "subnet-0a1b", Zone: "us-west-2a", ZoneID: "usw2-az1"}},
		SecurityGroups:       []awsv1.SecurityGroup{{ID: "sg-0a1b", Name: "workers"}},
		CapacityReservations: []awsv1.CapacityReservation{{AvailabilityZone: "us-west-2a", ID: "cr-0a1b", InstanceMatchCriteria: "targeted", InstanceType: "p5.48xlarge", OwnerID: "012345678901"}},
		AMIs: []awsv1.AMI{{ID: "ami-0a1b", Name: "bottlerocket", Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		}}},
		InstanceProfile: "KarpenterNodeProfile",
		Conditions: []metav1.Condition{{
			Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now(),
		}},
	}
	require.NoError(t, cp.Client.Status().Update(ctx, got))
	stored := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), stored))
	// The reservation's type and state are filled by the schema defaults.
	require.Equal(t, awsv1.CapacityReservationTypeDefault, stored.Status.CapacityReservations[0].ReservationType)
	require.Equal(t, awsv1.CapacityReservationStateActive, stored.Status.CapacityReservations[0].State)
	require.Equal(t, got.Status.AMIs, stored.Status.AMIs)
	require.Equal(t, got.Status.Subnets, stored.Status.Subnets)
}

func TestAliasHelpers(t *testing.T) {
	for _, tc := range []struct {
		alias, family, version string
	}{
		{"al2023@latest", awsv1.AMIFamilyAL2023, "latest"},
		{"al2@v20240625", awsv1.AMIFamilyAL2, "v20240625"},
		{"bottlerocket@v1.20.0", awsv1.AMIFamilyBottlerocket, "v1.20.0"},
		{"windows2019@latest", awsv1.AMIFamilyWindows2019, "latest"},
		{"windows2022@latest", awsv1.AMIFamilyWindows2022, "latest"},
		{"windows2025@latest", awsv1.AMIFamilyWindows2025, "latest"},
		{"ubuntu@latest", "", "latest"},
		{"al2023", awsv1.AMIFamilyAL2023, ""},
		{"", "", ""},
	} {
		require.Equal(t, tc.family, awsv1.AMIFamilyFromAlias(tc.alias), tc.alias)
		require.Equal(t, tc.version, awsv1.AMIVersionFromAlias(tc.alias), tc.alias)
	}

	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}}}
	require.Equal(t, "windows2022@latest", nc.Alias())
	require.Equal(t, awsv1.AMIFamilyWindows2022, nc.AMIFamily(), "inferred from the alias")
	nc.Spec.AMIFamily = ptr.To(awsv1.AMIFamilyCustom)
	require.Equal(t, awsv1.AMIFamilyCustom, nc.AMIFamily(), "explicit amiFamily wins")
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: "ami-0a1b"}}
	require.Empty(t, nc.Alias())
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
