// Package layers holds the test that keeps the product's imports running one
// way. It reads the import graph of the module's non-test files (tests may
// reach across layers to build their fixtures) and fails on every import
// that crosses a boundary, naming the importer, the import and the rule.
package layers

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/karpenter-go/karpenter/"

// layer is a rank in the product: a package may import packages of its own
// layer or of lower ones, never of a higher one.
type layer struct {
	name string
	rank int
}

var (
	apis          = layer{"apis", 0}
	leaf          = layer{"leaf", 0}
	scheduling    = layer{"scheduling", 1}
	cloudprovider = layer{"cloudprovider", 2}
	snapshot      = layer{"snapshot", 3}
	disruption    = layer{"disruption", 4}
	controllers   = layer{"controllers", 5}
	providers     = layer{"providers", 6}
	top           = layer{"operator/cli/cmd", 7}
)

// layers maps package path prefixes (relative to the module) to layers; the
// longest matching prefix wins. pkg/metrics and pkg/operator/options are
// leaves: metric definitions and flag parsing, which every layer reads and
// which import nothing of ours.
var layers = map[string]layer{
	"pkg/apis":             apis,
	"pkg/metrics":          leaf,
	"pkg/operator/options": leaf,
	"pkg/scheduling":       scheduling,
	"pkg/cloudprovider":    cloudprovider,
	"pkg/snapshot":         snapshot,
	"pkg/disruption":       disruption,
	"pkg/state":            controllers,
	"pkg/controllers":      controllers,
	"pkg/providers":        providers,
	"pkg/operator":         top,
	"pkg/cli":              top,
	"cmd":                  top,
}

// harness packages build benchmarks and tests; they may import anything and
// no product package may import them.
func harness(pkg string) bool {
	return strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "hack/") ||
		strings.HasSuffix(pkg, "/benchmark") || strings.Contains(pkg, "/benchmark/") ||
		strings.Contains(pkg, "/internal/crdtest")
}

