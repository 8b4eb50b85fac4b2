// Command gen writes the kwok provider's built-in catalogs
// (pkg/providers/kwok/catalogs/*.json) from the formulas in package kwok.
// Run it from the repository root: go run ./pkg/providers/kwok/gen
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

func main() {
	dir := flag.String("dir", "pkg/providers/kwok/catalogs", "directory to write the catalogs into")
	flag.Parse()
	for name, entries := range map[string][]kwok.CatalogEntry{
		kwok.CatalogDefault:      kwok.DefaultCatalog(),
		kwok.CatalogUpstreamKWOK: kwok.UpstreamKWOKCatalog(),
	} {
		raw, err := kwok.MarshalCatalog(entries)
		if err == nil {
			err = os.WriteFile(filepath.Join(*dir, name+".json"), raw, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "writing catalog %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
