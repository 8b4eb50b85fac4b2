package soak

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTableRatios: a ratio is printed only where upstream's figure is
// positive and ours is given; -1 (a figure the controller does not give)
// prints "-".
func TestTableRatios(t *testing.T) {
	up := &Result{Controller: "upstream-kwok", ControllerRequests: -1, ControllerAuditedTotal: 8000, CPUSeconds: 0}
	ours := &Result{Controller: "ours-upstream", ControllerRequests: 5900, ControllerAuditedTotal: 6000, CPUSeconds: 20}
	table := Table([]*Result{up, ours})
	for _, tc := range []struct {
		row, ratio string
	}{
		{"controller API requests (audit log)", "0.75"},
		{"controller API requests (its client-go, -1 none)", "-"},
		{"CPU (s)", "-"},
	} {
		t.Run(tc.row, func(t *testing.T) {
			for _, line := range strings.Split(table, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), tc.row) {
					fields := strings.Fields(line)
					if got := fields[len(fields)-1]; got != tc.ratio {
						t.Fatalf("ratio of %q = %q, want %q:\n%s", tc.row, got, tc.ratio, line)
					}
					return
				}
			}
			t.Fatalf("no row %q in\n%s", tc.row, table)
		})
	}
}

// TestWindowMeans: 5-minute means of 10 s samples, a short last window
// left out, a lone short window kept.
func TestWindowMeans(t *testing.T) {
	var samples []Sample
	for i := 0; i < 65; i++ { // 0..640 s: two full windows and 40 s
		v := 100.0
		if i >= 30 {
			v = 200
		}
		samples = append(samples, Sample{At: time.Duration(i) * 10 * time.Second, RSSMiB: v})
	}
	rss := func(s Sample) float64 { return s.RSSMiB }
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []float64
	}{
		{"two windows and a short one", samples, []float64{100, 200}},
		{"one short window", samples[:5], []float64{100}},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := windowMeans(tc.samples, 5*time.Minute, rss); !slices.Equal(got, tc.want) {
				t.Fatalf("windowMeans = %v, want %v", got, tc.want)
			}
		})
	}
	if got := mean(samples[28:32], rss); got != 150 {
		t.Fatalf("mean = %v, want 150", got)
	}
}
