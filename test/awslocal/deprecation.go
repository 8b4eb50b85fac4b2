package awslocal

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// deprecations are the AMI deprecation times the front keeps, because moto
// has no EnableImageDeprecation and never reports a deprecationTime.
type deprecations struct {
	mu sync.Mutex
	at map[string]time.Time // image id → deprecation time
	// now is the clock deprecation is judged by (tests may not move it;
	// it exists so that "deprecated" means the same as on EC2: at ≤ now).
	now func() time.Time
}

func newDeprecations() *deprecations {
	return &deprecations{at: map[string]time.Time{}, now: time.Now}
}

func (d *deprecations) set(id string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at[id] = at.UTC().Truncate(time.Second)
}

func (d *deprecations) clear(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.at, id)
}

// snapshot copies the table; empty when no image has a deprecation time,
// which lets DescribeImages go to moto untouched.
func (d *deprecations) snapshot() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]time.Time, len(d.at))
	for k, v := range d.at {
		out[k] = v
	}
	return out
}

// DeprecateImage makes id deprecated from at on, as EnableImageDeprecation
// does: DescribeImages then reports its deprecationTime and, once at has
// passed, leaves it out unless the call names it by id or sets
// IncludeDeprecated.
func (l *Local) DeprecateImage(ctx context.Context, id string, at time.Time) error {
	f := l.front
	if _, ok, err := f.image(ctx, DefaultRegion, id); err != nil {
		return fmt.Errorf("looking up image %s: %w", id, err)
	} else if !ok {
		return fmt.Errorf("image %s not found", id)
	}
	f.deprecated.set(id, at)
	return nil
}

// enableImageDeprecation is EC2's EnableImageDeprecation: ImageId and
// DeprecateAt (ISO 8601). An unknown image is InvalidAMIID.NotFound.
func (f *front) enableImageDeprecation(ctx context.Context, w http.ResponseWriter, c *call) bool {
	id := c.Form.Get("ImageId")
	at, err := time.Parse(time.RFC3339, c.Form.Get("DeprecateAt"))
	if err != nil {
		writeError(w, c, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter DeprecateAt is invalid.", c.Form.Get("DeprecateAt")))
		return true
	}
	if _, ok, err := f.image(ctx, c.Region, id); err != nil {
		writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
		return true
	} else if !ok {
		writeError(w, c, http.StatusBadRequest, "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", id))
		return true
	}
	f.deprecated.set(id, at)
	writeReturnTrue(w, c.Action)
	return true
}

// disableImageDeprecation is EC2's DisableImageDeprecation.
func (f *front) disableImageDeprecation(_ context.Context, w http.ResponseWriter, c *call) bool {
	f.deprecated.clear(c.Form.Get("ImageId"))
	writeReturnTrue(w, c.Action)
	return true
}

func writeReturnTrue(w http.ResponseWriter, action string) {
	writeXML(w, []byte(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>%s</requestId><return>true</return></%sResponse>`,
		action, newRequestID(), action)))
}

// deprecationTimeFormat is how EC2 writes deprecationTime.
const deprecationTimeFormat = "2006-01-02T15:04:05.000Z"

// overlayImages lays the deprecation table over moto's DescribeImages
// answer: each image with a deprecation time carries it, and images
// already deprecated are dropped unless the call asked for them, as EC2
// does (IncludeDeprecated, or the images named by ImageId).
func (f *front) overlayImages(c *call, body []byte) ([]byte, error) {
	table := f.deprecated.snapshot()
	if len(table) == 0 {
		return body, nil
	}
	doc, err := parseXML(body)
	if err != nil {
		return nil, err
	}
	set := doc.child("imagesSet")
	if set == nil {
		return body, nil
	}
	include := strings.EqualFold(c.Form.Get("IncludeDeprecated"), "true")
	for k := range c.Form {
		if strings.HasPrefix(k, "ImageId.") {
			include = true
		}
	}
	now := f.deprecated.now()
	kept := set.Children[:0]
	for _, it := range set.Children {
		at, ok := table[it.text("imageId")]
		if ok {
			if !at.After(now) && !include {
				continue
			}
			it.set(leaf("deprecationTime", at.Format(deprecationTimeFormat)))
		}
		kept = append(kept, it)
	}
	set.Children = kept
	return doc.bytes(), nil
}
