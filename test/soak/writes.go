package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Writes classifies the controller's successful NodeClaim status and Node
// patches in an audit log kept with AuditDir (the bodies recorded) by what
// each changed, from the object as the earlier patches in the log left it
// (StatusWrite, NodeWrite), and returns the counts by kind (StatusKind,
// NodeKind).
func Writes(path string) (status, nodes map[string]float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	status, nodes = map[string]float64{}, map[string]float64{}
	claims := map[string]map[string]any{}
	nodeState := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			ObjectRef struct {
				Resource, Subresource, Name string
			} `json:"objectRef"`
			ResponseStatus struct{ Code int } `json:"responseStatus"`
			RequestObject  json.RawMessage    `json:"requestObject"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Verb != "patch" || ev.ResponseStatus.Code >= 300 || len(ev.RequestObject) == 0 {
			continue
		}
		var body any
		if json.Unmarshal(ev.RequestObject, &body) != nil {
			continue
		}
		switch {
		case ev.ObjectRef.Resource == "nodeclaims" && ev.ObjectRef.Subresource == "status":
			old := claims[ev.ObjectRef.Name]
			cur := apply(old, body)
			claims[ev.ObjectRef.Name] = cur
			status[StatusKind(StatusWrite(sub(old, "status"), sub(cur, "status")))]++
		case ev.ObjectRef.Resource == "nodes" && ev.ObjectRef.Subresource == "":
			old := nodeState[ev.ObjectRef.Name]
			cur := apply(old, body)
			nodeState[ev.ObjectRef.Name] = cur
			nodes[NodeKind(NodeWrite(old, cur))]++
		}
	}
	return status, nodes, sc.Err()
}

// apply is obj (a copy) after a JSON patch (a list of operations) or a
// merge patch (an object).
func apply(obj map[string]any, patch any) map[string]any {
	out := deepCopy(obj)
	if out == nil {
		out = map[string]any{}
	}
	switch p := patch.(type) {
	case []any:
		for _, o := range p {
			op, _ := o.(map[string]any)
			kind, _ := op["op"].(string)
			path, _ := op["path"].(string)
			if kind == "add" || kind == "replace" || kind == "remove" {
				setPath(out, path, op["value"], kind == "remove")
			}
		}
	case map[string]any:
		merge(out, p)
	}
	return out
}

func setPath(doc map[string]any, path string, value any, remove bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(parts[i], "~1", "/"), "~0", "~")
	}
	cur := any(doc)
	for _, p := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[p]
			if !ok {
				next = map[string]any{}
				c[p] = next
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return
			}
			cur = c[i]
		default:
			return
		}
	}
	last := parts[len(parts)-1]
	if m, ok := cur.(map[string]any); ok {
		if remove {
			delete(m, last)
		} else {
			m[last] = deepCopyValue(value)
		}
	}
	// Operations on list items are not used by the writes classified.
}

func merge(doc, patch map[string]any) {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			if dv, ok := doc[k].(map[string]any); ok {
				merge(dv, pv)
				continue
			}
			m := map[string]any{}
			merge(m, pv)
			doc[k] = m
		default:
			doc[k] = deepCopyValue(v)
		}
	}
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return deepCopyValue(m).(map[string]any)
}

func deepCopyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopyValue(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopyValue(x)
		}
		return out
	}
	return v
}

func sub(m map[string]any, key string) map[string]any {
	s, _ := m[key].(map[string]any)
	return s
}

// StatusWrite names what a NodeClaim status write changed: each condition
// whose status (or reason) changed as Type:old>new ("-" absent, the reason
// when only it changed), then each other field set or changed; "nothing"
// when neither did (a message or transition time alone).
func StatusWrite(old, cur map[string]any) string {
	var parts []string
	before, after := conditions(old), conditions(cur)
	for _, t := range sortedKeys(before, after) {
		b, a := before[t], after[t]
		switch {
		case b.status != a.status:
			parts = append(parts, fmt.Sprintf("%s:%s>%s", t, b.status, a.status))
		case b.reason != a.reason:
			parts = append(parts, fmt.Sprintf("%s:%s(%s>%s)", t, a.status, b.reason, a.reason))
		}
	}
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	var fields []string
	for k := range keys {
		if k != "conditions" && !reflect.DeepEqual(old[k], cur[k]) {
			fields = append(fields, k)
		}
	}
	sort.Strings(fields)
	parts = append(parts, fields...)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}

type condition struct{ status, reason string }

func conditions(status map[string]any) map[string]condition {
	out := map[string]condition{}
	list, _ := status["conditions"].([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		r, _ := m["reason"].(string)
		out[t] = condition{s, r}
	}
	return out
}

func sortedKeys(a, b map[string]condition) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]condition{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	for i := range out {
		if _, ok := a[out[i]]; !ok {
			a[out[i]] = condition{status: "-"}
		}
		if _, ok := b[out[i]]; !ok {
			b[out[i]] = condition{status: "-"}
		}
	}
	return out
}

// NodeWrite names what a Node write changed: taints and finalizers added
// (+) or removed (-) by key, labels set or removed by key (the registration
// write's many labels as karpenter.sh/registered alone), unschedulable;
// "unseen" when the log held no earlier write to compare with and nothing
// of those is in it.
func NodeWrite(old, cur map[string]any) string {
	var parts []string
	taints := func(o map[string]any) map[string]bool {
		out := map[string]bool{}
		list, _ := sub(o, "spec")["taints"].([]any)
		for _, t := range list {
			m, _ := t.(map[string]any)
			k, _ := m["key"].(string)
			out[k] = true
		}
		return out
	}
	finalizers := func(o map[string]any) map[string]bool {
		out := map[string]bool{}
		list, _ := sub(o, "metadata")["finalizers"].([]any)
		for _, f := range list {
			s, _ := f.(string)
			out[s] = true
		}
		return out
	}
	diffSet := func(what string, a, b map[string]bool) {
		var keys []string
		for k := range b {
			if !a[k] {
				keys = append(keys, "+"+what+" "+k)
			}
		}
		for k := range a {
			if !b[k] {
				keys = append(keys, "-"+what+" "+k)
			}
		}
		sort.Strings(keys)
		parts = append(parts, keys...)
	}
	diffSet("taint", taints(old), taints(cur))
	diffSet("finalizer", finalizers(old), finalizers(cur))
	ol, _ := sub(old, "metadata")["labels"].(map[string]any)
	nl, _ := sub(cur, "metadata")["labels"].(map[string]any)
	var labels []string
	_, wasRegistered := ol["karpenter.sh/registered"]
	_, registered := nl["karpenter.sh/registered"]
	registering := registered && !wasRegistered
	for k := range nl {
		if !reflect.DeepEqual(ol[k], nl[k]) && (!registering || k == "karpenter.sh/registered" || k == "karpenter.sh/initialized") {
			labels = append(labels, "label "+k)
		}
	}
	for k := range ol {
		if _, ok := nl[k]; !ok {
			labels = append(labels, "-label "+k)
		}
	}
	sort.Strings(labels)
	parts = append(parts, labels...)
	if !reflect.DeepEqual(sub(old, "spec")["unschedulable"], sub(cur, "spec")["unschedulable"]) {
		parts = append(parts, "unschedulable")
	}
	if len(parts) == 0 {
		return "unseen"
	}
	return strings.Join(parts, " ")
}

// StatusKind groups a StatusWrite by the step it belongs to.
func StatusKind(w string) string {
	has := func(s string) bool { return strings.Contains(w, s) }
	drained := has("Drained:Unknown>True") || has("Drained:->True")
	switch {
	case w == "lastPodEventTime":
		return "lastPodEventTime alone"
	case has("lastPodEventTime") && has("Consolidatable:True>-"):
		return "lastPodEventTime, Consolidatable removed"
	case has("Consolidatable:->True"):
		return "Consolidatable set"
	case has("Consolidatable:True>-") && !has("Drifted"):
		return "Consolidatable removed"
	case has("Drifted:"):
		return "Drifted"
	case has("Launched:"):
		return "launch"
	case has("Initialized:Unknown>True"):
		return "initialization"
	case has("Registered:Unknown>True"):
		return "registration"
	case has("Initialized:Unknown(") || has("Registered:Unknown("):
		return "Initialized or Registered reason"
	case strings.HasPrefix(w, "ConsistentStateFound"):
		return "ConsistentStateFound"
	case has("DisruptionReason"):
		return "DisruptionReason"
	case w == "Drained:->Unknown":
		return "Drained=Unknown"
	case has("InstanceTerminating") && drained:
		return "Drained, InstanceTerminating"
	case drained:
		return "Drained"
	case has("InstanceTerminating"):
		return "InstanceTerminating"
	case w == "nothing":
		return "no status or reason changed"
	}
	return "other: " + w
}

// NodeKind groups a NodeWrite by the step it belongs to.
func NodeKind(w string) string {
	has := func(s string) bool { return strings.Contains(w, s) }
	switch {
	case has("label karpenter.sh/registered") && has("label karpenter.sh/initialized"):
		return "registration with initialized label"
	case has("label karpenter.sh/registered"):
		return "registration"
	case has("label karpenter.sh/initialized"):
		return "initialized label"
	case has("+taint karpenter.sh/disrupted"):
		return "disruption taint"
	case has("-taint karpenter.sh/disrupted"):
		return "disruption taint removed"
	case has("exclude-from-external-load-balancers"):
		return "termination: LB-exclusion label"
	case has("-finalizer karpenter.sh/termination"):
		return "termination finalizer removed"
	}
	return "other: " + w
}
