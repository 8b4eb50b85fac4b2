package interruption_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
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
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
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
			deadline, ok := get(t, nc).Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]
			if tc.category == interruption.CategoryScheduledEvent {
				assert.False(t, ok, "a scheduled event drains normally")
			} else {
				assert.Equal(t, now.Format(time.RFC3339), deadline, "an impaired instance is replaced forcefully")
			}
			mode := "forceful"
			if tc.category == interruption.CategoryScheduledEvent {
				mode = "graceful"
			}
			assert.Equal(t, 1.0, counter(t, metrics.NodeClaimsDisruptedTotal.WithLabelValues(tc.category, nc.Labels[v1.NodePoolLabelKey], v1.CapacityTypeOnDemand, "", mode)))
			assert.Equal(t, before[tc.category]+1, counter(t, metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(tc.category)))
		})
	}

	// A second pass acts on nothing new: the deleted NodeClaims are skipped.
	require.NoError(t, c.Check(ctx))
	assert.Equal(t, before[interruption.CategoryInstanceStatus]+1, counter(t, metrics.InterruptionInstanceStatusUnhealthyTotal.WithLabelValues(interruption.CategoryInstanceStatus)))
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
