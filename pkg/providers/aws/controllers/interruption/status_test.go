package interruption_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/interruption"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

func TestInstanceStatus(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { local.ClearInstanceStatus("") })
	// Past the toleration of the impairments set below (EC2 gives their
	// ImpairedSince from the wall clock).
	now := time.Now().Add(interruption.ImpairmentToleration + 30*time.Second)
	type instance struct {
		name     string
		impair   func(id string)
		category string // "" leaves it alone
	}
	cases := []instance{
		{name: "healthy", impair: func(string) {}},
		{name: "instance status impaired", impair: func(id string) { require.NoError(t, local.SetInstanceStatus(id, awslocal.StatusImpaired, "")) },
			category: interruption.CategoryInstanceStatus},
		{name: "system status impaired", impair: func(id string) { require.NoError(t, local.SetInstanceStatus(id, "", awslocal.StatusImpaired)) },
			category: interruption.CategorySystemStatus},
		{name: "insufficient data is not a failure", impair: func(id string) {
			require.NoError(t, local.SetInstanceStatus(id, awslocal.StatusInsufficientData, awslocal.StatusInitializing))
		}},
		{name: "scheduled event", impair: func(id string) {
			_, err := local.AddInstanceEvent(id, awslocal.InstanceEvent{Code: "system-maintenance"})
			require.NoError(t, err)
		}, category: interruption.CategoryScheduledEvent},
		{name: "completed event", impair: func(id string) {
			_, err := local.AddInstanceEvent(id, awslocal.InstanceEvent{Code: "instance-reboot", Description: "[Completed] The instance is scheduled for a reboot"})
			require.NoError(t, err)
		}},
	}
	claims := make([]claim, len(cases))
	for i, tc := range cases {
		id, zone := launch(t, "m5.large")
		claims[i] = newClaim(t, id, zone, "m5.large", v1.CapacityTypeOnDemand)
		tc.impair(id)
	}
	// An impaired instance no NodeClaim has is not Karpenter's to replace.
	foreign, _ := launch(t, "m5.large")
	require.NoError(t, local.SetInstanceStatus(foreign, awslocal.StatusImpaired, awslocal.StatusImpaired))

	before := map[string]float64{}
	for _, c := range []string{interruption.CategoryInstanceStatus, interruption.CategorySystemStatus, interruption.CategoryScheduledEvent} {
		before[c] = counter(t, metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(c))
	}
	rec := newRecorder()
	c := interruption.NewStatusController(cp.Client, ec2Client, interruption.StatusOptions{Recorder: rec, Clock: clocktesting.NewFakeClock(now)})
	require.Equal(t, "interruption.instancestatus", c.Name())
	require.NoError(t, c.Check(ctx))

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := claims[i].nc
			if tc.category == "" {
				assert.False(t, deleting(t, nc))
				assert.Empty(t, rec.reasons(nc.Name))
				return
			}
			assert.True(t, deleting(t, nc))
			assert.Equal(t, []string{"InstanceUnhealthy", "TerminatingOnInterruption"}, rec.reasons(nc.Name))
			assert.Equal(t, []string{"InstanceUnhealthy", "TerminatingOnInterruption"}, rec.reasons(claims[i].node.Name))
			_, ok := get(t, nc).Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]
			assert.False(t, ok, "replaced through the normal drain, without a termination deadline")
			assert.Equal(t, 1.0, counter(t, metrics.NodeClaimsDisruptedTotal.WithLabelValues(tc.category, nc.Labels[v1.NodePoolLabelKey], v1.CapacityTypeOnDemand, "", "graceful")))
			assert.Equal(t, before[tc.category]+1, counter(t, metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(tc.category)))
		})
	}

	// A second pass acts on nothing new: the deleted NodeClaims are skipped.
	require.NoError(t, c.Check(ctx))
	assert.Equal(t, before[interruption.CategoryInstanceStatus]+1, counter(t, metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(interruption.CategoryInstanceStatus)))
}

// An impairment acts only once it has lasted ImpairmentToleration: 60s
// does nothing, 150s replaces the node through the normal drain.
func TestInstanceStatusToleration(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { local.ClearInstanceStatus("") })
	id, zone := launch(t, "m5.large")
	cl := newClaim(t, id, zone, "m5.large", v1.CapacityTypeOnDemand)
	require.NoError(t, local.SetInstanceStatus(id, awslocal.StatusImpaired, ""))
	clock := clocktesting.NewFakeClock(time.Now().Add(60 * time.Second))
	c := interruption.NewStatusController(cp.Client, ec2Client, interruption.StatusOptions{Clock: clock})
	require.NoError(t, c.Check(ctx))
	assert.False(t, deleting(t, cl.nc), "impaired for 60s")
	clock.Step(90 * time.Second)
	require.NoError(t, c.Check(ctx))
	assert.True(t, deleting(t, cl.nc), "impaired for 150s")
	_, ok := get(t, cl.nc).Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]
	assert.False(t, ok, "through the normal drain")
}

// scriptedEC2 answers DescribeInstanceStatus with the statuses set, without
// ImpairedSince, as a reader who only has its own readings to go by.
type scriptedEC2 struct{ impaired map[string]bool }

