package awslocal

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Instance and system status values of DescribeInstanceStatus.
const (
	StatusOK               = "ok"
	StatusImpaired         = "impaired"
	StatusInsufficientData = "insufficient-data"
	StatusInitializing     = "initializing"
	StatusNotApplicable    = "not-applicable"
)

var statusValues = []string{StatusOK, StatusImpaired, StatusInsufficientData, StatusInitializing, StatusNotApplicable}

// EventCodes are the scheduled event codes EC2 reports.
var EventCodes = []string{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}

// InstanceEvent is a scheduled event of an instance.
type InstanceEvent struct {
	ID          string     `json:"id,omitempty"`
	Code        string     `json:"code"`
	Description string     `json:"description,omitempty"`
	NotBefore   time.Time  `json:"notBefore,omitempty"`
	NotAfter    *time.Time `json:"notAfter,omitempty"`
}

type health struct {
	instance, system string
	since            time.Time
	events           []InstanceEvent
}

// SetInstanceStatus sets the instance and system status DescribeInstanceStatus
// reports for a running instance ("" leaves one as it is; the default is
// ok). An impaired status fails its reachability check.
func (l *Local) SetInstanceStatus(instanceID, instanceStatus, systemStatus string) error {
	for _, v := range []string{instanceStatus, systemStatus} {
		if v != "" && !slices.Contains(statusValues, v) {
			return fmt.Errorf("status %q: want one of %s", v, strings.Join(statusValues, ", "))
		}
	}
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.healthOf(instanceID)
	if instanceStatus != "" {
		h.instance = instanceStatus
	}
	if systemStatus != "" {
		h.system = systemStatus
	}
	h.since = time.Now().UTC().Truncate(time.Second)
	return nil
}

func (s *ec2State) healthOf(id string) *health {
	h := s.health[id]
	if h == nil {
		h = &health{instance: StatusOK, system: StatusOK}
		s.health[id] = h
	}
	return h
}

// AddInstanceEvent schedules an event for an instance. NotBefore defaults
// to a day from now; the description defaults to EC2's wording.
func (l *Local) AddInstanceEvent(instanceID string, ev InstanceEvent) (InstanceEvent, error) {
	if !slices.Contains(EventCodes, ev.Code) {
		return InstanceEvent{}, fmt.Errorf("event code %q: want one of %s", ev.Code, strings.Join(EventCodes, ", "))
	}
	if ev.NotBefore.IsZero() {
		ev.NotBefore = time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	}
	if ev.Description == "" {
		ev.Description = map[string]string{
			"instance-reboot":     "The instance is scheduled for a reboot",
			"system-reboot":       "The instance is scheduled for a reboot",
			"system-maintenance":  "The instance is scheduled for maintenance",
			"instance-retirement": "The instance is running on degraded hardware",
			"instance-stop":       "The instance is scheduled to be stopped",
		}[ev.Code]
	}
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextEvent++
	ev.ID = fmt.Sprintf("instance-event-%017x", s.nextEvent)
	h := s.healthOf(instanceID)
	h.events = append(h.events, ev)
	return ev, nil
}

// ClearInstanceStatus drops an instance's impairments and events ("" for
// every instance).
func (l *Local) ClearInstanceStatus(instanceID string) {
	s := l.front.ec2
	s.mu.Lock()
	defer s.mu.Unlock()
	if instanceID == "" {
		s.health = map[string]*health{}
		return
	}
	delete(s.health, instanceID)
}

var statusFilters = []string{"availability-zone", "instance-state-name", "instance-state-code", "instance-status.status",
	"system-status.status", "instance-status.reachability", "system-status.reachability", "event.code"}

type statusRow struct {
	id, zone, zoneID, state, code string
	instance, system              string
	since                         time.Time
	events                        []InstanceEvent
}

