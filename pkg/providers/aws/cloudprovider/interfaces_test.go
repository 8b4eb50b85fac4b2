package cloudprovider_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// TestInterfaceLayoutAttached: a class that lays out its interfaces
// launches every instance with exactly that layout (read back from what EC2
// describes: card, device index, type), whether or not the NodeClaim asks
// for EFA, and the node advertises one EFA device per EFA-only interface.
func TestInterfaceLayoutAttached(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	nc := &awsv1.EC2NodeClass{}
	require.NoError(t, kube.Get(ctx, client.ObjectKeyFromObject(e.nodeClass), nc))
	nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
		{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 2, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
	}
	require.NoError(t, kube.Update(ctx, nc))
	e.nodeClass = nc
	for _, tc := range []struct {
		name string
		efa  int64
	}{
		{"not asked", 0},
		{"asked", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := e.nodeClaim(t)
			claim.Spec.Requirements[0].Values = []string{"p4d.24xlarge"}
			claim.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			if tc.efa > 0 {
				claim.Spec.Resources.Requests[awsv1.ResourceEFA] = *resource.NewQuantity(tc.efa, resource.DecimalSI)
			}
			got, err := e.cp.Create(ctx, claim)
			require.NoError(t, err)
			defer cleanup(t, e, got)
			efa := got.Status.Capacity[awsv1.ResourceEFA]
			assert.Equal(t, int64(2), efa.Value(), "one EFA device per EFA-only interface")
			inst := instancesOf(t, claim.Name)
			require.Len(t, inst, 1)
			var ifaces []string
			for _, ni := range inst[0].NetworkInterfaces {
				ifaces = append(ifaces, strconv.Itoa(int(aws.ToInt32(ni.Attachment.NetworkCardIndex)))+"/"+
					strconv.Itoa(int(aws.ToInt32(ni.Attachment.DeviceIndex)))+" "+aws.ToString(ni.InterfaceType))
			}
			assert.Equal(t, []string{"0/0 interface", "1/0 efa-only", "2/0 efa-only"}, ifaces)
		})
	}
}
