package awslocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Reservation types and states DescribeCapacityReservations reports.
const (
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"

	ReservationStateActive    = "active"
	ReservationStateExpired   = "expired"
	ReservationStateCancelled = "cancelled"
	ReservationStatePending   = "pending"
	ReservationStateFailed    = "failed"
	ReservationStateScheduled = "scheduled"
)

var reservationStates = []string{ReservationStateActive, ReservationStateExpired, ReservationStateCancelled, ReservationStatePending,
	ReservationStateFailed, ReservationStateScheduled, "payment-pending", "payment-failed", "assessing", "delayed", "unsupported"}

// accountID is moto's default account, which owns everything it creates.
const accountID = "123456789012"

// CapacityReservation is an EC2 capacity reservation the front serves.
// AvailableInstanceCount is computed: TotalInstanceCount less the running
// instances CreateFleet launched into it.
type CapacityReservation struct {
	ID                     string            `json:"id,omitempty"`
	Region                 string            `json:"region,omitempty"`
	InstanceType           string            `json:"instanceType"`
	AvailabilityZone       string            `json:"availabilityZone"`
	InstancePlatform       string            `json:"instancePlatform,omitempty"`
	Tenancy                string            `json:"tenancy,omitempty"`
	TotalInstanceCount     int               `json:"totalInstanceCount"`
	AvailableInstanceCount int               `json:"availableInstanceCount"`
	State                  string            `json:"state,omitempty"`
	ReservationType        string            `json:"reservationType,omitempty"`
	InstanceMatchCriteria  string            `json:"instanceMatchCriteria,omitempty"`
	StartDate              time.Time         `json:"startDate,omitempty"`
	EndDate                *time.Time        `json:"endDate,omitempty"`
	OwnerID                string            `json:"ownerId,omitempty"`
	Tags                   map[string]string `json:"tags,omitempty"`
	// Interruptible reservations may be reclaimed by their owner (EC2's
	// interruptible ODCRs).
	Interruptible bool `json:"interruptible,omitempty"`
	// InstanceIDs are the instances running in the reservation.
	InstanceIDs []string `json:"instanceIds,omitempty"`
}

type reservation struct {
	CapacityReservation
	used map[string]bool
}

func (r *reservation) available() int { return max(r.TotalInstanceCount-len(r.used), 0) }

func (r *reservation) snapshot() CapacityReservation {
	out := r.CapacityReservation
	out.AvailableInstanceCount = r.available()
	out.InstanceIDs = nil
	for id := range r.used {
		out.InstanceIDs = append(out.InstanceIDs, id)
	}
	sort.Strings(out.InstanceIDs)
	out.Tags = map[string]string{}
	for k, v := range r.Tags {
		out.Tags[k] = v
	}
	return out
}

// AddCapacityReservation creates a reservation (an id is assigned when
// empty). Defaults: region us-east-1, Linux/UNIX, default tenancy, state
// active, type default, match criteria targeted, starting now; a capacity
// block without EndDate ends in 24 hours.
func (l *Local) AddCapacityReservation(r CapacityReservation) (CapacityReservation, error) {
	if r.InstanceType == "" || r.AvailabilityZone == "" {
		return CapacityReservation{}, fmt.Errorf("a capacity reservation needs instanceType and availabilityZone")
	}
	if r.TotalInstanceCount < 0 {
		return CapacityReservation{}, fmt.Errorf("totalInstanceCount %d is negative", r.TotalInstanceCount)
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&r.Region, DefaultRegion)
	def(&r.InstancePlatform, "Linux/UNIX")
	def(&r.Tenancy, "default")
	def(&r.State, ReservationStateActive)
	def(&r.ReservationType, ReservationTypeDefault)
	def(&r.InstanceMatchCriteria, "targeted")
	def(&r.OwnerID, accountID)
	if r.ID == "" {
		b := make([]byte, 9)
		_, _ = rand.Read(b)
		r.ID = "cr-" + hex.EncodeToString(b)[:17]
	}
	if !slices.Contains(reservationStates, r.State) {
		return CapacityReservation{}, fmt.Errorf("capacity reservation state %q: want one of %s", r.State, strings.Join(reservationStates, ", "))
	}
	if r.ReservationType != ReservationTypeDefault && r.ReservationType != ReservationTypeCapacityBlock {
		return CapacityReservation{}, fmt.Errorf("reservation type %q: want default or capacity-block", r.ReservationType)
	}
	if r.StartDate.IsZero() {
		r.StartDate = time.Now().UTC().Truncate(time.Second)
	}
	if r.ReservationType == ReservationTypeCapacityBlock && r.EndDate == nil {
		end := r.StartDate.Add(24 * time.Hour)
		r.EndDate = &end
	}
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.reservations[r.ID]; dup {
		return CapacityReservation{}, fmt.Errorf("capacity reservation %s exists", r.ID)
	}
	res := &reservation{CapacityReservation: r, used: map[string]bool{}}
	res.Tags = map[string]string{}
	for k, v := range r.Tags {
		res.Tags[k] = v
	}
	s.reservations[r.ID] = res
	s.resOrder = append(s.resOrder, r.ID)
	return res.snapshot(), nil
}

