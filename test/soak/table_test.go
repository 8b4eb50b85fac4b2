package soak

import (
	"strings"
	"testing"
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
