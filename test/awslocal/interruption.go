package awslocal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
)

// Interruption kinds: the EventBridge events the AWS interruption queue
// receives, by the name the control API takes.
const (
	InterruptionSpot                = "spot-interruption"
	InterruptionRebalance           = "rebalance-recommendation"
	InterruptionStateChange         = "state-change"
	InterruptionScheduledChange     = "scheduled-change"
	InterruptionCapacityReservation = "capacity-reservation-interruption"
)

// InterruptionKinds lists the kinds SendInterruption accepts.
var InterruptionKinds = []string{InterruptionSpot, InterruptionRebalance, InterruptionStateChange,
	InterruptionScheduledChange, InterruptionCapacityReservation}

// Interruption is one EventBridge event to put on an SQS queue.
type Interruption struct {
	// QueueURL is the queue's URL as CreateQueue or GetQueueUrl returned it.
	QueueURL string `json:"queueUrl"`
	// Kind is one of InterruptionKinds.
	Kind string `json:"kind"`
	// InstanceID is the instance the event is about. It need not exist in
	// moto: an event for a foreign instance is a test case of its own.
	InstanceID string `json:"instanceId"`
	// State is the new state of a state-change (stopping, stopped,
	// shutting-down, terminated, pending, running); default stopping.
	State string `json:"state,omitempty"`
	// CapacityReservationID, for a capacity-reservation-interruption, is
	// named in the event's resources; empty leaves it out, as AWS's own
	// documented example does.
	CapacityReservationID string `json:"capacityReservationId,omitempty"`
	// TerminateAfter, for a spot or capacity-reservation interruption,
	// terminates the instance that long after the event, as EC2 does two
	// minutes after the warning; zero leaves it running.
	TerminateAfter Duration `json:"terminateAfter,omitempty"`
}

// Duration is a time.Duration that JSON reads and writes as "2m".
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string ("90s").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// SendInterruption puts an EventBridge-shaped event on the queue, as the
// rules a Karpenter install creates would, and returns its SQS message id.
// The event's region and the instance's zone come from moto when the
// instance exists there.
func (l *Local) SendInterruption(ctx context.Context, in Interruption) (string, error) {
	body, err := l.InterruptionBody(ctx, in)
	if err != nil {
		return "", err
	}
	out, err := l.front.sqsClient().SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(in.QueueURL), MessageBody: aws.String(body)})
	if err != nil {
		return "", fmt.Errorf("sending %s for %s: %w", in.Kind, in.InstanceID, err)
	}
	if in.TerminateAfter > 0 && (in.Kind == InterruptionSpot || in.Kind == InterruptionCapacityReservation) {
		go l.front.terminateLater(in.InstanceID, time.Duration(in.TerminateAfter))
	}
	return aws.ToString(out.MessageId), nil
}

// InterruptionBody renders the event SendInterruption would send, for tests
// that send it themselves (or mangle it first).
func (l *Local) InterruptionBody(ctx context.Context, in Interruption) (string, error) {
	if !slices.Contains(InterruptionKinds, in.Kind) {
		return "", fmt.Errorf("interruption kind %q: want one of %s", in.Kind, strings.Join(InterruptionKinds, ", "))
	}
	if in.QueueURL == "" {
		return "", fmt.Errorf("interruption needs a queueUrl")
	}
	region := DefaultRegion
	zone := l.front.instanceZone(ctx, region, in.InstanceID)
	now := time.Now().UTC().Truncate(time.Second)
	instanceARN := fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", region, accountID, in.InstanceID)
	event := map[string]any{
		"version": "0", "id": uuid.NewString(), "source": "aws.ec2", "account": accountID,
		"time": now.Format(time.RFC3339), "region": region, "resources": []string{instanceARN},
	}
	switch in.Kind {
	case InterruptionSpot:
		event["detail-type"] = "EC2 Spot Instance Interruption Warning"
		event["detail"] = map[string]any{"instance-id": in.InstanceID, "instance-action": "terminate"}
	case InterruptionRebalance:
		event["detail-type"] = "EC2 Instance Rebalance Recommendation"
		event["detail"] = map[string]any{"instance-id": in.InstanceID}
	case InterruptionStateChange:
		state := in.State
		if state == "" {
			state = "stopping"
		}
		event["detail-type"] = "EC2 Instance State-change Notification"
		event["detail"] = map[string]any{"instance-id": in.InstanceID, "state": state}
	case InterruptionCapacityReservation:
		event["detail-type"] = "EC2 Capacity Reservation Instance Interruption Warning"
		detail := map[string]any{"instance-id": in.InstanceID, "instance-action": "terminate",
			"instance-termination-time": now.Add(2 * time.Minute).Format(time.RFC3339)}
		if zone != "" {
			zones, _ := l.front.regionZones(ctx, region)
			for _, z := range zones {
				if z.Name == zone {
					detail["azId"] = z.ID
				}
			}
		}
		event["detail"] = detail
		if in.CapacityReservationID != "" {
			event["resources"] = []string{instanceARN,
				fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", region, accountID, in.CapacityReservationID)}
		}
	case InterruptionScheduledChange:
		start := now.Add(14 * 24 * time.Hour)
		event["source"] = "aws.health"
		event["detail-type"] = "AWS Health Event"
		event["resources"] = []string{in.InstanceID}
		event["detail"] = map[string]any{
			"eventArn":          fmt.Sprintf("arn:aws:health:%s::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_%s", region, strings.ReplaceAll(uuid.NewString()[:8], "-", "")),
			"service":           "EC2",
			"eventTypeCode":     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
			"eventTypeCategory": "scheduledChange",
			"startTime":         start.Format(time.RFC1123),
			"endTime":           start.Add(time.Hour).Format(time.RFC1123),
			"eventDescription": []map[string]string{{"language": "en_US",
				"latestDescription": "EC2 has detected degradation of the underlying hardware hosting your instance. It will be retired after the scheduled start time."}},
			"affectedEntities": []map[string]string{{"entityValue": in.InstanceID}},
		}
	}
	b, err := json.Marshal(event)
	if err != nil {
		return "", fmt.Errorf("encoding %s event: %w", in.Kind, err)
	}
	return string(b), nil
}

// sqsClient talks to moto's SQS directly: the front adds nothing to SQS,
// and the control handler has no endpoint of its own to call back into.
func (f *front) sqsClient() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       DefaultRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(f.moto.String()),
	})
}

// instanceZone is the instance's availability zone in moto, "" when moto
// does not know the instance.
func (f *front) instanceZone(ctx context.Context, region, id string) string {
	if id == "" {
		return ""
	}
	doc, err := f.motoXML(ctx, region, ec2Form("DescribeInstances", "InstanceId.1", id))
	if err != nil {
		return ""
	}
	for _, r := range doc.items("reservationSet") {
		for _, inst := range r.items("instancesSet") {
			return inst.text("placement", "availabilityZone")
		}
	}
	return ""
}

// terminateLater terminates the instance after d, as EC2 reclaims an
// interrupted spot instance, handing reserved capacity back like
// TerminateInstances through the front does.
func (f *front) terminateLater(id string, d time.Duration) {
	time.Sleep(d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, _, err := f.motoRaw(ctx, DefaultRegion, ec2Form("TerminateInstances", "InstanceId.1", id))
	if err != nil || status != http.StatusOK {
		return // the instance may be gone already, or the local AWS stopped
	}
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.instances[id]; rec != nil {
		rec.Terminated = true
		if r := s.reservations[rec.ReservationID]; r != nil {
			delete(r.used, id)
		}
	}
}
