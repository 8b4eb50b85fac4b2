package messages_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/interruption/messages"
)

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return ts
}

// TestParseTestdata parses the example events written from AWS's
// documentation, one per file.
func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file  string
		kind  messages.Kind
		ids   []string
		start string
		err   error
	}{
		{file: "spot_interruption.json", kind: messages.KindSpotInterrupted, ids: []string{"i-0b7c3d9e1f2a4b5c6"}, start: "2026-03-14T09:26:53Z"},
		{file: "rebalance_recommendation.json", kind: messages.KindRebalanceRecommendation, ids: []string{"i-0123456789abcdef0"}, start: "2026-03-14T09:20:00Z"},
		{file: "state_change_stopping.json", kind: messages.KindInstanceStopped, ids: []string{"i-0fedcba9876543210"}, start: "2026-03-14T10:02:17Z"},
		{file: "state_change_stopped.json", kind: messages.KindInstanceStopped, ids: []string{"i-0fedcba9876543210"}, start: "2026-03-14T10:02:17Z"},
		{file: "state_change_shutting-down.json", kind: messages.KindInstanceTerminated, ids: []string{"i-0fedcba9876543210"}, start: "2026-03-14T10:02:17Z"},
		{file: "state_change_terminated.json", kind: messages.KindInstanceTerminated, ids: []string{"i-0fedcba9876543210"}, start: "2026-03-14T10:02:17Z"},
		{file: "state_change_pending.json", kind: messages.KindNoOp, start: "2026-03-14T10:02:17Z"},
		{file: "state_change_running.json", kind: messages.KindNoOp, start: "2026-03-14T10:02:17Z"},
		{file: "capacity_reservation_interruption.json", kind: messages.KindCapacityReservationInterrupted, ids: []string{"i-0aa11bb22cc33dd44"}, start: "2026-03-14T11:45:00Z"},
		{file: "scheduled_change.json", kind: messages.KindScheduledChange, ids: []string{"i-0c1d2e3f4a5b6c7d8", "i-0e9f8a7b6c5d4e3f2"}, start: "2026-03-15T06:00:00Z"},
		{file: "health_issue_foreign.json", kind: messages.KindNoOp, start: "2026-03-15T08:30:00Z"},
		{file: "autoscaling_foreign.json", kind: messages.KindNoOp, start: "2026-03-15T09:00:00Z"},
		{file: "malformed_truncated.json", err: messages.ErrMalformed},
		{file: "spot_missing_instance_id.json", err: messages.ErrMissingInstanceID},
	}
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.Len(t, files, len(tests), "every testdata file has a row")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			msg, err := messages.Parse(readTestdata(t, tt.file))
			if tt.err != nil {
				require.Error(t, err)
				assert.Nil(t, msg)
				assert.ErrorIs(t, err, tt.err)
				var pe *messages.ParseError
				assert.True(t, errors.As(err, &pe), "a *ParseError, got %T", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.kind, msg.Kind())
			assert.Equal(t, tt.ids, msg.EC2InstanceIDs())
			assert.Equal(t, mustTime(t, tt.start), msg.StartTime())
		})
	}
}

