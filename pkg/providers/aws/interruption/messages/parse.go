package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// EventBridge sources and detail-types Parse understands.
const (
	SourceEC2    = "aws.ec2"
	SourceHealth = "aws.health"

	DetailTypeSpotInterruption                = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalanceRecommendation         = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange                     = "EC2 Instance State-change Notification"
	DetailTypeCapacityReservationInterruption = "EC2 Capacity Reservation Instance Interruption Warning"
	DetailTypeHealthEvent                     = "AWS Health Event"

	// envelopeVersion is the only EventBridge envelope version there is; a
	// different one is a schema Parse does not know, so it is a NoOp rather
	// than a guess.
	envelopeVersion = "0"
	// healthServiceEC2 and healthCategoryScheduledChange select the Health
	// events that concern our instances.
	healthServiceEC2              = "EC2"
	healthCategoryScheduledChange = "scheduledChange"
)

// Sentinel causes of a ParseError, for errors.Is.
var (
	// ErrMalformed: the body is not an EventBridge envelope (not JSON, not an
	// object, a field of the wrong type, an unparseable time).
	ErrMalformed = errors.New("malformed message")
	// ErrMissingInstanceID: a message kind that acts on instances names none.
	ErrMissingInstanceID = errors.New("missing instance id")
)

// ParseError says why a body could not become a Message. The receiver
// deletes such messages (they will never parse) and counts them.
type ParseError struct {
	// Source and DetailType are the envelope's, when it got that far.
	Source     string
	DetailType string
	// Err is ErrMalformed or ErrMissingInstanceID, possibly wrapping the
	// decoder's error.
	Err error
}

