package awslocal

import (
	"net/http"
	"sort"
)

type capacityBody struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	Count        int    `json:"count"`
}

type reservationStateBody struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

type instanceStatusBody struct {
	InstanceID     string `json:"instanceId"`
	InstanceStatus string `json:"instanceStatus,omitempty"`
	SystemStatus   string `json:"systemStatus,omitempty"`
}

type instanceEventBody struct {
	InstanceID string `json:"instanceId"`
	InstanceEvent
}

// controlEC2 serves the control endpoints of CreateFleet's capacity, the
// capacity reservations and instance status (docs/awslocal.md); false
// when the route is not one of them.
//
//	GET|PUT|DELETE /_awslocal/capacity
//	GET|POST|DELETE /_awslocal/capacity-reservations, PUT /_awslocal/capacity-reservations/state
//	PUT|DELETE /_awslocal/instance-status, POST /_awslocal/instance-events
func (f *front) controlEC2(w http.ResponseWriter, r *http.Request, route string) bool {
	l := &Local{front: f}
	q := r.URL.Query()
	bad := func(err error) { reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()}) }
	switch route {
	case "GET capacity":
		s := f.ec2
		s.mu.Lock()
		out := make([]capacityBody, 0, len(s.capacity))
		for k, n := range s.capacity {
			out = append(out, capacityBody{k.Type, k.Zone, k.CapacityType, n})
		}
		s.mu.Unlock()
		sort.Slice(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if a.InstanceType != b.InstanceType {
				return a.InstanceType < b.InstanceType
			}
			if a.Zone != b.Zone {
				return a.Zone < b.Zone
			}
			return a.CapacityType < b.CapacityType
		})
		reply(w, http.StatusOK, out)
	case "PUT capacity", "POST capacity":
		var in capacityBody
		if !decode(w, r, &in) {
			return true
		}
		if err := l.SetCapacity(in.InstanceType, in.Zone, in.CapacityType, in.Count); err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusOK, in)
	case "DELETE capacity":
		l.ClearCapacity()
		reply(w, http.StatusOK, map[string]string{})
	case "GET capacity-reservations":
		reply(w, http.StatusOK, l.CapacityReservations())
	case "POST capacity-reservations":
		var in CapacityReservation
		if !decode(w, r, &in) {
			return true
		}
		out, err := l.AddCapacityReservation(in)
		if err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusCreated, out)
	case "PUT capacity-reservations/state":
		var in reservationStateBody
		if !decode(w, r, &in) {
			return true
		}
		if err := l.SetCapacityReservationState(in.ID, in.State); err != nil {
			bad(err)
			return true
		}
		out, _ := l.CapacityReservationByID(in.ID)
		reply(w, http.StatusOK, out)
	case "DELETE capacity-reservations":
		reply(w, http.StatusOK, map[string]bool{"removed": l.RemoveCapacityReservation(q.Get("id"))})
	case "PUT instance-status":
		var in instanceStatusBody
		if !decode(w, r, &in) {
			return true
		}
		if err := l.SetInstanceStatus(in.InstanceID, in.InstanceStatus, in.SystemStatus); err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusOK, in)
	case "DELETE instance-status":
		l.ClearInstanceStatus(q.Get("instanceId"))
		reply(w, http.StatusOK, map[string]string{})
	case "POST instance-events":
		var in instanceEventBody
		if !decode(w, r, &in) {
			return true
		}
		ev, err := l.AddInstanceEvent(in.InstanceID, in.InstanceEvent)
		if err != nil {
			bad(err)
			return true
		}
		reply(w, http.StatusCreated, instanceEventBody{in.InstanceID, ev})
	default:
		return false
	}
	return true
}
