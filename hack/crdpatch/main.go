// Command crdpatch finishes the CRDs controller-gen writes. Markers cannot
// reach into types from k8s.io/api, so the validation upstream Karpenter puts
// on taints is added here, and one NodePool-only rule is moved onto the
// requirement key schema so its error text matches upstream byte for byte.
// `make generate` runs it after controller-gen; it is idempotent.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// qualifiedName is the label-key pattern upstream uses for taint keys and
// values (a DNS-subdomain prefix, then a name segment).
const qualifiedName = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch <crd-dir>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	patches := map[string]func(schema) error{
		"karpenter.sh_nodepools.yaml":  patchNodePool,
		"karpenter.sh_nodeclaims.yaml": patchNodeClaim,
	}
	for file, patch := range patches {
		path := filepath.Join(dir, file)
		if err := patchFile(path, patch); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// schema is an OpenAPI schema node as a generic map: maps are references, so
// edits made while walking stick without copying back.
type schema = map[string]any

func patchFile(path string, patch func(schema) error) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := map[string]any{}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	versions, _ := get(doc, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("no versions")
	}
	for _, v := range versions {
		root, ok := get(v.(map[string]any), "schema", "openAPIV3Schema").(map[string]any)
		if !ok {
			return fmt.Errorf("version without openAPIV3Schema")
		}
		if err := patch(root); err != nil {
			return err
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	// The YAML encoder sorts keys, as controller-gen's does, so unpatched
	// parts stay byte-identical. Decoding strictly proves the result is
	// still a well-formed CRD.
	if err := yaml.UnmarshalStrict(out, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return fmt.Errorf("patched CRD does not decode: %w", err)
	}
	out = append([]byte("---\n"), out...)
	if bytes.Equal(out, raw) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

func patchNodePool(root schema) error {
	spec, err := props(root, "spec", "template", "spec")
	if err != nil {
		return err
	}
	if err := patchTaints(spec); err != nil {
		return err
	}
	// The NodePool forbids karpenter.sh/nodepool as a requirement key while
	// the NodeClaim (sharing the Go type) allows it, so the marker sits on
	// the requirement item. Upstream states the rule on the key itself, and
	// the API server then shows the key's value in the error: move it there.
	item, err := props(spec, "requirements")
	if err != nil {
		return err
	}
	const itemRule = `self.key != "karpenter.sh/nodepool"`
	var kept []any
	for _, v := range rules(item) {
		if v["rule"] != itemRule {
			kept = append(kept, v)
		}
	}
	setRules(item, kept)
	key, err := props(item, "key")
	if err != nil {
		return err
	}
	keyRule := map[string]any{"message": `label "karpenter.sh/nodepool" is restricted`, "rule": `self != "karpenter.sh/nodepool"`}
	var out []any
	present := false
	for _, v := range rules(key) {
		present = present || v["rule"] == keyRule["rule"]
	}
	if !present {
		inserted := false
		for _, v := range rules(key) {
			out = append(out, v)
			if v["message"] == `label domain "karpenter.sh" is restricted` {
				out = append(out, keyRule)
				inserted = true
			}
		}
		if !inserted {
			out = append(out, keyRule)
		}
		setRules(key, out)
	}
	return nil
}

func patchNodeClaim(root schema) error {
	spec, err := props(root, "spec")
	if err != nil {
		return err
	}
	return patchTaints(spec)
}

// patchTaints adds upstream's key, value and effect validation to the
// corev1.Taint items of taints and startupTaints.
func patchTaints(spec schema) error {
	for _, field := range []string{"taints", "startupTaints"} {
		item, err := props(spec, field)
		if err != nil {
			return err
		}
		key, err := props(item, "key")
		if err != nil {
			return err
		}
		value, err := props(item, "value")
		if err != nil {
			return err
		}
		effect, err := props(item, "effect")
		if err != nil {
			return err
		}
		key["minLength"] = 1
		key["pattern"] = qualifiedName
		value["pattern"] = qualifiedName
		effect["enum"] = []any{"NoSchedule", "PreferNoSchedule", "NoExecute"}
	}
	return nil
}

// props descends through named properties, stepping into array items where
// a property is a list, and returns the schema reached.
func props(s schema, path ...string) (schema, error) {
	cur := s
	for _, p := range path {
		next, ok := get(cur, "properties", p).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("schema has no property %q", p)
		}
		if items, ok := next["items"].(map[string]any); ok {
			next = items
		}
		cur = next
	}
	return cur, nil
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func rules(s schema) []map[string]any {
	var out []map[string]any
	list, _ := s["x-kubernetes-validations"].([]any)
	for _, v := range list {
		if m, ok := v.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func setRules(s schema, r []any) {
	if len(r) == 0 {
		delete(s, "x-kubernetes-validations")
		return
	}
	s["x-kubernetes-validations"] = r
}
