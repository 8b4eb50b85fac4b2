package expiration_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/capacityreservation/expiration"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

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
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	ec2API = ec2.NewFromConfig(local.Config(ctx))
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

func block(t *testing.T, reservationType string, end time.Time) string {
	t.Helper()
	cr, err := local.AddCapacityReservation(awslocal.CapacityReservation{InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, ReservationType: reservationType, EndDate: &end})
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
	return cr.ID
}

func nodeClaim(t *testing.T, labels map[string]string) string {
	t.Helper()
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "exp-" + uuid.NewString()[:8], Labels: labels},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{},
		},
	}
	require.NoError(t, cp.Client.Create(context.Background(), nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })
	return nc.Name
}

func exists(t *testing.T, name string) bool {
	t.Helper()
	err := cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, &v1.NodeClaim{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func labels(reservationType, id string) map[string]string {
	l := map[string]string{v1.CapacityTypeLabelKey: v1.CapacityTypeReserved, awsv1.LabelCapacityReservationType: reservationType}
	if id != "" {
		l[scheduling.LabelReservationID] = id
	}
	return l
}

func TestCapacityBlockNodeClaimsAreDeletedAheadOfTheEnd(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clk := clocktesting.NewFakeClock(now)
	endingSoon := block(t, awslocal.ReservationTypeCapacityBlock, now.Add(39*time.Minute))
	endingLater := block(t, awslocal.ReservationTypeCapacityBlock, now.Add(41*time.Minute))
	reclaimed := block(t, awslocal.ReservationTypeCapacityBlock, now.Add(2*time.Hour))
	require.NoError(t, local.SetCapacityReservationState(reclaimed, awslocal.ReservationStateExpired))
	odcr := block(t, awslocal.ReservationTypeDefault, now.Add(10*time.Minute))

	cases := []struct {
		name          string
		labels        map[string]string
		wantNow       bool // still there after a pass now
		wantInAMoment bool // still there two minutes later
	}{
		{"capacity block ending in 39 minutes", labels("capacity-block", endingSoon), false, false},
		{"capacity block ending in 41 minutes", labels("capacity-block", endingLater), true, false},
		{"capacity block no longer active", labels("capacity-block", reclaimed), false, false},
		{"the AWS reservation-id label is read too", map[string]string{awsv1.LabelCapacityReservationType: "capacity-block", awsv1.LabelCapacityReservationID: endingSoon}, false, false},
		{"an ODCR ending soon is not a capacity block", labels("default", odcr), true, true},
		{"no reservation id", labels("capacity-block", ""), true, true},
	}
	names := make([]string, len(cases))
	for i, tc := range cases {
		names[i] = nodeClaim(t, tc.labels)
	}
	c := expiration.NewController(cp.Client, capacityreservation.NewProvider(ec2API, clk), clk)
	require.NoError(t, c.Reconcile(ctx))
	for i, tc := range cases {
		assert.Equal(t, tc.wantNow, exists(t, names[i]), tc.name)
	}
	clk.Step(2 * time.Minute)
	require.NoError(t, c.Reconcile(ctx))
	for i, tc := range cases {
		assert.Equal(t, tc.wantInAMoment, exists(t, names[i]), "%s, two minutes later", tc.name)
	}
}
