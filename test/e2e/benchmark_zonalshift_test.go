package e2e_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// benchZoneSpread needs a node in every zone of the class: 30 pods that
// each fill a node, spread evenly over the zones.
const benchZoneSpread = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: bench-zones
  namespace: default
spec:
  replicas: 30
  selector:
    matchLabels:
      app: bench-zones
  template:
    metadata:
      labels:
        app: bench-zones
    spec:
      terminationGracePeriodSeconds: 0
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: DoNotSchedule
          labelSelector:
            matchLabels:
              app: bench-zones
      containers:
        - name: pause
          image: registry.k8s.io/pause:3.10
          resources:
            requests:
              cpu: "3500m"
              memory: 6Gi
`

// zonalShiftPhase follows the 1,000-pod run with an ARC zonal shift away
// from the zone holding the most NodeClaims. Once the controller has seen
// it (the ZonalShiftActive event on the pool), the next round (200 more
// pods) and whatever consolidation does meanwhile launch nothing in the
// zone; once the shift is cancelled and the controller has seen that
// (ZonalShiftCleared), a workload spread over every zone gets nodes there
// again. It fails the benchmark on any launch into the shifted zone.
func zonalShiftPhase(b *testing.B, ctx context.Context, cp *controlplane.ControlPlane, local *awslocal.Local, arn string) {
	b.Helper()
	claims := func() []v1.NodeClaim {
		var list v1.NodeClaimList
		if err := cp.Client.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		return list.Items
	}
	perZone := map[string]int{}
	for _, nc := range claims() {
		perZone[nc.Labels[corev1.LabelTopologyZone]]++
	}
	zone := ""
	for z, n := range perZone {
		if zone == "" || n > perZone[zone] || (n == perZone[zone] && z < zone) {
			zone = z
		}
	}
	class := &awsv1.EC2NodeClass{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "default"}, class); err != nil {
		b.Fatal(err)
	}
	zoneID := ""
	for _, s := range class.Status.Subnets {
		if s.Zone == zone {
			zoneID = s.ZoneID
		}
	}
	if zoneID == "" {
		b.Fatalf("no zone ID for %s in the class status %+v", zone, class.Status.Subnets)
	}
	b.Logf("NodeClaims per zone before the shift: %v; shifting away from %s (%s)", perZone, zone, zoneID)

	shift, err := local.StartZonalShift(ctx, arn, zoneID, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	shiftStart := time.Now()
	seen := waitForPoolEvent(b, ctx, cp, "bench", "ZonalShiftActive", zoneID)
	b.Logf("controller saw the shift %.1fs after it started", seen.Sub(shiftStart).Seconds())

	scale(b, ctx, cp, "bench-small", 700)
	if !waitFor(ctx, 10*time.Minute, func() bool { return runningOnOurNodes(ctx, b, cp, "app=bench-small") == 700 }) {
		b.Fatal("the next round's 700 bench-small pods did not all run")
	}
	// Let consolidation act on the grown fleet for a while too.
	time.Sleep(90 * time.Second)
	launchedDuring := 0
	for _, nc := range claims() {
		if nc.CreationTimestamp.Time.Before(seen) {
			continue
		}
		launchedDuring++
		if nc.Labels[corev1.LabelTopologyZone] == zone {
			b.Fatalf("NodeClaim %s launched in the shifted zone %s at %s, after the controller saw the shift", nc.Name, zone, nc.CreationTimestamp)
		}
	}
	b.Logf("during the shift: %d NodeClaims launched (round and consolidation), none in %s", launchedDuring, zone)

	if _, err := local.CancelZonalShift(shift.ID); err != nil {
		b.Fatal(err)
	}
	cleared := waitForPoolEvent(b, ctx, cp, "bench", "ZonalShiftCleared", zoneID)
	if err := controlplane.Apply(ctx, cp.Client, []byte(benchZoneSpread)); err != nil {
		b.Fatal(err)
	}
	if !waitFor(ctx, 10*time.Minute, func() bool { return runningOnOurNodes(ctx, b, cp, "app=bench-zones") == 30 }) {
		b.Fatal("the zone-spread pods did not all run after the shift cleared")
	}
	var again []string
	for _, nc := range claims() {
		if !nc.CreationTimestamp.Time.Before(cleared) && nc.Labels[corev1.LabelTopologyZone] == zone {
			again = append(again, nc.Name)
		}
	}
	sort.Strings(again)
	if len(again) == 0 {
		b.Fatalf("no NodeClaim launched in %s after the shift cleared", zone)
	}
	b.Logf("after the shift cleared: %d NodeClaims launched in %s", len(again), zone)
	b.ReportMetric(float64(launchedDuring), "launches-during-shift")
}

// waitForPoolEvent waits for an event with reason on the NodePool whose
// message names zoneID, and returns when it was first seen.
func waitForPoolEvent(b testing.TB, ctx context.Context, cp *controlplane.ControlPlane, pool, reason, zoneID string) time.Time {
	b.Helper()
	var at time.Time
	if !waitFor(ctx, 2*time.Minute, func() bool {
		var events corev1.EventList
		if err := cp.Client.List(ctx, &events); err != nil {
			return false
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == "NodePool" && ev.InvolvedObject.Name == pool && ev.Reason == reason && strings.Contains(ev.Message, zoneID) {
				at = time.Now()
				return true
			}
		}
		return false
	}) {
		b.Fatalf("no %s event on NodePool %s for %s", reason, pool, zoneID)
	}
	return at
}
