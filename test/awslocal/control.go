package awslocal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// controlPrefix is where the control API lives on the front. No AWS API
// uses this path, so it cannot shadow a real call.
const controlPrefix = "/_awslocal/"

type callCount struct {
	Service string `json:"service"`
	Action  string `json:"action"`
	Count   int    `json:"count"`
}

type spotPriceBody struct {
	Region       string  `json:"region,omitempty"`
	Zone         string  `json:"zone"`
	InstanceType string  `json:"instanceType"`
	Price        float64 `json:"price"`
}

// control serves the HTTP+JSON control API (docs/awslocal.md):
//
//	GET    /_awslocal/faults                  active faults
//	POST   /_awslocal/faults                  add a Fault
//	DELETE /_awslocal/faults?service=&action= clear faults
//	GET    /_awslocal/calls                   requests seen per service and action
//	GET    /_awslocal/spot-prices?region=&zone=&instanceType=
//	PUT    /_awslocal/spot-prices             override one spot price
//	DELETE /_awslocal/spot-prices             drop the overrides
//	GET    /_awslocal/images                  every published image
//	POST   /_awslocal/images/publish          publish a newer release of a Series
//	POST   /_awslocal/interruptions           put an EventBridge event on a queue
func (f *front) control(w http.ResponseWriter, r *http.Request) {
	l := &Local{front: f}
	route := r.Method + " " + strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, controlPrefix), "/")
	q := r.URL.Query()
	switch route {
	case "GET faults":
		reply(w, http.StatusOK, l.Faults())
	case "POST faults":
		var in Fault
		if !decode(w, r, &in) {
			return
		}
		out, err := l.AddFault(in)
		if err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		reply(w, http.StatusCreated, out)
	case "DELETE faults":
		reply(w, http.StatusOK, map[string]int{"cleared": l.ClearFaults(q.Get("service"), q.Get("action"))})
	case "GET calls":
		f.callsMu.Lock()
		out := make([]callCount, 0, len(f.calls))
		for k, n := range f.calls {
			out = append(out, callCount{k.Service, k.Action, n})
		}
		f.callsMu.Unlock()
		sort.Slice(out, func(i, j int) bool {
			if out[i].Service != out[j].Service {
				return out[i].Service < out[j].Service
			}
			return out[i].Action < out[j].Action
		})
		reply(w, http.StatusOK, out)
	case "GET spot-prices":
		region := q.Get("region")
		if region == "" {
			region = DefaultRegion
		}
		p, ok := l.SpotPrice(region, q.Get("zone"), q.Get("instanceType"))
		if !ok {
			reply(w, http.StatusNotFound, map[string]string{"error": "no price for " + q.Get("instanceType")})
			return
		}
		reply(w, http.StatusOK, spotPriceBody{Region: region, Zone: q.Get("zone"), InstanceType: q.Get("instanceType"), Price: p})
	case "PUT spot-prices", "POST spot-prices":
		var in spotPriceBody
		if !decode(w, r, &in) {
			return
		}
		if in.Zone == "" || in.InstanceType == "" {
			reply(w, http.StatusBadRequest, map[string]string{"error": "zone and instanceType are required"})
			return
		}
		if err := l.SetSpotPrice(in.Zone, in.InstanceType, in.Price); err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		reply(w, http.StatusOK, in)
	case "DELETE spot-prices":
		l.ClearSpotPrices()
		reply(w, http.StatusOK, map[string]string{})
	case "GET images":
		reply(w, http.StatusOK, l.Images())
	case "POST images/publish":
		var in Series
		if !decode(w, r, &in) {
			return
		}
		img, err := l.PublishImage(r.Context(), in)
		if err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		reply(w, http.StatusCreated, img)
	case "POST interruptions":
		var in Interruption
		if !decode(w, r, &in) {
			return
		}
		id, err := l.SendInterruption(r.Context(), in)
		if err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		reply(w, http.StatusCreated, map[string]string{"messageId": id})
	default:
		if f.controlEC2(w, r, route) || f.controlARC(w, r, route) {
			return
		}
		reply(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no control %s %s", r.Method, r.URL.Path)})
	}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "decoding request: " + err.Error()})
		return false
	}
	return true
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
