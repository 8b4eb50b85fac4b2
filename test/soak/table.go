package soak

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is one line about a result.
func Summary(r *Result) string {
	return fmt.Sprintf("build-up %s (%d nodes); churn p50/p99 pending-to-bound %s/%s over %d pods; %.0f evictions (%.0f/h; %.0f to the end of settling, %s); $%.2f/h start, $%.2f/h mid, $%.2f/h end, $%.2f/h mean; peak RSS %.0f MiB (last half %.0f-%.0f, 5-minute means %.0f-%.0f); CPU %.1fs; API requests %.0f (controller's own %.0f by the audit log, %.0f by its client); end: %d nodes, %d NodeClaims, %d pending, leaks %v %v, panics %d",
		r.BuildUp.Round(time.Second), r.BuildUpNodes, r.P50.Round(100*time.Millisecond), r.P99.Round(100*time.Millisecond), r.Bound,
		r.Evictions, r.EvictionsPerHour, r.EvictionsSettled, settledText(r.Settled), r.CostStart, r.CostMid, r.CostEnd, r.CostMean, r.PeakRSSMiB, r.RSSMinLate, r.RSSMaxLate, r.RSSMeanMinLate, r.RSSMeanMaxLate,
		r.CPUSeconds, r.APIRequestsTotal, r.ControllerAuditedTotal, r.ControllerRequests, r.NodesAtEnd, r.ClaimsAtEnd, r.PendingAtEnd,
		r.NodesWithoutClaim, r.ClaimsWithoutNode, len(r.Panics))
}

// settledText says how long settling took, or that it did not end.
func settledText(settled time.Duration) string {
	if settled < 0 {
		return "not settled"
	}
	return "settled " + settled.Round(time.Second).String() + " after the churn"
}

// Table prints one column per controller and, for each of ours when
// upstream-kwok ran too, the ratio ours ÷ upstream.
func Table(results []*Result) string {
	type row = tableRow[*Result]
	rows := []row{
		{"build-up to all bound (s)", func(r *Result) float64 { return r.BuildUp.Seconds() }, "%.1f"},
		{"nodes after build-up", func(r *Result) float64 { return float64(r.BuildUpNodes) }, "%.0f"},
		{"p50 pending-to-bound (s)", func(r *Result) float64 { return r.P50.Seconds() }, "%.1f"},
		{"p99 pending-to-bound (s)", func(r *Result) float64 { return r.P99.Seconds() }, "%.1f"},
		{"pods measured", func(r *Result) float64 { return float64(r.Bound) }, "%.0f"},
		{"evictions", func(r *Result) float64 { return r.Evictions }, "%.0f"},
		{"evictions/h", func(r *Result) float64 { return r.EvictionsPerHour }, "%.0f"},
	}
	rows = append(rows, keyRows(results, "  evictions ", func(r *Result) map[string]float64 { return r.EvictionsByReason })...)
	rows = append(rows, []row{
		{"evictions to settled (drift done)", func(r *Result) float64 { return r.EvictionsSettled }, "%.0f"},
		{"settled after the churn (s, -1 not)", func(r *Result) float64 {
			if r.Settled < 0 {
				return -1
			}
			return r.Settled.Seconds()
		}, "%.0f"},
		{"$/h churn start", func(r *Result) float64 { return r.CostStart }, "%.2f"},
		{"$/h churn mid", func(r *Result) float64 { return r.CostMid }, "%.2f"},
		{"$/h churn end", func(r *Result) float64 { return r.CostEnd }, "%.2f"},
		{"$/h churn mean", func(r *Result) float64 { return r.CostMean }, "%.2f"},
		{"peak RSS (MiB)", func(r *Result) float64 { return r.PeakRSSMiB }, "%.0f"},
		{"RSS last half min (MiB)", func(r *Result) float64 { return r.RSSMinLate }, "%.0f"},
		{"RSS last half max (MiB)", func(r *Result) float64 { return r.RSSMaxLate }, "%.0f"},
		{"RSS last half 5-min mean min (MiB)", func(r *Result) float64 { return r.RSSMeanMinLate }, "%.0f"},
		{"RSS last half 5-min mean max (MiB)", func(r *Result) float64 { return r.RSSMeanMaxLate }, "%.0f"},
		{"CPU (s)", func(r *Result) float64 { return r.CPUSeconds }, "%.1f"},
		{"controller API requests (audit log)", func(r *Result) float64 { return r.ControllerAuditedTotal }, "%.0f"},
		{"controller API requests (its client-go, -1 none)", func(r *Result) float64 { return r.ControllerRequests }, "%.0f"},
		{"API server requests (all clients)", func(r *Result) float64 { return r.APIRequestsTotal }, "%.0f"},
	}...)
	rows = append(rows, keyRows(results, "  ", func(r *Result) map[string]float64 { return r.APIRequests })...)
	rows = append(rows, keyRows(results, "  controller ", func(r *Result) map[string]float64 { return r.ControllerAudited })...)
	rows = append(rows, keyRows(results, "  controller events ", func(r *Result) map[string]float64 { return r.ControllerEvents })...)
	rows = append(rows, keyRows(results, "  status write ", func(r *Result) map[string]float64 { return r.StatusWrites })...)
	rows = append(rows, keyRows(results, "  node write ", func(r *Result) map[string]float64 { return r.NodeWrites })...)
	rows = append(rows,
		row{"nodes at end", func(r *Result) float64 { return float64(r.NodesAtEnd) }, "%.0f"},
		row{"pending at end", func(r *Result) float64 { return float64(r.PendingAtEnd) }, "%.0f"},
		row{"pre-drift nodes at end", func(r *Result) float64 { return float64(r.DriftLeft) }, "%.0f"},
		row{"leaked nodes+claims", func(r *Result) float64 { return float64(len(r.NodesWithoutClaim) + len(r.ClaimsWithoutNode)) }, "%.0f"},
		row{"panics", func(r *Result) float64 { return float64(len(r.Panics)) }, "%.0f"},
	)
	var sb strings.Builder
	writeTable(&sb, results, func(r *Result) string { return r.Controller }, rows)
	if len(results) > 0 {
		c := results[0].Config
		fmt.Fprintf(&sb, "scale: %d pods built up (aiming at %d nodes), %s of churn moving every %s, seed %d\n", c.Pods, c.Nodes, c.Duration, c.Step, c.Seed)
	}
	return sb.String()
}

