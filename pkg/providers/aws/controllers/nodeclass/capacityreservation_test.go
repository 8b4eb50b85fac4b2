package nodeclass_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/capacityreservation"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// withReservations turns the ReservedCapacity gate's sub-reconciler on.
func withReservations(clk *clocktesting.FakeClock) func(*nodeclass.Options) {
	return func(o *nodeclass.Options) {
		o.CapacityReservations = capacityreservation.NewProvider(clients.EC2, clk)
		o.Clock = clk
	}
}

// reservedClass creates a class with terms and a given instance profile
// (no managed profile for other tests' profile listings to trip over).
func reservedClass(t *testing.T, name string, terms ...awsv1.CapacityReservationSelectorTerm) {
	t.Helper()
	newNodeClass(t, name, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.Role = ""
		nc.Spec.InstanceProfile = aws.String("given-profile")
		nc.Spec.CapacityReservationSelectorTerms = terms
	})
}

func addReservation(t *testing.T, r awslocal.CapacityReservation) string {
	t.Helper()
	if r.InstanceType == "" {
		r.InstanceType = "m5.large"
	}
	if r.AvailabilityZone == "" {
		r.AvailabilityZone = "us-east-1a"
	}
	if r.TotalInstanceCount == 0 {
		r.TotalInstanceCount = 1
	}
	out, err := local.AddCapacityReservation(r)
	require.NoError(t, err)
	t.Cleanup(func() { local.RemoveCapacityReservation(out.ID) })
	return out.ID
}

func statusIDs(nc *awsv1.EC2NodeClass) map[string]awsv1.CapacityReservation {
	out := map[string]awsv1.CapacityReservation{}
	for _, r := range nc.Status.CapacityReservations {
		out[r.ID] = r
	}
	return out
}