func TestParseDetails(t *testing.T) {
	msg, err := messages.Parse(readTestdata(t, "spot_interruption.json"))
	require.NoError(t, err)
	spot := msg.(messages.SpotInterruption)
	assert.Equal(t, "terminate", spot.InstanceAction)
	assert.Equal(t, "aws.ec2", spot.Source)
	assert.Equal(t, "us-east-1", spot.Region)
	assert.Equal(t, "123456789012", spot.Account)
	assert.Equal(t, "7a1e0c52-3b9d-4f21-9a55-0d6c1f3e2b11", spot.ID)

	msg, err = messages.Parse(readTestdata(t, "capacity_reservation_interruption.json"))
	require.NoError(t, err)
	cr := msg.(messages.CapacityReservationInterruption)
	assert.Equal(t, "cr-0a1b2c3d4e5f67890", cr.CapacityReservationID, "taken from the capacity-reservation ARN in resources")
	assert.Equal(t, mustTime(t, "2026-03-14T11:47:00Z"), cr.TerminationTime)
	assert.Equal(t, "use1-az4", cr.AvailabilityZoneID)
	assert.Equal(t, "terminate", cr.InstanceAction)

	msg, err = messages.Parse(readTestdata(t, "scheduled_change.json"))
	require.NoError(t, err)
	sc := msg.(messages.ScheduledChange)
	assert.Equal(t, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", sc.EventTypeCode)
	ids := sc.EC2InstanceIDs()
	ids[0] = "mutated"
	assert.Equal(t, "i-0c1d2e3f4a5b6c7d8", sc.EC2InstanceIDs()[0], "EC2InstanceIDs returns a copy")

	msg, err = messages.Parse(readTestdata(t, "state_change_stopped.json"))
	require.NoError(t, err)
	assert.Equal(t, messages.StateStopped, msg.(messages.StateChange).State)
}

const (
	spotPrefix   = `{"version":"0","id":"x","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-03-14T09:26:53Z",`
	crPrefix     = `{"version":"0","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2",`
	healthPrefix = `{"version":"0","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":`
)

// TestParseEdges covers bodies the examples do not: wrong types, missing
// pieces and the variants AWS's own documentation shows.
func TestParseEdges(t *testing.T) {
	tests := []struct {
		name string
		body string
		kind messages.Kind
		ids  []string
		err  error
	}{
		{name: "empty body", body: "", err: messages.ErrMalformed},
		{name: "plain text", body: "abcd", err: messages.ErrMalformed},
		{name: "null", body: "null", err: messages.ErrMalformed},
		{name: "array", body: `[{"version":"0"}]`, err: messages.ErrMalformed},
		{name: "number", body: "42", err: messages.ErrMalformed},
		{name: "trailing data", body: `{"version":"0"}{"version":"0"}`, err: messages.ErrMalformed},
		{name: "trailing brace", body: `{"version":"0"}}`, err: messages.ErrMalformed},
		{name: "version of wrong type", body: `{"version":0}`, err: messages.ErrMalformed},
		{name: "empty object", body: `{}`, kind: messages.KindNoOp},
		{name: "unknown source", body: `{"version":"0","source":"aws.s3","detail-type":"Object Created","detail":{"bucket":{}}}`, kind: messages.KindNoOp},
		{name: "unknown ec2 detail-type", body: `{"version":"0","source":"aws.ec2","detail-type":"EBS Volume Notification","detail":{}}`, kind: messages.KindNoOp},
		{name: "detail-type from another source", body: `{"version":"0","source":"custom.app","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-0abc"}}`, kind: messages.KindNoOp},
		{name: "another envelope version", body: `{"version":"1","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-0abc"}}`, kind: messages.KindNoOp},
		{name: "spot", body: spotPrefix + `"detail":{"instance-id":"i-0abc","instance-action":"stop"}}`, kind: messages.KindSpotInterrupted, ids: []string{"i-0abc"}},
		{name: "spot without detail", body: spotPrefix + `"resources":[]}`, err: messages.ErrMissingInstanceID},
		{name: "spot with null detail", body: spotPrefix + `"detail":null}`, err: messages.ErrMissingInstanceID},
		{name: "spot with empty instance id", body: spotPrefix + `"detail":{"instance-id":""}}`, err: messages.ErrMissingInstanceID},
		{name: "spot with a non-instance id", body: spotPrefix + `"detail":{"instance-id":"vol-0abc"}}`, err: messages.ErrMissingInstanceID},
		{name: "spot with an uppercase id", body: spotPrefix + `"detail":{"instance-id":"i-0ABC"}}`, err: messages.ErrMissingInstanceID},
		{name: "spot with a numeric instance id", body: spotPrefix + `"detail":{"instance-id":5}}`, err: messages.ErrMalformed},
		{name: "spot with a string detail", body: spotPrefix + `"detail":"i-0abc"}`, err: messages.ErrMalformed},
		{name: "bad envelope time", body: `{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"yyyy-mm-ddThh:mm:ssZ","detail":{"instance-id":"i-0abc"}}`, err: messages.ErrMalformed},
		{name: "resources of wrong type", body: spotPrefix + `"resources":{"a":1},"detail":{"instance-id":"i-0abc"}}`, err: messages.ErrMalformed},
		{name: "state change without state", body: `{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-0abc"}}`, kind: messages.KindNoOp},
		{name: "state change stopping without id", body: `{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"state":"stopping"}}`, err: messages.ErrMissingInstanceID},
		{name: "rebalance without id", body: `{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","detail":{}}`, err: messages.ErrMissingInstanceID},
		// AWS's documented capacity reservation example gives resources as
		// one string.
		{name: "reservation with string resources", body: crPrefix + `"resources":"arn:aws:ec2:us-east-1:1:instance/i-0abc","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}`, kind: messages.KindCapacityReservationInterrupted, ids: []string{"i-0abc"}},
		{name: "reservation with bad termination time", body: crPrefix + `"detail":{"instance-id":"i-0abc","instance-termination-time":"soon"}}`, err: messages.ErrMalformed},
		{name: "scheduled change deduplicates", body: healthPrefix + `[{"entityValue":"i-0a"},{"entityValue":"i-0b"},{"entityValue":"i-0a"}]}}`, kind: messages.KindScheduledChange, ids: []string{"i-0a", "i-0b"}},
		{name: "scheduled change keeps only instances", body: healthPrefix + `[{"entityValue":"h-0a"},{"entityValue":"i-0b"}]}}`, kind: messages.KindScheduledChange, ids: []string{"i-0b"}},
		{name: "scheduled change without instances", body: healthPrefix + `[{"entityValue":"h-0a"}]}}`, err: messages.ErrMissingInstanceID},
		{name: "scheduled change without entities", body: healthPrefix + `[]}}`, err: messages.ErrMissingInstanceID},
		{name: "scheduled change with bad entities", body: healthPrefix + `"i-0a"}}`, err: messages.ErrMalformed},
		{name: "health issue for EC2", body: `{"version":"0","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[{"entityValue":"i-0a"}]}}`, kind: messages.KindNoOp},
		{name: "health abuse event", body: `{"version":"0","detail-type":"AWS Health Abuse Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange"}}`, kind: messages.KindNoOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := messages.Parse(tt.body)
			if tt.err != nil {
				require.Error(t, err, "parsed as %#v", msg)
				assert.Nil(t, msg)
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.kind, msg.Kind())
			assert.Equal(t, tt.ids, msg.EC2InstanceIDs())
		})
	}
}