// describeInstanceStatus answers from moto's instances and the front's
// health table: running instances are ok unless impaired through the
// control API; others are not-applicable (with IncludeAllInstances).
func (f *front) describeInstanceStatus(ctx context.Context, w http.ResponseWriter, c *call) bool {
	filters := ec2Filters(c.Form)
	for name := range filters {
		if !slices.Contains(statusFilters, name) {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", name))
			return true
		}
	}
	ids := ec2List(c.Form, "InstanceId")
	size := 1000
	if m := c.Form.Get("MaxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 5 || n > 1000 {
			writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Value ( %s ) for parameter maxResults is invalid. Parameter must be between 5 and 1000.", m))
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
	form := ec2Form("DescribeInstances")
	for i, id := range ids {
		form.Set(fmt.Sprintf("InstanceId.%d", i+1), id)
	}
	status, body, err := f.motoRaw(ctx, c.Region, form)
	if err != nil {
		writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
		return true
	}
	if status != http.StatusOK {
		code, msg := ec2ErrorOf(body)
		if code == "" {
			return false
		}
		writeError(w, c, http.StatusBadRequest, code, msg)
		return true
	}
	doc, err := parseXML(body)
	if err != nil {
		writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
		return true
	}
	zones, _ := f.regionZones(ctx, c.Region)
	all := c.Form.Get("IncludeAllInstances") == "true"
	var rows []statusRow
	s := f.ec2
	s.mu.Lock()
	for _, r := range doc.items("reservationSet") {
		for _, inst := range r.items("instancesSet") {
			row := statusRow{id: inst.text("instanceId"), zone: inst.text("placement", "availabilityZone"),
				state: inst.text("instanceState", "name"), code: inst.text("instanceState", "code"), instance: StatusOK, system: StatusOK}
			for _, z := range zones {
				if z.Name == row.zone {
					row.zoneID = z.ID
				}
			}
			if row.state != "running" {
				if !all {
					continue
				}
				row.instance, row.system = StatusNotApplicable, StatusNotApplicable
			} else if h := s.health[row.id]; h != nil {
				row.instance, row.system, row.since = h.instance, h.system, h.since
			}
			if h := s.health[row.id]; h != nil && row.state != "terminated" {
				row.events = append(row.events, h.events...)
			}
			if statusMatches(row, filters) {
				rows = append(rows, row)
			}
		}
	}
	s.mu.Unlock()

	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<DescribeInstanceStatusResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>` + newRequestID() + `</requestId><instanceStatusSet>`)
	end := min(start+size, len(rows))
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	for _, r := range rows[min(start, len(rows)):end] {
		fmt.Fprintf(&b, "<item><instanceId>%s</instanceId><availabilityZone>%s</availabilityZone><availabilityZoneId>%s</availabilityZoneId>"+
			"<instanceState><code>%s</code><name>%s</name></instanceState>", r.id, r.zone, r.zoneID, r.code, r.state)
		for _, part := range []struct{ name, status string }{{"systemStatus", r.system}, {"instanceStatus", r.instance}} {
			b.WriteString("<" + part.name + "><status>" + part.status + "</status>")
			if part.status != StatusNotApplicable {
				reach := map[string]string{StatusOK: "passed", StatusImpaired: "failed", StatusInitializing: "initializing"}[part.status]
				if reach == "" {
					reach = StatusInsufficientData
				}
				b.WriteString("<details><item><name>reachability</name><status>" + reach + "</status>")
				if part.status == StatusImpaired && !r.since.IsZero() {
					b.WriteString("<impairedSince>" + ts(r.since) + "</impairedSince>")
				}
				b.WriteString("</item></details>")
			}
			b.WriteString("</" + part.name + ">")
		}
		if len(r.events) > 0 {
			b.WriteString("<eventsSet>")
			for _, e := range r.events {
				fmt.Fprintf(&b, "<item><instanceEventId>%s</instanceEventId><code>%s</code><description>%s</description><notBefore>%s</notBefore>",
					e.ID, e.Code, xmlText(e.Description), ts(e.NotBefore))
				if e.NotAfter != nil {
					b.WriteString("<notAfter>" + ts(*e.NotAfter) + "</notAfter>")
				}
				b.WriteString("</item>")
			}
			b.WriteString("</eventsSet>")
		}
		b.WriteString("</item>")
	}
	b.WriteString("</instanceStatusSet>")
	if end < len(rows) {
		b.WriteString("<nextToken>" + encodeToken(end, c.Action) + "</nextToken>")
	}
	b.WriteString("</DescribeInstanceStatusResponse>")
	writeXML(w, []byte(b.String()))
	return true
}

func statusMatches(r statusRow, filters map[string][]string) bool {
	reach := func(status string) string {
		switch status {
		case StatusOK:
			return "passed"
		case StatusImpaired:
			return "failed"
		default:
			return status
		}
	}
	for name, values := range filters {
		var v []string
		switch name {
		case "availability-zone":
			v = []string{r.zone}
		case "instance-state-name":
			v = []string{r.state}
		case "instance-state-code":
			v = []string{r.code}
		case "instance-status.status":
			v = []string{r.instance}
		case "system-status.status":
			v = []string{r.system}
		case "instance-status.reachability":
			v = []string{reach(r.instance)}
		case "system-status.reachability":
			v = []string{reach(r.system)}
		case "event.code":
			for _, e := range r.events {
				v = append(v, e.Code)
			}
		}
		if !slices.ContainsFunc(v, func(s string) bool { return allowed(values, s) }) {
			return false
		}
	}
	return true
}
