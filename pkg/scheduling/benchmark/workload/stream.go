package workload

import (
	"crypto/rand"
	"fmt"
	"io"
	mathrand "math/rand"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Seed is the seed of upstream's shared benchmark generator.
const Seed = 42

// The value lists the generator indexes into. Their order matters: a draw is
// an index, so reordering a list changes every pod.
var (
	labelValues = []string{"a", "b", "c", "d", "e", "f", "g"}
	cpuMilli    = []int64{100, 250, 500, 1000, 1500}
	memMi       = []int64{100, 256, 512, 1024, 2048, 4096}
)

// Group names the kind of pod a record describes; the strings are the ones
// used in the spec's fingerprint lines.
type Group string

const (
	Generic        Group = "generic"
	SpreadZone     Group = "spread-zone"
	SpreadHostname Group = "spread-hostname"
	AffinityZone   Group = "affinity-zone"
	AntiHostname   Group = "anti-hostname"
	Preference     Group = "preference"
)

// Record is everything the random stream decides about one pod. Pods are
// built from records; keeping the two apart lets a caller advance the stream
// past cases it does not need without building their pods.
type Record struct {
	Group    Group
	CPUMilli int64
	MemMi    int64
	// Label is the my-label value (generic, spread) or the my-affininity value
	// (affinity); empty otherwise.
	Label string
	// Selector is the my-label value the spread constraint selects; empty for
	// non-spread pods.
	Selector string
}

// Stream is the shared generator. Upstream creates one at package init and
// every benchmark function draws from it, so a case's pods depend on the
// cases generated before it from the same Stream.
type Stream struct {
	rng *mathrand.Rand

	// UIDSource feeds the pods' v4 UIDs (and names, which derive from them).
	// It is deliberately separate from the seeded stream: upstream's UIDs do
	// not consume its draws. Nil means crypto/rand; set a seeded reader for
	// fully reproducible pods.
	UIDSource io.Reader
	// Now stamps CreationTimestamp. Nil means time.Now.
	Now func() time.Time
}

// NewStream returns a generator in the state upstream's is in at process start.
func NewStream() *Stream {
	return &Stream{rng: mathrand.New(mathrand.NewSource(Seed))}
}

func (s *Stream) pick(n int) int { return s.rng.Intn(n) }

func (s *Stream) label() string { return labelValues[s.pick(len(labelValues))] }

// resources draws cpu then memory, the order every pod kind uses.
func (s *Stream) resources() (int64, int64) {
	c := cpuMilli[s.pick(len(cpuMilli))]
	m := memMi[s.pick(len(memMi))]
	return c, m
}

// DiverseRecords draws the diverse workload for n pods: five groups of n/5
// (generic, zone spread, hostname spread, zone self-affinity, hostname
// anti-affinity) and the remainder as generic pods.
func (s *Stream) DiverseRecords(n int) []Record {
	q := n / 5
	out := make([]Record, 0, n)
	generic := func(k int) {
		for range k {
			l := s.label()
			c, m := s.resources()
			out = append(out, Record{Group: Generic, CPUMilli: c, MemMi: m, Label: l})
		}
	}
	spread := func(g Group) {
		for range q {
			l := s.label()
			sel := s.label() // independent of l, so it rarely selects the pod itself
			c, m := s.resources()
			out = append(out, Record{Group: g, CPUMilli: c, MemMi: m, Label: l, Selector: sel})
		}
	}
	generic(q)
	spread(SpreadZone)
	spread(SpreadHostname)
	for range q {
		l := s.label()
		c, m := s.resources()
		out = append(out, Record{Group: AffinityZone, CPUMilli: c, MemMi: m, Label: l})
	}
	for range q {
		c, m := s.resources()
		out = append(out, Record{Group: AntiHostname, CPUMilli: c, MemMi: m})
	}
	generic(n - 5*q)
	return out
}

// PreferenceRecords draws the preference workload: one cpu/memory draw shared
// by all n pods.
func (s *Stream) PreferenceRecords(n int) []Record {
	c, m := s.resources()
	out := make([]Record, n)
	for i := range out {
		out[i] = Record{Group: Preference, CPUMilli: c, MemMi: m}
	}
	return out
}

// Kind says which workload a case runs.
type Kind int

const (
	KindDiverse Kind = iota
	KindPreference
)

// CaseSpec describes one upstream benchmark function.
type CaseSpec struct {
	Name     string
	PodCount int
	Kind     Kind
	// IgnorePreferences is set for the case upstream runs with the
	// IgnorePreferences scheduler option; the solver should drop preferred
	// terms instead of relaxing them.
	IgnorePreferences bool
}

// CaseOrder is the order in which `go test -bench=. -benchtime=1x -count=1`
// calls upstream's benchmark functions, hence the order they consume the
// shared stream. The published fingerprints are for this order.
var CaseOrder = []CaseSpec{
	{Name: "Scheduling1", PodCount: 1},
	{Name: "Scheduling50", PodCount: 50},
	{Name: "Scheduling100", PodCount: 100},
	{Name: "Scheduling500", PodCount: 500},
	{Name: "Scheduling1000", PodCount: 1000},
	{Name: "Scheduling2000", PodCount: 2000},
	{Name: "Scheduling5000", PodCount: 5000},
	{Name: "Scheduling10000", PodCount: 10000},
	{Name: "Scheduling20000", PodCount: 20000},
	{Name: "RespectPreferences", PodCount: 4000, Kind: KindPreference},
	{Name: "IgnorePreferences", PodCount: 4000, Kind: KindPreference, IgnorePreferences: true},
}

// Records draws the records of one case from the stream.
func (s *Stream) Records(c CaseSpec) []Record {
	if c.Kind == KindPreference {
		return s.PreferenceRecords(c.PodCount)
	}
	return s.DiverseRecords(c.PodCount)
}

// Case is one benchmark case with its pods.
type Case struct {
	CaseSpec
	Records []Record
	Pods    []*corev1.Pod
}

// Cases generates all cases of CaseOrder from one fresh stream, in order.
// That is about 46,000 pods; use CaseByName to build only one.
func Cases() []Case {
	s := NewStream()
	out := make([]Case, 0, len(CaseOrder))
	for _, spec := range CaseOrder {
		recs := s.Records(spec)
		out = append(out, Case{CaseSpec: spec, Records: recs, Pods: s.Build(recs)})
	}
	return out
}

// CaseByName returns the named case exactly as it appears in the canonical
// order, whatever else the caller runs: the draws of earlier cases are made
// and discarded, without building their pods. This makes a filtered or
// repeated benchmark run see the same pods as the full one.
func CaseByName(name string) (Case, error) {
	s := NewStream()
	for _, spec := range CaseOrder {
		recs := s.Records(spec)
		if spec.Name == name {
			return Case{CaseSpec: spec, Records: recs, Pods: s.Build(recs)}, nil
		}
	}
	return Case{}, fmt.Errorf("workload: no benchmark case named %q", name)
}

func (s *Stream) uidReader() io.Reader {
	if s.UIDSource != nil {
		return s.UIDSource
	}
	return rand.Reader
}

func (s *Stream) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