// SetCapacityReservationState moves a reservation to state (expired,
// cancelled, ...); only active reservations take launches.
func (l *Local) SetCapacityReservationState(id, state string) error {
	if !slices.Contains(reservationStates, state) {
		return fmt.Errorf("capacity reservation state %q: want one of %s", state, strings.Join(reservationStates, ", "))
	}
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reservations[id]
	if !ok {
		return fmt.Errorf("no capacity reservation %s", id)
	}
	r.State = state
	return nil
}

// CapacityReservationByID is the reservation as DescribeCapacityReservations
// would report it.
func (l *Local) CapacityReservationByID(id string) (CapacityReservation, bool) {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reservations[id]
	if !ok {
		return CapacityReservation{}, false
	}
	return r.snapshot(), true
}

// CapacityReservations lists every reservation in creation order.
func (l *Local) CapacityReservations() []CapacityReservation {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CapacityReservation, 0, len(s.resOrder))
	for _, id := range s.resOrder {
		out = append(out, s.reservations[id].snapshot())
	}
	return out
}

// RemoveCapacityReservation deletes a reservation; it reports whether one
// existed.
func (l *Local) RemoveCapacityReservation(id string) bool {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.reservations[id]; !ok {
		return false
	}
	delete(s.reservations, id)
	s.resOrder = slices.DeleteFunc(s.resOrder, func(v string) bool { return v == id })
	return true
}

// checkReservation is whether a launch of the type in zone may target the
// reservation; code is EC2's error when not.
func (f *front) checkReservation(region, id, instanceType, zone string) (*reservation, string, string) {
	s := f.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reservations[id]
	if !ok || r.Region != region {
		return nil, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id)
	}
	if r.State != ReservationStateActive {
		return nil, "InvalidCapacityReservationId.Malformed", fmt.Sprintf("The Capacity Reservation %s is not active (state %s).", id, r.State)
	}
	if r.InstanceType != instanceType || r.AvailabilityZone != zone {
		return nil, "InvalidParameterValue", fmt.Sprintf("The instance type %s in %s does not match the attributes of Capacity Reservation %s (%s in %s).",
			instanceType, zone, id, r.InstanceType, r.AvailabilityZone)
	}
	return r, "", ""
}

var reservationFilters = []string{"instance-type", "owner-id", "availability-zone", "instance-platform", "tenancy", "state",
	"end-date-type", "instance-match-criteria", "reservation-type", "tag-key", "capacity-reservation-id"}