func TestParseReservationID(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"from detail", crPrefix + `"resources":["arn:aws:ec2:us-east-1:1:capacity-reservation/cr-0bbb"],"detail":{"instance-id":"i-0abc","capacity-reservation-id":"cr-0aaa"}}`, "cr-0aaa"},
		{"from resources", crPrefix + `"resources":["arn:aws:ec2:us-east-1:1:instance/i-0abc","arn:aws:ec2:us-east-1:1:capacity-reservation/cr-0bbb"],"detail":{"instance-id":"i-0abc"}}`, "cr-0bbb"},
		{"absent, as in AWS's example", crPrefix + `"resources":"arn:aws:ec2:us-east-1:1:instance/i-0abc","detail":{"instance-id":"i-0abc"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := messages.Parse(tt.body)
			require.NoError(t, err)
			assert.Equal(t, tt.want, msg.(messages.CapacityReservationInterruption).CapacityReservationID)
		})
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := messages.Parse(readTestdata(t, "spot_missing_instance_id.json"))
	require.Error(t, err)
	assert.Equal(t, `parsing interruption message (source "aws.ec2", detail-type "EC2 Spot Instance Interruption Warning"): missing instance id`, err.Error())
	_, err = messages.Parse("abcd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "parsing interruption message: malformed message: not a JSON object")
}

func TestKinds(t *testing.T) {
	for _, k := range messages.Kinds {
		assert.True(t, k.Known(), k)
		assert.Equal(t, k != messages.KindNoOp, k.NeedsInstanceIDs(), k)
	}
	assert.False(t, messages.Kind("parse_error").Known())
	assert.False(t, messages.Kind("").NeedsInstanceIDs())
}

func BenchmarkParse(b *testing.B) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(b, err)
	var bodies []string
	var size int64
	for _, f := range files {
		body := readTestdata(b, filepath.Base(f))
		bodies = append(bodies, body)
		size += int64(len(body))
	}
	b.SetBytes(size / int64(len(bodies)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = messages.Parse(bodies[i%len(bodies)])
		i++
	}
}
