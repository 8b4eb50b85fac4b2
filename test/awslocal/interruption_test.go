package awslocal_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// The events SendInterruption puts on a queue parse, with the production
// parser, as the kind the controller acts on, for the instance named.
func TestSendInterruptionParsesAsEachKind(t *testing.T) {
	ctx := context.Background()
	q := sqs.NewFromConfig(local.Config(ctx))
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("awslocal-interruptions")})
	require.NoError(t, err)
	url := aws.ToString(created.QueueUrl)
	t.Cleanup(func() { _, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}) })

	const id = "i-0123456789abcdef0"
	for _, tc := range []struct {
		in   awslocal.Interruption
		want messages.Kind
	}{
		{awslocal.Interruption{Kind: awslocal.InterruptionSpot}, messages.KindSpotInterrupted},
		{awslocal.Interruption{Kind: awslocal.InterruptionRebalance}, messages.KindRebalanceRecommendation},
		{awslocal.Interruption{Kind: awslocal.InterruptionStateChange}, messages.KindInstanceStopped},
		{awslocal.Interruption{Kind: awslocal.InterruptionStateChange, State: "terminated"}, messages.KindInstanceTerminated},
		{awslocal.Interruption{Kind: awslocal.InterruptionStateChange, State: "running"}, messages.KindNoOp},
		{awslocal.Interruption{Kind: awslocal.InterruptionScheduledChange}, messages.KindScheduledChange},
		{awslocal.Interruption{Kind: awslocal.InterruptionCapacityReservation, CapacityReservationID: "cr-0123456789abcdef0"}, messages.KindCapacityReservationInterrupted},
	} {
		t.Run(string(tc.want)+"/"+tc.in.State, func(t *testing.T) {
			tc.in.QueueURL, tc.in.InstanceID = url, id
			_, err := local.SendInterruption(ctx, tc.in)
			require.NoError(t, err)
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, WaitTimeSeconds: 2})
			require.NoError(t, err)
			require.Len(t, out.Messages, 1)
			_, err = q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: out.Messages[0].ReceiptHandle})
			require.NoError(t, err)
			msg, err := messages.Parse(aws.ToString(out.Messages[0].Body))
			require.NoError(t, err)
			assert.Equal(t, tc.want, msg.Kind())
			if tc.want != messages.KindNoOp {
				assert.Equal(t, []string{id}, msg.EC2InstanceIDs())
			}
			if cr, ok := msg.(messages.CapacityReservationInterruption); ok {
				assert.Equal(t, "cr-0123456789abcdef0", cr.CapacityReservationID)
			}
		})
	}

	t.Run("bad requests", func(t *testing.T) {
		_, err := local.SendInterruption(ctx, awslocal.Interruption{QueueURL: url, Kind: "meteor", InstanceID: id})
		require.ErrorContains(t, err, "meteor")
		_, err = local.SendInterruption(ctx, awslocal.Interruption{Kind: awslocal.InterruptionSpot, InstanceID: id})
		require.ErrorContains(t, err, "queueUrl")
	})
}

// Over the control API, a spot interruption with terminateAfter reaches the
// queue and terminates the instance once its time is up.
func TestControlAPIInterruptionTerminatesTheInstance(t *testing.T) {
	ctx := context.Background()
	q := sqs.NewFromConfig(local.Config(ctx))
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("awslocal-interruptions-control")})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: created.QueueUrl}) })
	client := ec2Client(t)
	img, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	run, err := client.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(img.ID), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	require.NoError(t, err)
	id := aws.ToString(run.Instances[0].InstanceId)
	t.Cleanup(func() { _, _ = client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}) })

	var out map[string]string
	require.Equal(t, http.StatusCreated, control(t, http.MethodPost, "interruptions",
		map[string]any{"queueUrl": aws.ToString(created.QueueUrl), "kind": "spot-interruption", "instanceId": id, "terminateAfter": "300ms"}, &out))
	require.NotEmpty(t, out["messageId"])
	var bad map[string]string
	require.Equal(t, http.StatusBadRequest, control(t, http.MethodPost, "interruptions", map[string]any{"kind": "spot-interruption"}, &bad))

	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, WaitTimeSeconds: 2})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	msg, err := messages.Parse(aws.ToString(got.Messages[0].Body))
	require.NoError(t, err)
	require.Equal(t, messages.KindSpotInterrupted, msg.Kind())
	require.Equal(t, "arn:aws:ec2:us-east-1:123456789012:instance/"+id, msg.(messages.SpotInterruption).Resources[0])

	require.Eventually(t, func() bool {
		d, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil || len(d.Reservations) == 0 {
			return false
		}
		s := d.Reservations[0].Instances[0].State.Name
		return s == ec2types.InstanceStateNameShuttingDown || s == ec2types.InstanceStateNameTerminated
	}, 10*time.Second, 100*time.Millisecond)
}
