package interruption_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var (
	local     *awslocal.Local
	sqsClient *sqs.Client
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	sqsClient = sqs.NewFromConfig(local.Config(context.Background()))
	log.SetLogger(logr.Discard())
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

// recorder is a Handler that remembers what it saw.
type recorder struct {
	mu   sync.Mutex
	seen []messages.Message
	// fail, when set, decides which messages the handler fails or panics on.
	fail func(messages.Message) error
}

func (r *recorder) Handle(_ context.Context, msg messages.Message) error {
	if r.fail != nil {
		if err := r.fail(msg); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, msg)
	return nil
}

func (r *recorder) messages() []messages.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]messages.Message(nil), r.seen...)
}

func createQueue(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	out, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = sqsClient.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return aws.ToString(out.QueueUrl)
}

// send puts bodies on the queue in batches of 10, the most SendMessageBatch
// takes.
func send(t *testing.T, ctx context.Context, url string, bodies []string) {
	t.Helper()
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := start; i < min(start+10, len(bodies)); i++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(bodies[i])})
		}
		out, err := sqsClient.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}
}

// queueDepth is (visible, in flight) messages.
func queueDepth(t *testing.T, ctx context.Context, url string) (int, int) {
	t.Helper()
	out, err := sqsClient.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	require.NoError(t, err)
	visible, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	require.NoError(t, err)
	inFlight, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	require.NoError(t, err)
	return visible, inFlight
}

// counts snapshots the interruption counters by message type and the
// histogram's sample count, so tests can compare deltas (the metrics are
// process-wide).
type counts struct {
	received, deleted map[string]float64
	queued            uint64
}

var messageTypes = append([]string{interruption.ParseErrorMessageType}, kindStrings()...)

func kindStrings() []string {
	var out []string
	for _, k := range messages.Kinds {
		out = append(out, string(k))
	}
	return out
}

func snapshot(t *testing.T) counts {
	t.Helper()
	c := counts{received: map[string]float64{}, deleted: map[string]float64{}}
	for _, mt := range messageTypes {
		c.received[mt] = counterValue(t, metrics.InterruptionReceivedMessagesTotal.WithLabelValues(mt))
		c.deleted[mt] = counterValue(t, metrics.InterruptionDeletedMessagesTotal.WithLabelValues(mt))
	}
	m := &dto.Metric{}
	require.NoError(t, metrics.InterruptionMessageQueueDurationSeconds.Write(m))
	c.queued = m.GetHistogram().GetSampleCount()
	return c
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, c.Write(m))
	return m.GetCounter().GetValue()
}

func (c counts) minus(before counts) counts {
	d := counts{received: map[string]float64{}, deleted: map[string]float64{}, queued: c.queued - before.queued}
	for _, mt := range messageTypes {
		if v := c.received[mt] - before.received[mt]; v != 0 {
			d.received[mt] = v
		}
		if v := c.deleted[mt] - before.deleted[mt]; v != 0 {
			d.deleted[mt] = v
		}
	}
	return d
}