// keyRows are one row per key that any result's counts (by verb, by
// reason...) hold, in key order, labelled prefix+key.
func keyRows(results []*Result, prefix string, counts func(*Result) map[string]float64) []tableRow[*Result] {
	seen := map[string]bool{}
	var keys []string
	for _, r := range results {
		for k := range counts(r) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	rows := make([]tableRow[*Result], 0, len(keys))
	for _, k := range keys {
		rows = append(rows, tableRow[*Result]{prefix + k, func(r *Result) float64 { return counts(r)[k] }, "%.0f"})
	}
	return rows
}

// tableRow is one figure of a table: its label, how to read it from a
// result and how to print it.
type tableRow[R any] struct {
	name string
	get  func(R) float64
	fmt  string
}

// writeTable writes one column per controller and, for each other
// controller when upstream-kwok is among them, the ratio to it.
func writeTable[R comparable](sb *strings.Builder, results []R, controller func(R) string, rows []tableRow[R]) {
	var up R
	found := false
	for _, r := range results {
		if controller(r) == "upstream-kwok" {
			up, found = r, true
		}
	}
	w := tabwriter.NewWriter(sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "\t")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t", controller(r))
	}
	if found {
		for _, r := range results {
			if r != up {
				fmt.Fprintf(w, "%s÷up\t", controller(r))
			}
		}
	}
	fmt.Fprintln(w)
	for _, rw := range rows {
		fmt.Fprintf(w, "%s\t", rw.name)
		for _, r := range results {
			fmt.Fprintf(w, rw.fmt+"\t", rw.get(r))
		}
		if found {
			for _, r := range results {
				if r == up {
					continue
				}
				// -1 stands for a figure a controller does not give (upstream's
				// kwok controller exports no client-go request counts).
				if d, v := rw.get(up), rw.get(r); d > 0 && v >= 0 {
					fmt.Fprintf(w, "%.2f\t", v/d)
				} else {
					fmt.Fprint(w, "-\t")
				}
			}
		}
		fmt.Fprintln(w)
	}
	w.Flush()
}

// mean is the mean of value over samples (0 for none).
func mean(samples []Sample, value func(Sample) float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	var sum float64
	for _, s := range samples {
		sum += value(s)
	}
	return sum / float64(len(samples))
}

// windowMeans are the means of value over consecutive windows of the
// given length, from the first sample on. A window whose samples span less
// than half the length (the churn's last few samples) is left out unless
// it is the only one: too few samples to stand for a trend.
func windowMeans(samples []Sample, window time.Duration, value func(Sample) float64) []float64 {
	var means []float64
	for len(samples) > 0 {
		end := samples[0].At + window
		n := 0
		for n < len(samples) && samples[n].At < end {
			n++
		}
		if len(means) == 0 || samples[n-1].At-samples[0].At >= window/2 {
			means = append(means, mean(samples[:n], value))
		}
		samples = samples[n:]
	}
	return means
}
