package awslocal

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// FaultKind is what an injected fault does to a matching call.
type FaultKind string

const (
	// FaultThrottle answers RequestLimitExceeded (EC2, HTTP 503) or
	// ThrottlingException (the JSON and Query protocols, HTTP 400).
	FaultThrottle FaultKind = "throttle"
	// FaultServerError answers InternalError (EC2) / InternalServerError,
	// HTTP 500, or ServiceUnavailable with Status 503.
	FaultServerError FaultKind = "error"
	// FaultLatency delays the call by Latency and then serves it.
	FaultLatency FaultKind = "latency"
	// FaultLatencyAfter serves the call and then holds its answer back for
	// Latency: the call took effect (an instance launched) while the
	// caller still waits, so a test can kill the caller in that window.
	FaultLatencyAfter FaultKind = "latency-after"
)

// Fault is one injected misbehaviour. Service and Action select the calls
// ("" or "*" matches any); Count limits how many calls it hits (0 means
// until cleared).
type Fault struct {
	ID      string        `json:"id,omitempty"`
	Service string        `json:"service,omitempty"`
	Action  string        `json:"action,omitempty"`
	Kind    FaultKind     `json:"kind"`
	Code    string        `json:"code,omitempty"`
	Status  int           `json:"status,omitempty"`
	Latency time.Duration `json:"-"`
	// LatencyText is Latency as a Go duration ("250ms") on the control API.
	LatencyText string `json:"latency,omitempty"`
	Count       int    `json:"count,omitempty"`
	// Hits is how many calls the fault has hit so far.
	Hits int `json:"hits"`
}

func (f *Fault) matches(c *call) bool {
	return (f.Service == "" || f.Service == "*" || f.Service == c.Service) &&
		(f.Action == "" || f.Action == "*" || f.Action == c.Action)
}

func (f *Fault) message(c *call) string {
	switch f.Kind {
	case FaultThrottle:
		return "Request limit exceeded (injected by awslocal)."
	default:
		return fmt.Sprintf("An internal error has occurred in %s (injected by awslocal).", c.Action)
	}
}

// normalize fills the protocol-dependent defaults once the call is known.
func (f Fault) forCall(c *call) *Fault {
	out := f
	if out.Code == "" {
		switch {
		case f.Kind == FaultThrottle && c.Protocol == protoEC2:
			out.Code = "RequestLimitExceeded"
		case f.Kind == FaultThrottle && c.Protocol == protoQuery:
			out.Code = "Throttling"
		case f.Kind == FaultThrottle:
			out.Code = "ThrottlingException"
		case f.Status == http.StatusServiceUnavailable:
			out.Code = "ServiceUnavailable"
		case c.Protocol == protoEC2:
			out.Code = "InternalError"
		default:
			out.Code = "InternalServerError"
		}
	}
	if out.Status == 0 {
		switch {
		case f.Kind == FaultThrottle && c.Protocol == protoEC2:
			out.Status = http.StatusServiceUnavailable
		case f.Kind == FaultThrottle:
			out.Status = http.StatusBadRequest
		default:
			out.Status = http.StatusInternalServerError
		}
	}
	return &out
}

type faults struct {
	mu     sync.Mutex
	next   int
	active []*Fault
}

func (fs *faults) add(f Fault) (Fault, error) {
	switch f.Kind {
	case FaultThrottle, FaultServerError:
	case FaultLatency, FaultLatencyAfter:
		if f.Latency == 0 && f.LatencyText != "" {
			d, err := time.ParseDuration(f.LatencyText)
			if err != nil {
				return Fault{}, fmt.Errorf("fault latency %q: %w", f.LatencyText, err)
			}
			f.Latency = d
		}
		if f.Latency <= 0 {
			return Fault{}, fmt.Errorf("a latency fault needs a positive latency")
		}
		f.LatencyText = f.Latency.String()
	default:
		return Fault{}, fmt.Errorf("unknown fault kind %q (want throttle, error, latency or latency-after)", f.Kind)
	}
	if f.Count < 0 {
		return Fault{}, fmt.Errorf("fault count %d is negative", f.Count)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.next++
	f.ID = strconv.Itoa(fs.next)
	f.Hits = 0
	fs.active = append(fs.active, &f)
	return f, nil
}

// take applies the faults matching c: it sleeps for latency faults and
// returns the first error fault, if any, with its protocol defaults, and
// how long to hold the answer back once served.
func (fs *faults) take(ctx context.Context, c *call) (hit *Fault, after time.Duration) {
	var delay time.Duration
	fs.mu.Lock()
	kept := fs.active[:0]
	for _, f := range fs.active {
		use := f.matches(c) && (f.Kind == FaultLatency || f.Kind == FaultLatencyAfter || hit == nil)
		if use {
			f.Hits++
			switch f.Kind {
			case FaultLatency:
				delay += f.Latency
			case FaultLatencyAfter:
				after += f.Latency
			default:
				hit = f.forCall(c)
			}
		}
		if f.Count == 0 || f.Hits < f.Count {
			kept = append(kept, f)
		}
	}
	fs.active = kept
	fs.mu.Unlock()
	sleep(ctx, delay)
	return hit, after
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (fs *faults) list() []Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]Fault, 0, len(fs.active))
	for _, f := range fs.active {
		out = append(out, *f)
	}
	return out
}

// clear removes the faults matching service and action ("" matches all)
// and returns how many it removed.
func (fs *faults) clear(service, action string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	kept := fs.active[:0]
	n := 0
	for _, f := range fs.active {
		if (service == "" || f.Service == service) && (action == "" || f.Action == action) {
			n++
			continue
		}
		kept = append(kept, f)
	}
	fs.active = kept
	return n
}

// AddFault injects a fault and returns it with its ID.
func (l *Local) AddFault(f Fault) (Fault, error) { return l.front.faults.add(f) }

// Faults lists the active faults.
func (l *Local) Faults() []Fault { return l.front.faults.list() }

// ClearFaults removes the faults for service and action ("" matches any).
func (l *Local) ClearFaults(service, action string) int { return l.front.faults.clear(service, action) }