func runReceiver(t *testing.T, ctx context.Context, r *interruption.Receiver, h interruption.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Error("Run did not return within 10s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// event renders an EventBridge envelope.
func event(source, detailType, detail string) string {
	return fmt.Sprintf(`{"version":"0","id":"%s","detail-type":%q,"source":%q,"account":"123456789012","time":%q,"region":"us-east-1","resources":[],"detail":%s}`,
		strconv.FormatInt(time.Now().UnixNano(), 16), detailType, source, time.Now().UTC().Format(time.RFC3339), detail)
}

func instanceID(n int) string { return fmt.Sprintf("i-%017x", n) }

// TestReceiverDrainsMixedQueue puts 1,000 malformed and foreign messages
// and 10 real ones on a real (local) SQS queue: the handler sees exactly
// the 10, every message is deleted, and the metrics count each by type.
// atLeastOnce checks per message type that every message was counted and
// that few were counted twice: SQS delivers at least once, and on a loaded
// machine a message can outlive its visibility timeout before its delete
// and be received (and deleted) again. It returns the total counted.
func atLeastOnce(t *testing.T, want, got map[string]float64, what string) float64 {
	t.Helper()
	total, extra := 0.0, 0.0
	for kind, n := range want {
		assert.GreaterOrEqual(t, got[kind], n, "%s: %s", what, kind)
		extra += got[kind] - n
	}
	for kind, n := range got {
		total += n
		if _, ok := want[kind]; !ok {
			t.Errorf("%s: unexpected message type %s (%v)", what, kind, n)
		}
	}
	assert.LessOrEqual(t, extra, 20.0, "%s: redeliveries of 1,010 messages", what)
	return total
}

func TestReceiverDrainsMixedQueue(t *testing.T) {
	// Generous: on a loaded machine moto alone takes over a minute to take
	// the 101 batches, and the drain's deadline starts after them.
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	url := createQueue(t, ctx, "interruption-mixed")

	real := map[string]messages.Kind{}
	var bodies []string
	addReal := func(kind messages.Kind, body string, id string) {
		real[id] = kind
		bodies = append(bodies, body)
	}
	for i := 1; i <= 3; i++ {
		id := instanceID(i)
		addReal(messages.KindSpotInterrupted, event(messages.SourceEC2, messages.DetailTypeSpotInterruption, fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, id)), id)
	}
	for i := 4; i <= 5; i++ {
		id := instanceID(i)
		addReal(messages.KindRebalanceRecommendation, event(messages.SourceEC2, messages.DetailTypeRebalanceRecommendation, fmt.Sprintf(`{"instance-id":%q}`, id)), id)
	}
	addReal(messages.KindInstanceStopped, event(messages.SourceEC2, messages.DetailTypeStateChange, fmt.Sprintf(`{"instance-id":%q,"state":"stopping"}`, instanceID(6))), instanceID(6))
	addReal(messages.KindInstanceTerminated, event(messages.SourceEC2, messages.DetailTypeStateChange, fmt.Sprintf(`{"instance-id":%q,"state":"terminated"}`, instanceID(7))), instanceID(7))
	addReal(messages.KindCapacityReservationInterrupted, event(messages.SourceEC2, messages.DetailTypeCapacityReservationInterruption,
		fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate","instance-termination-time":%q,"azId":"use1-az1"}`, instanceID(8), time.Now().Add(2*time.Minute).UTC().Format(time.RFC3339))), instanceID(8))
	for i := 9; i <= 10; i++ {
		id := instanceID(i)
		addReal(messages.KindScheduledChange, event(messages.SourceHealth, messages.DetailTypeHealthEvent,
			fmt.Sprintf(`{"service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":%q}]}`, id)), id)
	}
	require.Len(t, real, 10)

	// 1,000 others, five flavours of 200: garbage, truncated JSON, a known
	// event without its instance, a foreign event, a state change nobody
	// acts on.
	for i := 0; i < 200; i++ {
		bodies = append(bodies,
			fmt.Sprintf("not json %d <%s>", i, strings.Repeat("x", i%7)),
			fmt.Sprintf(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-%d`, i),
			event(messages.SourceEC2, messages.DetailTypeSpotInterruption, `{"instance-action":"terminate"}`),
			event("aws.autoscaling", "EC2 Instance Launch Successful", fmt.Sprintf(`{"EC2InstanceId":%q}`, instanceID(1000+i))),
			event(messages.SourceEC2, messages.DetailTypeStateChange, fmt.Sprintf(`{"instance-id":%q,"state":"running"}`, instanceID(2000+i))),
		)
	}
	// Interleave the real ones through the batch rather than first.
	for i, j := 0, 0; i < 10; i, j = i+1, j+101 {
		bodies[i], bodies[j] = bodies[j], bodies[i]
	}
	require.Len(t, bodies, 1010)

	before := snapshot(t)
	sendStart := time.Now()
	send(t, ctx, url, bodies)
	t.Logf("sent %d messages in %s", len(bodies), time.Since(sendStart))
	drainStart := time.Now()
	h := &recorder{}
	r := interruption.NewReceiver(sqsClient, "interruption-mixed", interruption.Options{Workers: 4})
	stop := runReceiver(t, ctx, r, h)

	// Drained means every message counted deleted and none left on the
	// queue, in flight included: on a loaded machine a message can outlive
	// its visibility timeout, come back and be deleted twice, so the count
	// alone can be reached while a redelivered message is still in flight.
	var visible, inFlight int
	require.Eventually(t, func() bool {
		d := snapshot(t).minus(before)
		total := 0.0
		for _, v := range d.deleted {
			total += v
		}
		if total < 1010 {
			return false
		}
		visible, inFlight = queueDepth(t, ctx, url)
		return visible == 0 && inFlight == 0
	}, 5*time.Minute, 200*time.Millisecond, "every message deleted and the queue empty")
	stop()
	t.Logf("drained in %s", time.Since(drainStart))
	assert.Zero(t, visible, "ApproximateNumberOfMessages")
	assert.Zero(t, inFlight, "ApproximateNumberOfMessagesNotVisible")

	seen := h.messages()
	require.Len(t, seen, 10, "the handler sees exactly the real messages")
	got := map[string]messages.Kind{}
	for _, m := range seen {
		require.Len(t, m.EC2InstanceIDs(), 1)
		got[m.EC2InstanceIDs()[0]] = m.Kind()
	}
	assert.Equal(t, real, got)

	want := map[string]float64{
		interruption.ParseErrorMessageType:                  600,
		string(messages.KindNoOp):                           400,
		string(messages.KindSpotInterrupted):                3,
		string(messages.KindRebalanceRecommendation):        2,
		string(messages.KindInstanceStopped):                1,
		string(messages.KindInstanceTerminated):             1,
		string(messages.KindCapacityReservationInterrupted): 1,
		string(messages.KindScheduledChange):                2,
	}
	d := snapshot(t).minus(before)
	atLeastOnce(t, want, d.received, "received_messages_total by message_type")
	deleted := atLeastOnce(t, want, d.deleted, "deleted_messages_total by message_type")
	assert.Equal(t, uint64(deleted), d.queued, "one queue duration per deleted message")

	// Upstream's names, types and labels, as the metrics endpoint serves them.
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	served := map[string]*dto.MetricFamily{}
	for _, f := range families {
		served[f.GetName()] = f
	}
	for name, typ := range map[string]dto.MetricType{
		"karpenter_interruption_received_messages_total":        dto.MetricType_COUNTER,
		"karpenter_interruption_deleted_messages_total":         dto.MetricType_COUNTER,
		"karpenter_interruption_message_queue_duration_seconds": dto.MetricType_HISTOGRAM,
	} {
		f, ok := served[name]
		require.True(t, ok, name)
		assert.Equal(t, typ, f.GetType(), name)
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		if typ == dto.MetricType_COUNTER {
			assert.Equal(t, []string{"message_type"}, labels, name)
		} else {
			assert.Empty(t, labels, name)
		}
	}
}

// TestReceiverKeepsFailedMessages: a handler error or panic leaves that
// message on the queue (in flight until its visibility timeout), while the
// worker goes on and the other messages are handled and deleted.
func TestReceiverKeepsFailedMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	url := createQueue(t, ctx, "interruption-failures")
	panicID, errID := instanceID(0xdead), instanceID(0xbad)
	var bodies []string
	for _, id := range []string{panicID, errID, instanceID(1), instanceID(2), instanceID(3)} {
		bodies = append(bodies, event(messages.SourceEC2, messages.DetailTypeSpotInterruption, fmt.Sprintf(`{"instance-id":%q}`, id)))
	}
	before := snapshot(t)
	send(t, ctx, url, bodies)
	var mu sync.Mutex
	attempts := map[string]int{}
	h := &recorder{fail: func(m messages.Message) error {
		id := m.EC2InstanceIDs()[0]
		mu.Lock()
		attempts[id]++
		mu.Unlock()
		switch id {
		case panicID:
			panic("handler bug")
		case errID:
			return fmt.Errorf("node not found yet")
		}
		return nil
	}}
	// One worker: a panic that escaped would stop all polling.
	r := interruption.NewReceiver(sqsClient, "interruption-failures", interruption.Options{Workers: 1})
	logs := &logLines{}
	stop := runReceiver(t, log.IntoContext(ctx, funcr.New(logs.add, funcr.Options{})), r, h)
	require.Eventually(t, func() bool {
		return snapshot(t).minus(before).deleted[string(messages.KindSpotInterrupted)] == 3
	}, time.Minute, 100*time.Millisecond)

	// The worker survived the panic: a message sent now is still handled.
	later := instanceID(4)
	send(t, ctx, url, []string{event(messages.SourceEC2, messages.DetailTypeSpotInterruption, fmt.Sprintf(`{"instance-id":%q}`, later))})
	require.Eventually(t, func() bool {
		return snapshot(t).minus(before).deleted[string(messages.KindSpotInterrupted)] == 4
	}, time.Minute, 100*time.Millisecond)
	stop()

	visible, inFlight := queueDepth(t, ctx, url)
	assert.Equal(t, 2, visible+inFlight, "the failed and the panicking message stay on the queue")
	d := snapshot(t).minus(before)
	assert.Equal(t, float64(6), d.received[string(messages.KindSpotInterrupted)], "received counts the failed ones too")
	var handled []string
	for _, m := range h.messages() {
		handled = append(handled, m.EC2InstanceIDs()[0])
	}
	assert.ElementsMatch(t, []string{instanceID(1), instanceID(2), instanceID(3), later}, handled)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, attempts[panicID], "not redelivered within the 20s visibility timeout")
	assert.Equal(t, 1, attempts[errID])
	assert.Equal(t, 1, logs.count(`"msg"="handling interruption message" "error"="panic handling spot_interrupted message: handler bug`), logs.all())
	assert.Equal(t, 1, logs.count(`"msg"="handling interruption message" "error"="node not found yet"`), logs.all())
}

// logLines collects funcr output.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestReceiverWaitsForQueue: a receiver started before its queue exists
// keeps retrying GetQueueUrl (the failure is not cached) and drains the
// queue once it appears.
func TestReceiverWaitsForQueue(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 1})
	ctx, cancel := context.WithTimeout(log.IntoContext(t.Context(), logger), 2*time.Minute)
	defer cancel()
	h := &recorder{}
	r := interruption.NewReceiver(sqsClient, "interruption-late", interruption.Options{Workers: 2, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	_, err := r.QueueURL(ctx)
	require.Error(t, err, "the queue does not exist yet")
	stop := runReceiver(t, ctx, r, h)
	time.Sleep(300 * time.Millisecond)
	url := createQueue(t, ctx, "interruption-late")
	send(t, ctx, url, []string{event(messages.SourceEC2, messages.DetailTypeRebalanceRecommendation, fmt.Sprintf(`{"instance-id":%q}`, instanceID(42)))})
	require.Eventually(t, func() bool { return len(h.messages()) == 1 }, time.Minute, 100*time.Millisecond)
	stop()
	assert.Equal(t, []string{instanceID(42)}, h.messages()[0].EC2InstanceIDs())
	got, err := r.QueueURL(ctx)
	require.NoError(t, err)
	assert.Equal(t, url, got)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, lines, `"level"=1 "msg"="watching interruption queue" "queue"="interruption-late"`, "upstream's line, once the receiver starts")
}

// TestReceiverReceiveParameters checks the long-poll parameters on the
// wire-level result: SentTimestamp comes back, and a received message stays
// hidden from a second receive (the visibility timeout).
func TestReceiverReceiveParameters(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	url := createQueue(t, ctx, "interruption-params")
	var bodies []string
	for i := 0; i < 12; i++ {
		bodies = append(bodies, fmt.Sprintf("body %d", i))
	}
	send(t, ctx, url, bodies)
	r := interruption.NewReceiver(sqsClient, "interruption-params", interruption.Options{})
	first, err := r.Receive(ctx)
	require.NoError(t, err)
	assert.Len(t, first, interruption.MaxMessages)
	for _, m := range first {
		ms, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
		require.NoError(t, err, "SentTimestamp requested")
		assert.WithinDuration(t, time.Now(), time.UnixMilli(ms), time.Minute)
	}
	second, err := r.Receive(ctx)
	require.NoError(t, err)
	assert.Len(t, second, 2, "the first ten are hidden by the visibility timeout")
	for _, m := range append(first, second...) {
		require.NoError(t, r.Delete(ctx, m))
	}
	visible, inFlight := queueDepth(t, ctx, url)
	assert.Zero(t, visible+inFlight)
}

func TestReceiverNeedsHandler(t *testing.T) {
	r := interruption.NewReceiver(sqsClient, "unused", interruption.Options{})
	assert.Error(t, r.Run(t.Context(), nil))
}