func (e *ParseError) Error() string {
	if e.DetailType == "" && e.Source == "" {
		return fmt.Sprintf("parsing interruption message: %v", e.Err)
	}
	return fmt.Sprintf("parsing interruption message (source %q, detail-type %q): %v", e.Source, e.DetailType, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// envelope is the wire form of an EventBridge event. Fields stay strings and
// raw JSON so that a wrong type in one detail field is an ErrMalformed with
// context rather than a half-filled struct.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  json.RawMessage `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type ec2Detail struct {
	InstanceID              string `json:"instance-id"`
	InstanceAction          string `json:"instance-action"`
	State                   string `json:"state"`
	CapacityReservationID   string `json:"capacity-reservation-id"`
	InstanceTerminationTime string `json:"instance-termination-time"`
	AZID                    string `json:"azId"`
}

type healthDetail struct {
	EventARN          string `json:"eventArn"`
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Parse turns an SQS message body into a Message. Unknown but well-formed
// events are a NoOp; anything else that cannot be acted on is a *ParseError.
// Parse never panics and keeps no state, so it is safe for concurrent use.
func Parse(body string) (Message, error) {
	var env envelope
	if err := decode([]byte(body), &env); err != nil {
		return nil, &ParseError{Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
	}
	md, err := env.metadata()
	if err != nil {
		return nil, &ParseError{Source: env.Source, DetailType: env.DetailType, Err: err}
	}
	msg, err := parseDetail(md, env.Detail)
	if err != nil {
		return nil, &ParseError{Source: env.Source, DetailType: env.DetailType, Err: err}
	}
	return msg, nil
}

func parseDetail(md Metadata, detail json.RawMessage) (Message, error) {
	if md.Version != envelopeVersion {
		return NoOp{Metadata: md}, nil
	}
	switch md.Source {
	case SourceEC2:
		switch md.DetailType {
		case DetailTypeSpotInterruption, DetailTypeRebalanceRecommendation, DetailTypeStateChange,
			DetailTypeCapacityReservationInterruption:
		default:
			return NoOp{Metadata: md}, nil
		}
		var d ec2Detail
		if err := decodeDetail(detail, &d); err != nil {
			return nil, err
		}
		return ec2Message(md, d)
	case SourceHealth:
		if md.DetailType != DetailTypeHealthEvent {
			return NoOp{Metadata: md}, nil
		}
		var d healthDetail
		if err := decodeDetail(detail, &d); err != nil {
			return nil, err
		}
		return healthMessage(md, d)
	}
	return NoOp{Metadata: md}, nil
}

func ec2Message(md Metadata, d ec2Detail) (Message, error) {
	if md.DetailType == DetailTypeStateChange {
		sc := StateChange{Metadata: md, InstanceID: d.InstanceID, State: d.State}
		// A pending or running instance is no news: it need not name an
		// instance to be deleted harmlessly.
		if sc.Kind() == KindNoOp {
			return NoOp{Metadata: md}, nil
		}
		if !isInstanceID(d.InstanceID) {
			return nil, missingInstanceID(d.InstanceID)
		}
		return sc, nil
	}
	if !isInstanceID(d.InstanceID) {
		return nil, missingInstanceID(d.InstanceID)
	}
	switch md.DetailType {
	case DetailTypeSpotInterruption:
		return SpotInterruption{Metadata: md, InstanceID: d.InstanceID, InstanceAction: d.InstanceAction}, nil
	case DetailTypeRebalanceRecommendation:
		return RebalanceRecommendation{Metadata: md, InstanceID: d.InstanceID}, nil
	}
	cr := CapacityReservationInterruption{
		Metadata: md, InstanceID: d.InstanceID, InstanceAction: d.InstanceAction, AvailabilityZoneID: d.AZID,
		CapacityReservationID: d.CapacityReservationID,
	}
	if cr.CapacityReservationID == "" {
		cr.CapacityReservationID = reservationFromResources(md.Resources)
	}
	if d.InstanceTerminationTime != "" {
		t, err := time.Parse(time.RFC3339, d.InstanceTerminationTime)
		if err != nil {
			return nil, fmt.Errorf("%w: instance-termination-time: %v", ErrMalformed, err)
		}
		cr.TerminationTime = t
	}
	return cr, nil
}

func healthMessage(md Metadata, d healthDetail) (Message, error) {
	if d.Service != healthServiceEC2 || d.EventTypeCategory != healthCategoryScheduledChange {
		return NoOp{Metadata: md}, nil
	}
	sc := ScheduledChange{Metadata: md, EventARN: d.EventARN, EventTypeCode: d.EventTypeCode}
	seen := map[string]bool{}
	for _, e := range d.AffectedEntities {
		// EC2 scheduled changes can also name hosts or volumes; only
		// instances map to NodeClaims.
		if isInstanceID(e.EntityValue) && !seen[e.EntityValue] {
			seen[e.EntityValue] = true
			sc.InstanceIDs = append(sc.InstanceIDs, e.EntityValue)
		}
	}
	if len(sc.InstanceIDs) == 0 {
		return nil, fmt.Errorf("%w: no instance among %d affected entities", ErrMissingInstanceID, len(d.AffectedEntities))
	}
	return sc, nil
}

func (e envelope) metadata() (Metadata, error) {
	md := Metadata{
		Version: e.Version, ID: e.ID, DetailType: e.DetailType, Source: e.Source, Account: e.Account, Region: e.Region,
	}
	if e.Time != "" {
		t, err := time.Parse(time.RFC3339, e.Time)
		if err != nil {
			return md, fmt.Errorf("%w: time: %v", ErrMalformed, err)
		}
		md.Time = t
	}
	// resources is a list of ARNs, but AWS's own capacity reservation example
	// shows a single string; accept both rather than drop the event.
	if len(e.Resources) > 0 && !isNull(e.Resources) {
		if e.Resources[0] == '"' {
			var one string
			if err := json.Unmarshal(e.Resources, &one); err != nil {
				return md, fmt.Errorf("%w: resources: %v", ErrMalformed, err)
			}
			md.Resources = []string{one}
		} else if err := json.Unmarshal(e.Resources, &md.Resources); err != nil {
			return md, fmt.Errorf("%w: resources: %v", ErrMalformed, err)
		}
	}
	return md, nil
}

// decode unmarshals one JSON object and nothing after it.
func decode(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.InputOffset() != int64(len(b)) {
		return errors.New("data after the JSON object")
	}
	return nil
}

func decodeDetail(detail json.RawMessage, v any) error {
	if len(detail) == 0 || isNull(detail) {
		return fmt.Errorf("%w: no detail", ErrMissingInstanceID)
	}
	if err := decode(detail, v); err != nil {
		return fmt.Errorf("%w: detail: %v", ErrMalformed, err)
	}
	return nil
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

// isInstanceID accepts EC2's instance id shape, i- followed by hex; anything
// else could never match a NodeClaim's provider ID.
func isInstanceID(s string) bool {
	if len(s) < 3 || !strings.HasPrefix(s, "i-") {
		return false
	}
	for _, c := range s[2:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func missingInstanceID(got string) error {
	if got == "" {
		return ErrMissingInstanceID
	}
	return fmt.Errorf("%w: %q is not an instance id", ErrMissingInstanceID, got)
}

// reservationFromResources finds a capacity reservation ARN
// (arn:aws:ec2:<region>:<account>:capacity-reservation/cr-...) among the
// envelope's resources.
func reservationFromResources(resources []string) string {
	for _, r := range resources {
		if i := strings.LastIndex(r, ":capacity-reservation/"); i >= 0 {
			if id := r[i+len(":capacity-reservation/"):]; strings.HasPrefix(id, "cr-") {
				return id
			}
		}
	}
	return ""
}
