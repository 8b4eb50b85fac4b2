package soak

import (
	"encoding/json"
	"strings"
	"time"
)

// DisruptedNodes maps each Node a controller's "disrupting node(s)" log
// lines name to the method of the command that named it last: the
// command's prefix (Empty, Underutilized, Drifted, ...), which ours' and
// upstream's logs both print as "Method/command-id: decision: ...". A Node
// a rolled-back command named and a later one took again keeps the later
// method.
func DisruptedNodes(log string) map[string]string {
	nodes := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"disrupting node(s)"`) {
			continue
		}
		start := strings.IndexByte(line, '{')
		if start < 0 {
			continue
		}
		var entry struct {
			Message   string `json:"message"`
			Command   string `json:"command"`
			Disrupted []struct {
				Node struct {
					Name string `json:"name"`
				} `json:"Node"`
			} `json:"disrupted-nodes"`
		}
		if json.Unmarshal([]byte(line[start:]), &entry) != nil || entry.Message != "disrupting node(s)" {
			continue
		}
		method, _, ok := strings.Cut(entry.Command, "/")
		if !ok || method == "" {
			continue
		}
		for _, d := range entry.Disrupted {
			if d.Node.Name != "" {
				nodes[d.Node.Name] = method
			}
		}
	}
	return nodes
}

// EvictionsByReason counts the evictions in [from, to) by the method of
// the command that disrupted the evicted pod's Node, "other" where no
// command named it (a NodeClaim deleted another way: expiry, repair, a
// deletion by hand). Consolidation and a drift both evict; telling them
// apart is what makes two controllers' eviction counts comparable when
// one carries out the drift and the other does not.
func EvictionsByReason(evictions []Eviction, nodes map[string]string, from, to time.Time) map[string]float64 {
	counts := map[string]float64{}
	for _, e := range evictions {
		if e.At.Before(from) || !e.At.Before(to) {
			continue
		}
		method, ok := nodes[e.Node]
		if !ok {
			method = "other"
		}
		counts[method]++
	}
	return counts
}
