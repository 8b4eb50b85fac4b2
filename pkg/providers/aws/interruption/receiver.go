package interruption

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
)

// Receive parameters, as upstream: the most SQS returns per call, the
// longest long poll, and a visibility timeout that hides a message from the
// other workers while one handles it.
const (
	MaxMessages              = 10
	WaitTimeSeconds          = 20
	VisibilityTimeoutSeconds = 20
	// DefaultWorkers is how many receivers poll in parallel when
	// Options.Workers is zero.
	DefaultWorkers = 4
	// ParseErrorMessageType labels the metrics of bodies Parse rejects.
	ParseErrorMessageType = "parse_error"
)

// SQSAPI is the part of *sqs.Client the receiver uses.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Handler acts on one parsed message that is not a NoOp. The interruption
// controller implements it (cordon and drain, mark offerings unavailable).
// It is called from several workers at once, and may see a message twice
// (SQS delivers at least once), so it must be safe for concurrent use and
// idempotent. A nil error deletes the message; an error (or a panic) leaves
// it on the queue to be received again once its visibility timeout ends,
// or moved by the queue's redrive policy.
type Handler interface {
	Handle(ctx context.Context, msg messages.Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, msg messages.Message) error

func (f HandlerFunc) Handle(ctx context.Context, msg messages.Message) error { return f(ctx, msg) }

// Options configure a Receiver. The zero value is usable.
type Options struct {
	// Workers is the number of parallel long-polling receivers; zero means
	// DefaultWorkers.
	Workers int
	// Clock measures queue duration against SentTimestamp; nil is the real
	// clock.
	Clock clock.PassiveClock
	// MinBackoff and MaxBackoff bound the wait after a failed receive, which
	// doubles per consecutive failure; zero means 1s and 30s.
	MinBackoff, MaxBackoff time.Duration
}

// Receiver long-polls one SQS queue, found by name, and hands each message
// to a Handler. It never lets one message hold up the others: bodies that do
// not parse and events nobody acts on are deleted at once and counted.
type Receiver struct {
	client    SQSAPI
	queueName string
	opts      Options

	mu       sync.Mutex
	queueURL string

	seen deliveries
}

// NewReceiver builds a receiver for the queue named queueName.
func NewReceiver(client SQSAPI, queueName string, opts Options) *Receiver {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	return &Receiver{client: client, queueName: queueName, opts: opts, seen: newDeliveries(rememberedMessages)}
}

// QueueURL resolves the queue's URL with GetQueueUrl once and caches it; a
// failure is not cached, so a queue created later is found on the next call.
func (r *Receiver) QueueURL(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queueURL != "" {
		return r.queueURL, nil
	}
	out, err := r.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(r.queueName)})
	if err != nil {
		return "", fmt.Errorf("fetching queue url for %q, %w", r.queueName, err)
	}
	r.queueURL = aws.ToString(out.QueueUrl)
	return r.queueURL, nil
}

// Receive long-polls once for up to MaxMessages messages.
func (r *Receiver) Receive(ctx context.Context) ([]sqstypes.Message, error) {
	url, err := r.QueueURL(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         MaxMessages,
		WaitTimeSeconds:             WaitTimeSeconds,
		VisibilityTimeout:           VisibilityTimeoutSeconds,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, fmt.Errorf("receiving sqs messages, %w", err)
	}
	return out.Messages, nil
}

// Delete removes a handled message from the queue.
func (r *Receiver) Delete(ctx context.Context, msg sqstypes.Message) error {
	url, err := r.QueueURL(ctx)
	if err != nil {
		return err
	}
	if _, err := r.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msg.ReceiptHandle}); err != nil {
		return fmt.Errorf("deleting sqs message, %w", err)
	}
	return nil
}

// Run polls with Options.Workers receivers until ctx is done, then returns
// nil once every worker has stopped. Failed receives are logged and retried
// with backoff; a panic anywhere in a worker's iteration is recovered and
// logged, and the worker carries on.
func (r *Receiver) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("interruption receiver needs a handler")
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("queue", r.queueName))
	log.FromContext(ctx).V(1).Info("watching interruption queue")
	var wg sync.WaitGroup
	for i := 0; i < r.opts.Workers; i++ {
		wg.Go(func() { r.work(ctx, h) })
	}
	wg.Wait()
	return nil
}

