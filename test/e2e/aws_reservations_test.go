package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// awsReservedPool is the examples' general-purpose NodePool allowing
// reserved capacity besides on-demand. Consolidation is off so that the
// nodes the test watches are replaced only if something else (drift) wants
// them gone: once the reservation ends, the m5.xlarge nodes would otherwise
// rightly be consolidated onto cheaper on-demand types.
const awsReservedPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general-purpose
spec:
  disruption:
    consolidateAfter: Never
  template:
    metadata:
      labels:
        capacity.example.io/pool: general-purpose
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["reserved", "on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["2"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "100"
`

// TestAWSCapacityReservations runs reserved capacity end to end through the
// controller binary and the local AWS:
//   - a targeted default reservation for two m5.xlarge in us-east-1a (a
//     type the pool never picks on price for a one-CPU pod) is selected by
//     id in the examples' EC2NodeClass: the class status lists it and
//     CapacityReservationsReady is True;
//   - three spread pods (one per node) need three nodes: two launch into the
//     reservation (reserved labels on NodeClaim and Node, the instance in
//     the reservation per DescribeInstances, the reservation full), the
//     third falls back to a cheaper on-demand type; one instance per
//     NodeClaim, pods Running;
//   - the reservation is cancelled: EC2 stops reporting the instances in
//     it, the capacitytype controller (every minute) relabels the two
//     NodeClaims and their Nodes on-demand without their reservation
//     labels, the class status drops the reservation, and the nodes are
//     kept (an instance no longer in a reservation is not drifted);
//   - deleting the NodeClaims terminates every instance.
func TestAWSCapacityReservations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	const (
		reservedType = "m5.xlarge"
		reservedZone = "us-east-1a"
		room         = 2
		replicas     = room + 1
	)
	cr, err := e.local.AddCapacityReservation(awslocal.CapacityReservation{
		InstanceType: reservedType, AvailabilityZone: reservedZone, TotalInstanceCount: room,
		InstanceMatchCriteria: "targeted", ReservationType: awslocal.ReservationTypeDefault,
	})
	require.NoError(t, err)

	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml")
	class := &awsv1.EC2NodeClass{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class))
	class.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: cr.ID}}
	require.NoError(t, cp.Client.Update(ctx, class))
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(awsReservedPool)))
	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(strings.Replace(awsSpread, "replicas: 3", "replicas: 0", 1))))
	e.startAWSController(t, "controller")

	// The class resolves the reservation.
	require.Eventually(t, func() bool {
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
			return false
		}
		return metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady) && len(class.Status.CapacityReservations) == 1
	}, 2*time.Minute, time.Second, "EC2NodeClass default should go Ready with the reservation in its status")
	require.True(t, metaTrue(class.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady))
	got := class.Status.CapacityReservations[0]
	require.Equal(t, cr.ID, got.ID)
	require.Equal(t, reservedType, got.InstanceType)
	require.Equal(t, reservedZone, got.AvailabilityZone)
	require.Equal(t, "targeted", got.InstanceMatchCriteria)
	require.Equal(t, awsv1.CapacityReservationTypeDefault, got.ReservationType)
	require.Equal(t, awsv1.CapacityReservationStateActive, got.State)
	require.False(t, got.Interruptible)
	require.Equal(t, cr.OwnerID, got.OwnerID)

	// More nodes than the reservation has room for.
	scale(t, ctx, cp, "spread", replicas)
	var claims []v1.NodeClaim
	require.Eventually(t, func() bool {
		claims = readyClaims(ctx, cp)
		return len(claims) == replicas && runningOnOurNodes(ctx, t, cp, "app=spread") == replicas
	}, 3*time.Minute, time.Second, "%d spread pods should run on %d Ready NodeClaims", replicas, replicas)
	instances := e.liveInstances(t, ctx)
	require.Len(t, instances, replicas, "one instance per NodeClaim: none leaked, none launched twice")
	reserved := map[string]string{} // NodeClaim → instance
	for _, nc := range claims {
		_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
		require.Truef(t, ok, "providerID %q", nc.Status.ProviderID)
		inst, found := instances[id]
		require.Truef(t, found, "instance %s of %s is live", id, nc.Name)
		node := &corev1.Node{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node))
		t.Logf("%s: %s %s %s reservation %q", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone],
			nc.Labels[v1.CapacityTypeLabelKey], aws.ToString(inst.CapacityReservationId))
		if nc.Labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeReserved {
			require.Equal(t, v1.CapacityTypeOnDemand, nc.Labels[v1.CapacityTypeLabelKey])
			require.NotEqual(t, reservedType, nc.Labels[corev1.LabelInstanceTypeStable], "the on-demand fallback is the cheaper type")
			require.Empty(t, aws.ToString(inst.CapacityReservationId))
			for _, obj := range []map[string]string{nc.Labels, node.Labels} {
				for _, k := range reservationLabelKeys {
					require.NotContains(t, obj, k)
				}
			}
			continue
		}
		reserved[nc.Name] = id
		require.Equal(t, reservedType, nc.Labels[corev1.LabelInstanceTypeStable])
		require.Equal(t, reservedZone, nc.Labels[corev1.LabelTopologyZone])
		require.Equal(t, cr.ID, aws.ToString(inst.CapacityReservationId), "instance %s runs in the reservation", id)
		for what, labels := range map[string]map[string]string{"NodeClaim": nc.Labels, "Node": node.Labels} {
			require.Equalf(t, v1.CapacityTypeReserved, labels[v1.CapacityTypeLabelKey], "%s %s", what, nc.Name)
			require.Equalf(t, cr.ID, labels[scheduling.LabelReservationID], "%s %s", what, nc.Name)
			require.Equalf(t, cr.ID, labels[awsv1.LabelCapacityReservationID], "%s %s", what, nc.Name)
			require.Equalf(t, "default", labels[awsv1.LabelCapacityReservationType], "%s %s", what, nc.Name)
			require.Equalf(t, "false", labels[awsv1.LabelCapacityReservationInterruptible], "%s %s", what, nc.Name)
		}
	}
	require.Len(t, reserved, room, "the reservation's room is used, the rest falls back to on-demand")
	res, ok := e.local.CapacityReservationByID(cr.ID)
	require.True(t, ok)
	require.Zero(t, res.AvailableInstanceCount, "the reservation is full")
	require.ElementsMatch(t, values(reserved), res.InstanceIDs)

	// The reservation is cancelled: the instances run on as on-demand.
	require.NoError(t, e.local.SetCapacityReservationState(cr.ID, awslocal.ReservationStateCancelled))
	cancelled := time.Now()
	relabelled, dropped := time.Duration(0), time.Duration(0)
	require.Eventually(t, func() bool {
		if dropped == 0 && cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class) == nil && len(class.Status.CapacityReservations) == 0 {
			dropped = time.Since(cancelled)
		}
		if relabelled == 0 && allRelabelled(ctx, cp, reserved) {
			relabelled = time.Since(cancelled)
		}
		return dropped > 0 && relabelled > 0
	}, 3*time.Minute, time.Second, "the reserved NodeClaims should be relabelled on-demand and the class status drop the reservation")
	t.Logf("after the cancellation: relabelled in %s, class status dropped the reservation in %s", relabelled.Round(time.Second), dropped.Round(time.Second))
	require.True(t, metaTrue(class.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady), "no reservation is still ready")
	require.True(t, metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady))
	instances = e.liveInstances(t, ctx)
	for name, id := range reserved {
		inst, ok := instances[id]
		require.Truef(t, ok, "the instance %s of %s runs on", id, name)
		require.Emptyf(t, aws.ToString(inst.CapacityReservationId), "EC2 no longer reports %s in the reservation", id)
	}
	require.Contains(t, controllerLog(t, cp), `"message":"reservation ended, relabelled nodeclaim as on-demand"`)
	// The demoted nodes are kept: not in a reservation, they do not drift.
	claims = readyClaims(ctx, cp)
	require.Len(t, claims, replicas, "no NodeClaim replaced")
	for _, nc := range claims {
		require.Falsef(t, conditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted), "%s drifted", nc.Name)
	}
	require.Equal(t, replicas, runningOnOurNodes(ctx, t, cp, "app=spread"))
	require.Len(t, instances, replicas, "no instance leaked")

	// Deleting the NodeClaims terminates every instance.
	scale(t, ctx, cp, "spread", 0)
	require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}))
	require.Eventually(t, func() bool {
		var left v1.NodeClaimList
		return cp.Client.List(ctx, &left) == nil && len(left.Items) == 0 && len(e.liveInstances(t, ctx)) == 0
	}, 2*time.Minute, time.Second, "every NodeClaim and instance should be gone")
}

// reservationLabelKeys are the labels of a node in a reservation besides
// its capacity type.
var reservationLabelKeys = []string{scheduling.LabelReservationID, awsv1.LabelCapacityReservationID,
	awsv1.LabelCapacityReservationType, awsv1.LabelCapacityReservationInterruptible}

// readyClaims are the Ready NodeClaims not being deleted.
func readyClaims(ctx context.Context, cp *controlplane.ControlPlane) []v1.NodeClaim {
	var claims v1.NodeClaimList
	if cp.Client.List(ctx, &claims) != nil {
		return nil
	}
	var out []v1.NodeClaim
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp == nil && conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
			out = append(out, nc)
		}
	}
	return out
}

// allRelabelled is whether every named NodeClaim and its Node say
// on-demand and carry no reservation label.
func allRelabelled(ctx context.Context, cp *controlplane.ControlPlane, names map[string]string) bool {
	for name := range names {
		nc := &v1.NodeClaim{}
		if cp.Client.Get(ctx, client.ObjectKey{Name: name}, nc) != nil || nc.Status.NodeName == "" {
			return false
		}
		node := &corev1.Node{}
		if cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node) != nil {
			return false
		}
		for _, labels := range []map[string]string{nc.Labels, node.Labels} {
			if labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeOnDemand {
				return false
			}
			for _, k := range reservationLabelKeys {
				if _, ok := labels[k]; ok {
					return false
				}
			}
		}
	}
	return true
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
