package soak

import (
	"testing"
	"time"
)

// TestEvictionsByReason: evictions counted by the method of the command
// that named their pod's Node, in ours' log format and upstream's, the
// later of two commands naming a Node winning, outside the window left
// out, a Node no command named counted as "other".
func TestEvictionsByReason(t *testing.T) {
	log := `{"level":"INFO","time":"2026-12-07T21:54:37.608Z","message":"disrupting node(s)","controller":"disruption","reason":"drifted","command":"Drifted/115d: delete: nodepools=[soak]: [a] (savings: $0.16)","disrupted-nodes":[{"Node":{"name":"a"},"NodeClaim":{"name":"a"}}]}
{"level":"INFO","time":"2026-12-07T21:55:00.000Z","message":"disrupting node(s)","command":"Underutilized/9f: delete: nodepools=[soak]: [b, c]","disrupted-nodes":[{"Node":{"name":"b"}},{"Node":{"name":"c"}}]}
{"level":"INFO","time":"2026-12-07T18:13:47.093Z","logger":"controller","message":"disrupting node(s)","controller":"disruption","namespace":"","name":"","command":"Empty/37ec: delete: nodepools=[soak]: [d]","disrupted-nodes":[{"Node":{"name":"d"}}]}
{"level":"INFO","time":"2026-12-07T21:56:00.000Z","message":"disrupting node(s)","command":"Drifted/77: delete: nodepools=[soak]: [c]","disrupted-nodes":[{"Node":{"name":"c"}}]}
{"level":"INFO","time":"2026-12-07T21:56:00.000Z","message":"disrupting","command":"Empty/78: [e]","disrupted-nodes":[{"Node":{"name":"e"}}]}
not json "disrupting node(s)"`
	nodes := DisruptedNodes(log)
	want := map[string]string{"a": "Drifted", "b": "Underutilized", "c": "Drifted", "d": "Empty"}
	if len(nodes) != len(want) {
		t.Fatalf("DisruptedNodes = %v, want %v", nodes, want)
	}
	for n, m := range want {
		if nodes[n] != m {
			t.Fatalf("DisruptedNodes[%s] = %q, want %q (all: %v)", n, nodes[n], m, nodes)
		}
	}
	t0 := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	evictions := []Eviction{
		{At: at(1), Node: "a"}, {At: at(2), Node: "a"}, {At: at(3), Node: "b"}, {At: at(4), Node: "c"},
		{At: at(5), Node: "x"}, {At: at(60), Node: "b"}, {At: at(-1), Node: "d"},
	}
	got := EvictionsByReason(evictions, nodes, at(0), at(60))
	wantCounts := map[string]float64{"Drifted": 3, "Underutilized": 1, "other": 1}
	if len(got) != len(wantCounts) {
		t.Fatalf("EvictionsByReason = %v, want %v", got, wantCounts)
	}
	for k, v := range wantCounts {
		if got[k] != v {
			t.Fatalf("EvictionsByReason[%s] = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
