package interruption

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
)

func TestDeliveries(t *testing.T) {
	d := newDeliveries(2)
	assert.Equal(t, deliveryNew, d.begin("a"))
	assert.Equal(t, deliveryInProgress, d.begin("a"), "a second copy while the first is handled")
	d.end("a", false)
	assert.Equal(t, deliveryNew, d.begin("a"), "a failed delivery is handled afresh")
	d.end("a", true)
	assert.Equal(t, deliveryDone, d.begin("a"))

	for _, id := range []string{"b", "c"} {
		require.Equal(t, deliveryNew, d.begin(id))
		d.end(id, true)
	}
	assert.Equal(t, deliveryNew, d.begin("a"), "evicted once capacity newer ids are done")
	assert.Equal(t, deliveryDone, d.begin("b"))
	assert.Equal(t, deliveryDone, d.begin("c"))
	assert.Equal(t, deliveryNew, d.begin(""), "no id, no deduplication")
	assert.Equal(t, deliveryNew, d.begin(""))
}

// scriptedSQS returns one scripted batch per ReceiveMessage and records
// deletes; it is the one place a duplicate delivery can be forced.
type scriptedSQS struct {
	mu      sync.Mutex
	batches [][]sqstypes.Message
	deleted []string
}

func (s *scriptedSQS) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.local/q")}, nil
}

func (s *scriptedSQS) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.batches) == 0 {
		return nil, fmt.Errorf("script exhausted")
	}
	b := s.batches[0]
	s.batches = s.batches[1:]
	return &sqs.ReceiveMessageOutput{Messages: b}, nil
}

func (s *scriptedSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleted = append(s.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

func TestDuplicateDeliveryHandledOnce(t *testing.T) {
	body := `{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-0abc"}}`
	copyOf := func(receipt string) sqstypes.Message {
		return sqstypes.Message{MessageId: aws.String("m-1"), ReceiptHandle: aws.String(receipt), Body: aws.String(body)}
	}
	fake := &scriptedSQS{batches: [][]sqstypes.Message{{copyOf("r1")}, {copyOf("r2")}, {copyOf("r3")}}}
	r := NewReceiver(fake, "q", Options{})
	var calls int
	// While handling the first copy, the second arrives (at another worker,
	// played here from inside the handler): it is skipped, not deleted.
	h := HandlerFunc(func(ctx context.Context, _ messages.Message) error {
		calls++
		if calls == 1 {
			require.NoError(t, r.poll(ctx, HandlerFunc(func(context.Context, messages.Message) error {
				t.Error("a copy in progress elsewhere reached the handler")
				return nil
			})))
		}
		return nil
	})
	ctx := t.Context()
	require.NoError(t, r.poll(ctx, h))
	assert.Equal(t, []string{"r1"}, fake.deleted, "only the handled copy is deleted")
	// A copy delivered after the message was handled and deleted is deleted
	// again without the handler.
	require.NoError(t, r.poll(ctx, h))
	assert.Equal(t, 1, calls, "the handler sees the message once")
	assert.Equal(t, []string{"r1", "r3"}, fake.deleted)
}
