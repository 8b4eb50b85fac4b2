package soak

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestWrites: each successful patch is classified from the object as the
// earlier patches left it, JSON patches (ours) and merge patches
// (upstream's) alike; refused ones and other resources are not counted.
func TestWrites(t *testing.T) {
	conds := func(cs ...string) string {
		var out []string
		for _, c := range cs {
			kv := strings.SplitN(c, "=", 2)
			out = append(out, `{"type":"`+kv[0]+`","status":"`+kv[1]+`","reason":"r"}`)
		}
		return "[" + strings.Join(out, ",") + "]"
	}
	ev := func(resource, sub, name string, code int, body string) string {
		return `{"verb":"patch","objectRef":{"resource":"` + resource + `","subresource":"` + sub + `","name":"` + name +
			`"},"responseStatus":{"code":` + strconv.Itoa(code) + `},"requestObject":` + body + `}`
	}
	lines := []string{
		// ours: launch, then a stamp, then Consolidatable, then a stamp
		// removing it (JSON patches).
		ev("nodeclaims", "status", "a", 200, `[{"op":"add","path":"/status","value":{"providerID":"p","conditions":`+conds("Launched=True", "Initialized=True")+`}}]`),
		ev("nodeclaims", "status", "a", 200, `{"status":{"lastPodEventTime":"t1"}}`),
		ev("nodeclaims", "status", "a", 200, `[{"op":"test","path":"/status/conditions","value":[]},{"op":"replace","path":"/status/conditions","value":`+conds("Launched=True", "Initialized=True", "Consolidatable=True")+`}]`),
		ev("nodeclaims", "status", "a", 422, `[{"op":"replace","path":"/status/conditions","value":[]}]`),
		ev("nodeclaims", "status", "a", 200, `[{"op":"replace","path":"/status/lastPodEventTime","value":"t2"},{"op":"replace","path":"/status/conditions","value":`+conds("Launched=True", "Initialized=True")+`}]`),
		// upstream's: merge patches with the whole list.
		ev("nodeclaims", "status", "b", 200, `{"status":{"conditions":`+conds("Launched=True", "Initialized=True", "Consolidatable=True")+`}}`),
		ev("nodeclaims", "status", "b", 200, `{"status":{"conditions":`+conds("Launched=True", "Initialized=True")+`}}`),
		ev("nodeclaims", "", "b", 200, `{"metadata":{"finalizers":null}}`),
		// Nodes.
		ev("nodes", "", "n", 200, `[{"op":"add","path":"/metadata/labels/karpenter.sh~1registered","value":"true"},{"op":"add","path":"/metadata/labels/karpenter.sh~1initialized","value":"true"}]`),
		ev("nodes", "", "n", 200, `[{"op":"test","path":"/spec/taints","value":null},{"op":"add","path":"/spec/taints","value":[{"key":"karpenter.sh/disrupted","effect":"NoSchedule"}]}]`),
		ev("nodes", "", "n", 200, `{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":"karpenter"}}}`),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, nodes, err := Writes(path)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := map[string]float64{
		"launch": 1, "lastPodEventTime alone": 1, "Consolidatable set": 2,
		"lastPodEventTime, Consolidatable removed": 1, "Consolidatable removed": 1,
	}
	if !reflect.DeepEqual(status, wantStatus) {
		t.Errorf("status writes %v, want %v", status, wantStatus)
	}
	wantNodes := map[string]float64{"registration with initialized label": 1, "disruption taint": 1, "termination: LB-exclusion label": 1}
	if !reflect.DeepEqual(nodes, wantNodes) {
		t.Errorf("node writes %v, want %v", nodes, wantNodes)
	}
}
