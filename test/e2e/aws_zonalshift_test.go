package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// zonePinned is one general-purpose pod pinned to a zone (%s), named
// after it; zoneFree is one that may go anywhere.
const zonePinned = `
apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  labels:
    app: %s
spec:
  nodeSelector:
    capacity.example.io/pool: general-purpose
%s
  terminationGracePeriodSeconds: 0
  containers:
    - name: pause
      image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
      resources:
        requests:
          cpu: "1"
          memory: 256Mi
`

func zonePod(name, zone string) string {
	sel := ""
	if zone != "" {
		sel = "    topology.kubernetes.io/zone: " + zone
	}
	return fmt.Sprintf(zonePinned, name, name, sel)
}

// TestAWSZonalShift runs ENABLE_ZONAL_SHIFT through the controller binary
// and the local AWS's ARC, with the shipped IAM policy deciding (its
// arc-zonal-shift:GetManagedResource statement, scoped to the cluster's
// ARN, is what the controller's reads need):
//   - an ARC zonal shift away from one zone of the class: the controller
//     records ZonalShiftActive on the NodePool; a pod pinned to that zone
//     stays Pending with no NodeClaim launched there, while a pod created
//     with it, free to go anywhere, gets a node in another zone;
//   - the shift is cancelled: ZonalShiftCleared, and the pinned pod gets a
//     node in its zone.
func TestAWSZonalShift(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newAWSEnv(t, ctx)
	cp := e.cp
	arn, err := e.local.EnableZonalShift(ctx, awsClusterName, false)
	require.NoError(t, err)
	applyExamples(t, ctx, cp, "00-ec2nodeclass.yaml", "01-nodepool.yaml")
	t.Setenv("ENABLE_ZONAL_SHIFT", "true")
	e.startAWSController(t, "controller")

	// The shifted zone is the class's first subnet zone.
	class := &awsv1.EC2NodeClass{}
	require.Eventually(t, func() bool {
		return cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class) == nil && len(class.Status.Subnets) > 1 &&
			metaTrue(class.Status.Conditions, awsv1.ConditionTypeReady)
	}, 3*time.Minute, time.Second, "the class resolves its subnets and goes Ready")
	zone, zoneID := class.Status.Subnets[0].Zone, class.Status.Subnets[0].ZoneID
	require.NotEmpty(t, zoneID)
	shift, err := e.local.StartZonalShift(ctx, arn, zoneID, time.Hour)
	require.NoError(t, err)
	waitForPoolEvent(t, ctx, cp, "general-purpose", "ZonalShiftActive", zoneID)

	require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(zonePod("pinned", zone)+"\n---\n"+zonePod("free", ""))))
	require.Eventually(t, func() bool { return runningOnOurNodes(ctx, t, cp, "app=free") == 1 }, 4*time.Minute, time.Second,
		"the free pod gets a node during the shift")
	claimsIn := func(z string) []string {
		var list v1.NodeClaimList
		require.NoError(t, cp.Client.List(ctx, &list))
		var out []string
		for _, nc := range list.Items {
			if nc.Labels[corev1.LabelTopologyZone] == z {
				out = append(out, nc.Name)
			}
		}
		return out
	}
	// The round that launched the free pod's node had the pinned pod too;
	// give a later round its chance as well.
	time.Sleep(15 * time.Second)
	require.Empty(t, claimsIn(zone), "nothing launches in %s while ARC shifts traffic away from it", zone)
	pinned := &corev1.Pod{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pinned"}, pinned))
	require.Empty(t, pinned.Spec.NodeName, "the pod pinned to %s stays Pending during the shift", zone)

	_, err = e.local.CancelZonalShift(shift.ID)
	require.NoError(t, err)
	waitForPoolEvent(t, ctx, cp, "general-purpose", "ZonalShiftCleared", zoneID)
	require.Eventually(t, func() bool { return runningOnOurNodes(ctx, t, cp, "app=pinned") == 1 }, 4*time.Minute, time.Second,
		"the pinned pod gets a node in %s once the shift is cleared", zone)
	require.NotEmpty(t, claimsIn(zone))
}
