package provisioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// TestProvisionReservedNodeClaim plans a pod onto a reserved offering and
// creates the NodeClaim through the API server, whose CRD (as upstream's)
// refuses karpenter.sh keys other than capacity-type and nodepool in
// spec.requirements: the reservation is written under the provider's key
// (AWS's karpenter.k8s.aws/capacity-reservation-id), or left out when the
// provider has none; either way the NodeClaim is reserved-only.
func TestProvisionReservedNodeClaim(t *testing.T) {
	for _, tc := range []struct{ name, key string }{
		{name: "provider key", key: "karpenter.k8s.aws/capacity-reservation-id"},
		{name: "no provider key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanup(t)
			its, err := kwok.LoadCatalog(kwok.CatalogDefault)
			require.NoError(t, err)
			var it *cloudprovider.InstanceType
			for _, candidate := range its {
				if candidate.Requirements.Get(scheduling.LabelArch).Has("amd64") && len(candidate.Offerings) > 0 {
					it = candidate
					break
				}
			}
			require.NotNil(t, it)
			zone := it.Offerings[0].Zone
			it.Offerings = append(it.Offerings, cloudprovider.Offering{Zone: zone, CapacityType: scheduling.CapacityTypeReserved,
				Price: it.Offerings[0].Price / 1000, Available: true, ReservationID: "r-1", ReservationCapacity: 1})
			it.Requirements.Add(scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn,
				append(it.Requirements.Get(scheduling.LabelCapacityType).Values(), scheduling.CapacityTypeReserved)...))
			cloud, err := kwok.New(context.Background(), cp.Client, kwok.Options{InstanceTypes: its})
			require.NoError(t, err)
			nodePool(t, "reserved", func(np *v1.NodePool) {
				for i, r := range np.Spec.Template.Spec.Requirements {
					if r.Key == v1.CapacityTypeLabelKey {
						np.Spec.Template.Spec.Requirements[i].Values = []string{"reserved", "on-demand"}
					}
				}
			})
			pendingPod(t, "reserved-0", "100m", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"capacity.example.io/pool": "reserved", corev1.LabelInstanceTypeStable: it.Name}
			})
			p := provisioning.NewProvisioner(cp.Client, cloud, &fakeCluster{kube: cp.Client}, &fakeRecorder{},
				provisioning.Options{ReservationIDLabel: tc.key})
			_, err = p.Provision(context.Background())
			require.NoError(t, err, "the API server accepts the reserved NodeClaim")
			claims := nodeClaims(t)
			require.Len(t, claims, 1)
			nc := &claims[0]
			require.Nil(t, requirement(nc, scheduling.LabelReservationID), "karpenter.sh/reservation-id is restricted in spec.requirements")
			ct := requirement(nc, v1.CapacityTypeLabelKey)
			require.NotNil(t, ct)
			require.Equal(t, []string{"reserved"}, ct.Values)
			if tc.key == "" {
				return
			}
			res := requirement(nc, tc.key)
			require.NotNil(t, res)
			require.Equal(t, corev1.NodeSelectorOpIn, res.Operator)
			require.Equal(t, []string{"r-1"}, res.Values)
		})
	}
}
