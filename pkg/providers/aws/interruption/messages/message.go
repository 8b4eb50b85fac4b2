package messages

import (
	"time"
)

// Kind names a message type. The values are upstream's, so they appear
// unchanged in the message_type label and in logs (messageKind).
type Kind string

const (
	KindSpotInterrupted                Kind = "spot_interrupted"
	KindRebalanceRecommendation        Kind = "rebalance_recommendation"
	KindScheduledChange                Kind = "scheduled_change"
	KindInstanceStopped                Kind = "instance_stopped"
	KindInstanceTerminated             Kind = "instance_terminated"
	KindCapacityReservationInterrupted Kind = "capacity_reservation_interrupted"
	// KindNoOp is every event nobody acts on: unknown sources or
	// detail-types, state changes to pending/running, Health events that
	// are not EC2 scheduled changes. They are counted and deleted.
	KindNoOp Kind = "no_op"
)

// Kinds lists every kind Parse can return, actionable ones first.
var Kinds = []Kind{
	KindSpotInterrupted, KindRebalanceRecommendation, KindScheduledChange, KindInstanceStopped,
	KindInstanceTerminated, KindCapacityReservationInterrupted, KindNoOp,
}

// NeedsInstanceIDs reports whether a message of kind k always names at least
// one instance: every kind but KindNoOp does, since its only use is to find
// the NodeClaim to act on.
func (k Kind) NeedsInstanceIDs() bool { return k != KindNoOp && k.Known() }

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// Message is one parsed queue message.
type Message interface {
	// Kind says what happened and so what the controller does.
	Kind() Kind
	// EC2InstanceIDs are the instances the message is about; empty only for
	// KindNoOp.
	EC2InstanceIDs() []string
	// StartTime is when EventBridge emitted the event (the envelope's time).
	StartTime() time.Time
}

// Metadata is the EventBridge envelope every message carries.
type Metadata struct {
	Version    string
	ID         string
	DetailType string
	Source     string
	Account    string
	Time       time.Time
	Region     string
	Resources  []string
}

// StartTime is the envelope's time.
func (m Metadata) StartTime() time.Time { return m.Time }

// SpotInterruption is "EC2 Spot Instance Interruption Warning": EC2 reclaims
// the spot instance in two minutes.
type SpotInterruption struct {
	Metadata
	InstanceID string
	// InstanceAction is what EC2 will do: terminate, stop or hibernate.
	InstanceAction string
}

func (SpotInterruption) Kind() Kind                 { return KindSpotInterrupted }
func (m SpotInterruption) EC2InstanceIDs() []string { return []string{m.InstanceID} }

// RebalanceRecommendation is "EC2 Instance Rebalance Recommendation": the
// spot instance is at elevated risk of interruption.
type RebalanceRecommendation struct {
	Metadata
	InstanceID string
}

func (RebalanceRecommendation) Kind() Kind                 { return KindRebalanceRecommendation }
func (m RebalanceRecommendation) EC2InstanceIDs() []string { return []string{m.InstanceID} }

// EC2 instance states a state-change notification can carry.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

// StateChange is an "EC2 Instance State-change Notification" for a state
// that ends the node: stopping/stopped (KindInstanceStopped) or
// shutting-down/terminated (KindInstanceTerminated). Other states parse as
// NoOp.
type StateChange struct {
	Metadata
	InstanceID string
	State      string
}

func (m StateChange) Kind() Kind {
	switch m.State {
	case StateStopping, StateStopped:
		return KindInstanceStopped
	case StateShuttingDown, StateTerminated:
		return KindInstanceTerminated
	}
	return KindNoOp
}
func (m StateChange) EC2InstanceIDs() []string { return []string{m.InstanceID} }

// CapacityReservationInterruption is "EC2 Capacity Reservation Instance
// Interruption Warning": the owner of an interruptible capacity reservation
// reclaims it and the instance is terminated in two minutes.
type CapacityReservationInterruption struct {
	Metadata
	InstanceID string
	// CapacityReservationID is the reservation being reclaimed when the event
	// names it (a capacity-reservation-id in detail or a capacity-reservation
	// ARN in resources). AWS's documented event carries neither, so it may
	// be empty: the controller then reads the reservation from the
	// NodeClaim's capacity-reservation-id label.
	CapacityReservationID string
	InstanceAction        string
	// TerminationTime is detail.instance-termination-time, zero if absent.
	TerminationTime time.Time
	// AvailabilityZoneID is detail.azId (a zone ID such as use1-az4).
	AvailabilityZoneID string
}

func (CapacityReservationInterruption) Kind() Kind { return KindCapacityReservationInterrupted }
func (m CapacityReservationInterruption) EC2InstanceIDs() []string {
	return []string{m.InstanceID}
}

// ScheduledChange is an "AWS Health Event" for service EC2 in category
// scheduledChange (instance retirement, maintenance reboots, ...): every
// affected instance should be drained before the change starts.
type ScheduledChange struct {
	Metadata
	EventARN      string
	EventTypeCode string
	// InstanceIDs are the affected entities that are instances, deduplicated,
	// in message order.
	InstanceIDs []string
}

func (ScheduledChange) Kind() Kind                 { return KindScheduledChange }
func (m ScheduledChange) EC2InstanceIDs() []string { return append([]string(nil), m.InstanceIDs...) }

// NoOp is a well-formed event nobody acts on.
type NoOp struct {
	Metadata
}

func (NoOp) Kind() Kind               { return KindNoOp }
func (NoOp) EC2InstanceIDs() []string { return nil }

// Compile-time proofs that every message type is a Message.
var (
	_ Message = SpotInterruption{}
	_ Message = RebalanceRecommendation{}
	_ Message = StateChange{}
	_ Message = CapacityReservationInterruption{}
	_ Message = ScheduledChange{}
	_ Message = NoOp{}
)