func layerOf(pkg string) (layer, bool) {
	best, found, bestLen := layer{}, false, -1
	for prefix, l := range layers {
		if (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > bestLen {
			best, found, bestLen = l, true, len(prefix)
		}
	}
	return best, found
}

// providerAPIs are the API groups that belong to one provider: only that
// provider (and the layer above providers, which wires and renders them)
// may import them. The core names NodeClass kinds only through
// CloudProvider.GetSupportedNodeClasses.
var providerAPIs = map[string]string{
	"pkg/apis/aws":  "pkg/providers/aws",
	"pkg/apis/kwok": "pkg/providers/kwok",
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// controllerOf is the controller a package under pkg/controllers belongs to
// ("" for the wiring package pkg/controllers itself and for shared helpers
// in an internal directory, which Go lets only their parent's subtree
// import).
func controllerOf(pkg string) string {
	if pkg == "pkg/controllers" || strings.Contains(pkg+"/", "/internal/") || !under(pkg, "pkg/controllers") {
		return ""
	}
	return pkg
}

// providerOf is the provider a package belongs to ("" outside pkg/providers).
func providerOf(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, "pkg/providers/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return "pkg/providers/" + name
}

// violation says why importer may not import imported ("" when it may).
func violation(importer, imported string) string {
	if harness(importer) {
		return ""
	}
	if harness(imported) {
		return "imports a test or benchmark harness"
	}
	from, ok := layerOf(importer)
	if !ok {
		return ""
	}
	to, ok := layerOf(imported)
	if !ok {
		return ""
	}
	if to.rank > from.rank {
		return fmt.Sprintf("layer %s imports the higher layer %s (apis ← scheduling ← cloudprovider ← snapshot ← disruption ← controllers ← providers ← operator/cli/cmd)", from.name, to.name)
	}
	for api, owner := range providerAPIs {
		if under(imported, api) && from.rank < top.rank && !under(importer, owner) && !under(importer, "pkg/apis") {
			return fmt.Sprintf("imports %s, which only %s may (the core learns NodeClass kinds from GetSupportedNodeClasses)", api, owner)
		}
	}
	if c := controllerOf(importer); c != "" && under(imported, "pkg/controllers") && controllerOf(imported) != "" && !under(imported, c) {
		return "a controller imports another controller's package (share code through pkg/controllers/internal or a lower layer)"
	}
	if under(importer, "pkg/state") && under(imported, "pkg/controllers") {
		return "cluster state imports a controller (controllers read state, not the reverse)"
	}
	if p := providerOf(importer); p != "" {
		if under(imported, "pkg/controllers") {
			return "a provider imports a core controller package (providers use the contract in pkg/cloudprovider)"
		}
		if q := providerOf(imported); q != "" && q != p {
			return "a provider imports another provider"
		}
	}
	if importer == "pkg/disruption" && under(imported, "pkg/disruption") {
		return "pkg/disruption imports a strategy that implements its interface"
	}
	if under(importer, "pkg/controllers") && under(imported, "pkg/disruption/repack") {
		return "a controller names a consolidation strategy (ask pkg/disruption/strategies for one)"
	}
	return ""
}

// imports lists every package of the module with its non-test imports of the
// module's own packages, both relative to the module. It reads the source
// with go/build (build constraints applied as for this platform), so that
// the test cache sees every file it depends on.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	graph := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (hack/tools)
			}
		}
		pkg, err := build.Default.ImportDir(path, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return fmt.Errorf("reading %s: %w", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		graph[rel] = nil
		for _, imp := range pkg.Imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				graph[rel] = append(graph[rel], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(graph) < 50 {
		t.Fatalf("found only %d packages under %s", len(graph), root)
	}
	return graph
}

func TestImportBoundaries(t *testing.T) {
	graph := imports(t)
	var bad []string
	for pkg, deps := range graph {
		if _, ok := layerOf(pkg); !ok && !harness(pkg) && strings.HasPrefix(pkg, "pkg/") {
			bad = append(bad, fmt.Sprintf("%s: in no layer; add its prefix to layers", pkg))
		}
		for _, dep := range deps {
			if why := violation(pkg, dep); why != "" {
				bad = append(bad, fmt.Sprintf("%s → %s: %s", pkg, dep, why))
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// TestRules checks the rules themselves on imports they must refuse and
// allow, so that a rule that stopped matching fails here rather than
// letting the graph drift.
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		importer, imported string
		refused            bool
	}{
		{"pkg/snapshot", "pkg/controllers/nodepool", true},
		{"pkg/snapshot", "pkg/scheduling", false},
		{"pkg/scheduling", "pkg/apis/v1", false},
		{"pkg/scheduling", "pkg/snapshot", true},
		{"pkg/disruption", "pkg/snapshot", false},
		{"pkg/disruption", "pkg/disruption/repack", true},
		{"pkg/disruption/repack", "pkg/disruption", false},
		{"pkg/disruption/strategies", "pkg/disruption/repack", false},
		{"pkg/controllers/disruption", "pkg/disruption/repack", true},
		{"pkg/controllers", "pkg/disruption/strategies", false},
		{"pkg/controllers/provisioning", "pkg/controllers/nodepool/hash", true},
		{"pkg/controllers/provisioning", "pkg/controllers/internal/recovery", false},
		{"pkg/controllers/static/provisioning", "pkg/controllers/static/internal/staticpool", false},
		{"pkg/controllers/static/provisioning", "pkg/controllers/provisioning", true},
		{"pkg/controllers", "pkg/controllers/provisioning", false},
		{"pkg/controllers/nodepool/readiness", "pkg/apis/aws/v1", true},
		{"pkg/providers/kwok", "pkg/apis/aws/v1", true},
		{"pkg/providers/aws/instance", "pkg/apis/aws/v1", false},
		{"pkg/providers/aws/operator", "pkg/controllers/nodeclaim/lifecycle", true},
		{"pkg/providers/aws/cloudprovider", "pkg/cloudprovider", false},
		{"pkg/providers/kwok", "pkg/providers/aws/instance", true},
		{"pkg/cli", "pkg/providers/aws/cloudprovider", false},
		{"pkg/cli", "pkg/apis/aws/v1", false},
		{"pkg/state", "pkg/controllers/provisioning", true},
		{"pkg/state", "pkg/providers/kwok", true},
		{"pkg/disruption/repack", "pkg/disruption/benchmark", true},
		{"pkg/disruption/benchmark", "pkg/providers/kwok", false},
		{"pkg/metrics", "pkg/scheduling", true},
	} {
		if got := violation(tc.importer, tc.imported) != ""; got != tc.refused {
			t.Errorf("%s → %s: refused=%v, want %v", tc.importer, tc.imported, got, tc.refused)
		}
	}
}