func (s *scriptedEC2) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	out := &ec2.DescribeInstanceStatusOutput{}
	for id, bad := range s.impaired {
		st := ec2types.SummaryStatusOk
		if bad {
			st = ec2types.SummaryStatusImpaired
		}
		out.InstanceStatuses = append(out.InstanceStatuses, ec2types.InstanceStatus{InstanceId: aws.String(id),
			InstanceStatus: &ec2types.InstanceStatusSummary{Status: st}, SystemStatus: &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusOk}})
	}
	return out, nil
}

// Without EC2's ImpairedSince the impairment is timed from the first
// impaired reading, and a healthy reading in between starts it anew: the
// impairment must be continuous.
func TestInstanceStatusContinuousImpairment(t *testing.T) {
	ctx := context.Background()
	id := "i-" + fmt.Sprintf("%017x", seq.Add(1))
	cl := newClaim(t, id, "us-east-1b", "m5.large", v1.CapacityTypeOnDemand)
	api := &scriptedEC2{impaired: map[string]bool{id: true}}
	clock := clocktesting.NewFakeClock(time.Now())
	c := interruption.NewStatusController(cp.Client, api, interruption.StatusOptions{Clock: clock})
	pass := func(after time.Duration, impaired bool) {
		t.Helper()
		clock.Step(after)
		api.impaired[id] = impaired
		require.NoError(t, c.Check(ctx))
	}
	pass(0, true)               // t=0: first impaired reading
	pass(60*time.Second, false) // t=60: healthy
	pass(30*time.Second, true)  // t=90: impaired again
	pass(60*time.Second, true)  // t=150: 60s of this impairment
	assert.False(t, deleting(t, cl.nc), "a healthy reading at t=60 restarted the impairment")
	pass(60*time.Second, true) // t=210: 120s
	assert.True(t, deleting(t, cl.nc))
}

// Impairing half of a pool acts on at most MaxUnhealthyShare of it per
// pass, longest impaired first, and a next pass adds none while those
// still drain.
func TestInstanceStatusBoundedShare(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { local.ClearInstanceStatus("") })
	pool := unique("pool")
	var claims []claim
	for i := range 10 {
		id, zone := launch(t, "m5.large")
		claims = append(claims, newClaimIn(t, pool, id, zone, "m5.large", v1.CapacityTypeOnDemand))
		if i < 5 {
			require.NoError(t, local.SetInstanceStatus(id, awslocal.StatusImpaired, ""))
			// EC2 reports ImpairedSince to the second: the first
			// impaired is the longest impaired.
			if i == 0 {
				time.Sleep(1100 * time.Millisecond)
			}
		}
	}
	c := interruption.NewStatusController(cp.Client, ec2Client, interruption.StatusOptions{
		Clock: clocktesting.NewFakeClock(time.Now().Add(interruption.ImpairmentToleration + time.Minute))})
	count := func() (n int) {
		for _, cl := range claims {
			if deleting(t, cl.nc) {
				n++
			}
		}
		return n
	}
	require.NoError(t, c.Check(ctx))
	assert.Equal(t, 2, count(), "20%% of 10 NodeClaims per pass")
	assert.True(t, deleting(t, claims[0].nc), "the longest impaired goes first")
	require.NoError(t, c.Check(ctx))
	assert.Equal(t, 2, count(), "none more while two of the pool are deleting")
	for _, cl := range claims[5:] {
		assert.False(t, deleting(t, cl.nc), "a healthy instance is left alone")
	}
}

// failingEC2 fails every call, as a throttled or unreachable EC2 would.
type failingEC2 struct{}

func (failingEC2) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return nil, errors.New("RequestLimitExceeded")
}

// deniedEC2 answers as EC2 does when the IAM policy lacks the action.
type deniedEC2 struct{}

func (deniedEC2) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}
}

// panickyEC2 panics, as a bug would.
type panickyEC2 struct{}

func (panickyEC2) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	panic("boom")
}

// The periodic loop survives failing and panicking checks and stops with
// its context.
func TestInstanceStatusLoopSurvivesFailures(t *testing.T) {
	id, zone := launch(t, "m5.large")
	newClaim(t, id, zone, "m5.large", v1.CapacityTypeOnDemand)
	require.ErrorContains(t, interruption.NewStatusController(cp.Client, failingEC2{}, interruption.StatusOptions{}).Check(context.Background()), "RequestLimitExceeded")
	// A missing permission says which one, in upstream's words.
	err := interruption.NewStatusController(cp.Client, deniedEC2{}, interruption.StatusOptions{}).Check(context.Background())
	require.ErrorContains(t, err, "ec2:DescribeInstanceStatus permission is not allowed for instance status checks; grant the permission and Karpenter will retry automatically, ")
	require.ErrorContains(t, err, "UnauthorizedOperation")
	for _, api := range []interruption.EC2StatusAPI{failingEC2{}, panickyEC2{}} {
		c := interruption.NewStatusController(cp.Client, api, interruption.StatusOptions{Interval: 20 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		assert.NoError(t, c.Run(ctx))
		cancel()
	}
}