func (r *Receiver) work(ctx context.Context, h Handler) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if err := r.poll(ctx, h); err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, r.opts.MinBackoff), r.opts.MaxBackoff)
			log.FromContext(ctx).Error(err, "polling interruption queue", "backoff", backoff.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
	}
}

// poll receives one batch and processes it. It recovers its own panics so
// that no message, and no bug, ends the worker.
func (r *Receiver) poll(ctx context.Context, h Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic polling interruption queue: %v\n%s", p, debug.Stack())
		}
	}()
	msgs, err := r.Receive(ctx)
	if err != nil {
		return err
	}
	// The batch's messages are handled in parallel, as upstream does: each
	// costs a few API calls, and 10 interruptions in a row must not wait
	// for one another. A panic in one is recovered here, in its goroutine,
	// where poll's recover cannot reach.
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					log.FromContext(ctx).Error(fmt.Errorf("%v\n%s", p, debug.Stack()), "panic processing interruption message", "messageId", aws.ToString(m.MessageId))
				}
			}()
			r.process(ctx, h, m)
		})
	}
	wg.Wait()
	return nil
}

// process parses, handles and deletes one message.
//
// SQS delivers at least once: the same message (same MessageId) can reach
// two workers at once, or come back after it was deleted. A copy that
// another worker is still handling is skipped (that worker's delete removes
// the message); a copy of a message already handled is deleted again without
// calling the handler. Only the first delivery counts in the metrics, so
// they count messages rather than deliveries.
func (r *Receiver) process(ctx context.Context, h Handler, raw sqstypes.Message) {
	id := aws.ToString(raw.MessageId)
	logger := log.FromContext(ctx).WithValues("messageId", id)
	switch r.seen.begin(id) {
	case deliveryInProgress:
		return
	case deliveryDone:
		r.delete(ctx, logger, raw, "")
		return
	}
	deleted := false
	defer func() { r.seen.end(id, deleted) }()

	msg, err := messages.Parse(aws.ToString(raw.Body))
	if err != nil {
		// A body that does not parse never will: delete it rather than let it
		// come back every visibility timeout.
		logger.Error(err, "failed parsing interruption message")
		metrics.InterruptionReceivedMessagesTotal.WithLabelValues(ParseErrorMessageType).Inc()
		deleted = r.finish(ctx, logger, raw, ParseErrorMessageType)
		return
	}
	kind := msg.Kind()
	metrics.InterruptionReceivedMessagesTotal.WithLabelValues(string(kind)).Inc()
	if kind != messages.KindNoOp {
		if err := safeHandle(ctx, h, msg); err != nil {
			logger.Error(err, "handling interruption message", "messageKind", string(kind))
			return
		}
	}
	deleted = r.finish(ctx, logger, raw, string(kind))
}

// finish records the queue duration and deletes the message, counting the
// delete under messageType.
func (r *Receiver) finish(ctx context.Context, logger logr.Logger, raw sqstypes.Message, messageType string) bool {
	if sent, ok := sentTime(raw); ok {
		metrics.InterruptionMessageQueueDurationSeconds.Observe(r.opts.Clock.Since(sent).Seconds())
	}
	if !r.delete(ctx, logger, raw, messageType) {
		return false
	}
	metrics.InterruptionDeletedMessagesTotal.WithLabelValues(messageType).Inc()
	return true
}

// delete outlives ctx by a few seconds: a message that was handled while the
// receiver shuts down should not be handled again by the next one.
func (r *Receiver) delete(ctx context.Context, logger logr.Logger, raw sqstypes.Message, messageType string) bool {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.Delete(dctx, raw); err != nil {
		logger.Error(err, "deleting interruption message", "messageKind", messageType)
		return false
	}
	return true
}

func safeHandle(ctx context.Context, h Handler, msg messages.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic handling %s message: %v\n%s", msg.Kind(), p, debug.Stack())
		}
	}()
	return h.Handle(ctx, msg)
}

// sentTime reads the SentTimestamp system attribute (milliseconds since the
// epoch).
func sentTime(raw sqstypes.Message) (time.Time, bool) {
	v, ok := raw.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)]
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