// describeCapacityReservations serves the reservations the control API set,
// selected by id and filters and paged as EC2 does.
func (f *front) describeCapacityReservations(ctx context.Context, w http.ResponseWriter, c *call) bool {
	filters := ec2Filters(c.Form)
	for name := range filters {
		if !slices.Contains(reservationFilters, name) && !strings.HasPrefix(name, "tag:") {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name))
			return true
		}
	}
	ids := ec2List(c.Form, "CapacityReservationId")
	size := 1000
	if m := c.Form.Get("MaxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", "MaxResults must be between 1 and 1000.")
			return true
		}
		size = n
	}
	start := 0
	if tok := c.Form.Get("NextToken"); tok != "" {
		var err error
		if start, err = decodeToken(tok, c.Action); err != nil {
			writeError(w, c, http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid.")
			return true
		}
	}
	s := f.ec2
	s.mu.Lock()
	var all []CapacityReservation
	for _, id := range s.resOrder {
		if r := s.reservations[id]; r.Region == c.Region {
			all = append(all, r.snapshot())
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		if !slices.ContainsFunc(all, func(r CapacityReservation) bool { return r.ID == id }) {
			writeError(w, c, http.StatusBadRequest, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id))
			return true
		}
	}
	var match []CapacityReservation
	for _, r := range all {
		if len(ids) > 0 && !slices.Contains(ids, r.ID) {
			continue
		}
		if reservationMatches(r, filters) {
			match = append(match, r)
		}
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId><capacityReservationSet>`)
	end := min(start+size, len(match))
	zones, _ := f.regionZones(ctx, c.Region)
	for _, r := range match[min(start, len(match)):end] {
		writeReservation(&b, r, zones)
	}
	b.WriteString("</capacityReservationSet>")
	if end < len(match) {
		b.WriteString("<nextToken>" + encodeToken(end, c.Action) + "</nextToken>")
	}
	b.WriteString("</DescribeCapacityReservationsResponse>")
	writeXML(w, []byte(b.String()))
	return true
}

func endDateType(r CapacityReservation) string {
	if r.EndDate != nil {
		return "limited"
	}
	return "unlimited"
}

func reservationMatches(r CapacityReservation, filters map[string][]string) bool {
	for name, values := range filters {
		var v []string
		switch name {
		case "instance-type":
			v = []string{r.InstanceType}
		case "owner-id":
			v = []string{r.OwnerID}
		case "availability-zone":
			v = []string{r.AvailabilityZone}
		case "instance-platform":
			v = []string{r.InstancePlatform}
		case "tenancy":
			v = []string{r.Tenancy}
		case "state":
			v = []string{r.State}
		case "end-date-type":
			v = []string{endDateType(r)}
		case "instance-match-criteria":
			v = []string{r.InstanceMatchCriteria}
		case "reservation-type":
			v = []string{r.ReservationType}
		case "capacity-reservation-id":
			v = []string{r.ID}
		case "tag-key":
			for k := range r.Tags {
				v = append(v, k)
			}
		default: // tag:<key>
			if tv, ok := r.Tags[strings.TrimPrefix(name, "tag:")]; ok {
				v = []string{tv}
			}
		}
		if !slices.ContainsFunc(v, func(s string) bool { return allowed(values, s) }) {
			return false
		}
	}
	return true
}

func writeReservation(b *strings.Builder, r CapacityReservation, zones []zone) {
	zoneID := ""
	for _, z := range zones {
		if z.Name == r.AvailabilityZone {
			zoneID = z.ID
		}
	}
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	fmt.Fprintf(b, "<item><capacityReservationId>%s</capacityReservationId><ownerId>%s</ownerId>"+
		"<capacityReservationArn>arn:aws:ec2:%s:%s:capacity-reservation/%s</capacityReservationArn>"+
		"<availabilityZoneId>%s</availabilityZoneId><instanceType>%s</instanceType><instancePlatform>%s</instancePlatform>"+
		"<availabilityZone>%s</availabilityZone><tenancy>%s</tenancy><totalInstanceCount>%d</totalInstanceCount>"+
		"<availableInstanceCount>%d</availableInstanceCount><ebsOptimized>true</ebsOptimized><ephemeralStorage>false</ephemeralStorage>"+
		"<state>%s</state><startDate>%s</startDate><endDateType>%s</endDateType>",
		r.ID, r.OwnerID, r.Region, r.OwnerID, r.ID, zoneID, xmlText(r.InstanceType), xmlText(r.InstancePlatform),
		r.AvailabilityZone, r.Tenancy, r.TotalInstanceCount, r.AvailableInstanceCount, r.State, ts(r.StartDate), endDateType(r))
	if r.EndDate != nil {
		b.WriteString("<endDate>" + ts(*r.EndDate) + "</endDate>")
	}
	fmt.Fprintf(b, "<instanceMatchCriteria>%s</instanceMatchCriteria><createDate>%s</createDate><reservationType>%s</reservationType>"+
		"<interruptible>%t</interruptible><tagSet>",
		r.InstanceMatchCriteria, ts(r.StartDate), r.ReservationType, r.Interruptible)
	keys := make([]string, 0, len(r.Tags))
	for k := range r.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("<item><key>" + xmlText(k) + "</key><value>" + xmlText(r.Tags[k]) + "</value></item>")
	}
	b.WriteString("</tagSet></item>")
}
