package v1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// MaxDuration is the longest duration the CRDs accept (their CEL rules
// compare with "2562047h"), just under time.Duration's limit. A stored value
// beyond it (written before the rules existed, or by a client that skipped
// validation) decodes as MaxDuration instead of failing: a decoding error
// would stop every informer of the kind, not just this object.
const MaxDuration = 2562047 * time.Hour

// durationSyntax is what time.ParseDuration reads, without the sign: a value
// of this shape that ParseDuration refuses is out of range, not malformed.
var durationSyntax = regexp.MustCompile(`^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|\x{00b5}s|\x{03bc}s|ms|s|m|h))+$`)

// parseDuration is time.ParseDuration, clamped to [0, MaxDuration] for
// values that are well formed but too long to represent.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		if durationSyntax.MatchString(s) {
			return MaxDuration, nil
		}
		return 0, err
	}
	if d > MaxDuration {
		return MaxDuration, nil
	}
	return d, nil
}

// Duration is metav1.Duration with the same wire format ("1h0m0s" out, any Go
// duration in), except that a value past MaxDuration decodes as MaxDuration
// instead of failing (see MaxDuration).
// +kubebuilder:validation:Type=string
type Duration struct {
	time.Duration
}

// UnmarshalJSON decodes a JSON string holding a Go duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding duration: %w", err)
	}
	parsed, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("parsing duration %q: %w", s, err)
	}
	d.Duration = parsed
	return nil
}

// MarshalJSON encodes the duration as metav1.Duration does.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// ToUnstructured agrees with MarshalJSON for the unstructured converter.
func (d Duration) ToUnstructured() any {
	return d.Duration.String()
}

// Never is the text that switches a NillableDuration off: the node never
// expires, or is never consolidated.
const Never = "Never"

// NillableDuration is a duration field that also accepts "Never".
//
// It has three states:
//   - unset (the zero value): the field is left out of the JSON so that the API
//     server applies its default, exactly as when a user omits it in YAML;
//   - Never: Duration is nil but the value was decoded from, or built as,
//     "Never" (see NeverDuration);
//   - a duration: Duration is set.
//
// It keeps the text it was decoded from and writes that text back unchanged.
// Without this, "720h" would come back as "720h0m0s" and GitOps tools (Argo
// CD, Flux) would report a permanent diff on every NodePool.
//
// Fields of this type must be tagged `omitzero` so that "unset" is omitted.
type NillableDuration struct {
	*time.Duration
	// Raw is the JSON text the value was decoded from, replayed by MarshalJSON.
	Raw []byte `json:"-"`
}

// NeverDuration returns a NillableDuration that means "Never".
func NeverDuration() NillableDuration {
	return NillableDuration{Raw: []byte(`"` + Never + `"`)}
}

// NewNillableDuration returns a NillableDuration holding d.
func NewNillableDuration(d time.Duration) NillableDuration {
	return NillableDuration{Duration: &d}
}

// ParseNillableDuration parses "Never" or a Go duration string.
func ParseNillableDuration(s string) (NillableDuration, error) {
	var d NillableDuration
	raw, err := json.Marshal(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("encoding duration %q: %w", s, err)
	}
	if err := d.UnmarshalJSON(raw); err != nil {
		return NillableDuration{}, err
	}
	return d, nil
}

// MustParseNillableDuration is ParseNillableDuration for constants; it panics
// on malformed input.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// IsZero reports whether the value is unset. encoding/json and the
// apimachinery unstructured converter use it to honour `omitzero`.
func (d NillableDuration) IsZero() bool {
	return d.Duration == nil && len(d.Raw) == 0
}

// IsNever reports whether the value is explicitly "Never".
func (d NillableDuration) IsNever() bool {
	return d.Duration == nil && len(d.Raw) != 0
}

// UnmarshalJSON accepts a JSON string holding "Never" or a Go duration, and
// null (which leaves the value unset).
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding duration: %w", err)
	}
	out := NillableDuration{Raw: bytes.Clone(b)}
	if s != Never {
		parsed, err := parseDuration(s)
		if err != nil {
			return fmt.Errorf("parsing duration %q: %w", s, err)
		}
		out.Duration = &parsed
	}
	*d = out
	return nil
}

// MarshalJSON replays the decoded text when there is one, so that the value
// round-trips byte for byte; an unset value encodes as null.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if len(d.Raw) != 0 {
		return d.Raw, nil
	}
	if d.Duration != nil {
		return json.Marshal(d.Duration.String())
	}
	return []byte("null"), nil
}

// ToUnstructured implements sigs.k8s.io/structured-merge-diff's
// UnstructuredConverter so that runtime.DefaultUnstructuredConverter (used
// by server-side apply and fake clients) agrees with MarshalJSON.
func (d NillableDuration) ToUnstructured() any {
	if len(d.Raw) != 0 {
		var s string
		if err := json.Unmarshal(d.Raw, &s); err == nil {
			return s
		}
	}
	if d.Duration != nil {
		return d.Duration.String()
	}
	if d.IsNever() {
		return Never
	}
	return nil
}

// String renders the value the way a user would write it.
func (d NillableDuration) String() string {
	switch v := d.ToUnstructured().(type) {
	case string:
		return v
	default:
		return ""
	}
}