func TestCapacityReservationsStatus(t *testing.T) {
	now := time.Now()
	clk := clocktesting.NewFakeClock(now)
	c, _ := newController(0, withReservations(clk))
	tags := map[string]string{"reservations-for": "status-test"}
	// A capacity block that turns expiring 30 seconds from now.
	blockEnd := now.Add(capacityreservation.ExpirationWindow + 30*time.Second)
	odcr := addReservation(t, awslocal.CapacityReservation{Tags: tags, InstanceMatchCriteria: "open"})
	block := addReservation(t, awslocal.CapacityReservation{Tags: tags, ReservationType: awslocal.ReservationTypeCapacityBlock, EndDate: &blockEnd, InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1b"})
	byID := addReservation(t, awslocal.CapacityReservation{})
	expired := addReservation(t, awslocal.CapacityReservation{Tags: tags, State: awslocal.ReservationStateExpired})

	reservedClass(t, "reserved", awsv1.CapacityReservationSelectorTerm{Tags: tags}, awsv1.CapacityReservationSelectorTerm{ID: byID})
	res := reconcileOnce(t, c, "reserved")
	assert.LessOrEqual(t, res.RequeueAfter, 30*time.Second, "requeued for the block turning expiring")
	assert.Greater(t, res.RequeueAfter, time.Duration(0))

	nc := get(t, "reserved")
	cond := condition(nc, awsv1.ConditionTypeCapacityReservationsReady)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, awsv1.ConditionTypeCapacityReservationsReady, cond.Reason)
	ready := condition(nc, awsv1.ConditionTypeReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status, "%s: %s", ready.Reason, ready.Message)

	got := statusIDs(nc)
	require.Len(t, got, 3, "the expired reservation is dropped")
	assert.NotContains(t, got, expired)
	assert.Equal(t, awsv1.CapacityReservation{AvailabilityZone: "us-east-1a", ID: odcr, InstanceMatchCriteria: "open", InstanceType: "m5.large",
		OwnerID: "123456789012", ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive}, got[odcr])
	b := got[block]
	assert.Equal(t, awsv1.CapacityReservationTypeCapacityBlock, b.ReservationType)
	assert.Equal(t, awsv1.CapacityReservationStateActive, b.State)
	assert.Equal(t, "p5.48xlarge", b.InstanceType)
	require.NotNil(t, b.EndTime)
	assert.Equal(t, blockEnd.UTC().Truncate(time.Second), b.EndTime.UTC())
	assert.Equal(t, "targeted", got[byID].InstanceMatchCriteria)

	// A minute on, the block is expiring and the ODCR has been cancelled.
	require.NoError(t, local.SetCapacityReservationState(odcr, awslocal.ReservationStateCancelled))
	clk.Step(time.Minute)
	res = reconcileOnce(t, c, "reserved")
	assert.Equal(t, time.Minute, res.RequeueAfter)
	got = statusIDs(get(t, "reserved"))
	require.Len(t, got, 2)
	assert.NotContains(t, got, odcr)
	assert.Equal(t, awsv1.CapacityReservationStateExpiring, got[block].State)

	// Past its end the block leaves the status too.
	clk.Step(capacityreservation.ExpirationWindow)
	reconcileOnce(t, c, "reserved")
	got = statusIDs(get(t, "reserved"))
	assert.Equal(t, []string{byID}, keys(got))
}

func keys(m map[string]awsv1.CapacityReservation) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestCapacityReservationsNoTermsIsReady(t *testing.T) {
	c, _ := newController(0, withReservations(clocktesting.NewFakeClock(time.Now())))
	reservedClass(t, "no-reservations")
	res := reconcileOnce(t, c, "no-reservations")
	assert.Equal(t, time.Minute, res.RequeueAfter)
	nc := get(t, "no-reservations")
	assert.Empty(t, nc.Status.CapacityReservations)
	assert.Equal(t, metav1.ConditionTrue, condition(nc, awsv1.ConditionTypeCapacityReservationsReady).Status)
	assert.Equal(t, metav1.ConditionTrue, condition(nc, awsv1.ConditionTypeReady).Status)
}

func TestReadyWaitsForCapacityReservations(t *testing.T) {
	ctx := context.Background()
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeCapacityReservations", Kind: awslocal.FaultThrottle})
	require.NoError(t, err)
	t.Cleanup(func() { local.ClearFaults("ec2", "DescribeCapacityReservations") })

	c, _ := newController(0, withReservations(clocktesting.NewFakeClock(time.Now())))
	reservedClass(t, "reservations-failing", awsv1.CapacityReservationSelectorTerm{Tags: map[string]string{"any": "*"}})
	_, err = c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "reservations-failing"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "getting capacity reservations")
	nc := get(t, "reservations-failing")
	assert.Equal(t, metav1.ConditionUnknown, condition(nc, awsv1.ConditionTypeCapacityReservationsReady).Status)
	ready := condition(nc, awsv1.ConditionTypeReady)
	assert.Equal(t, metav1.ConditionUnknown, ready.Status)
	assert.Equal(t, "CapacityReservationsReady=Unknown", ready.Message, "everything else resolved")

	local.ClearFaults("ec2", "DescribeCapacityReservations")
	reconcileOnce(t, c, "reservations-failing")
	assert.Equal(t, metav1.ConditionTrue, condition(get(t, "reservations-failing"), awsv1.ConditionTypeReady).Status)
}

func TestGateOffLeavesCapacityReservationsOut(t *testing.T) {
	id := addReservation(t, awslocal.CapacityReservation{})
	c, _ := newController(0)
	reservedClass(t, "gate-off", awsv1.CapacityReservationSelectorTerm{ID: id})
	reconcileOnce(t, c, "gate-off")
	nc := get(t, "gate-off")
	assert.Empty(t, nc.Status.CapacityReservations)
	assert.Nil(t, meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady))
	assert.Equal(t, metav1.ConditionTrue, condition(nc, awsv1.ConditionTypeReady).Status)
}
