package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// priceList is the shared price list the table is generated from; a
// checkout without the shared directory uses the copy the local AWS serves.
func priceList(t *testing.T) string {
	for _, p := range []string{
		"../../../../../../shared/reference/aws/on-demand-prices-us-east-1.tsv",
		"../../../../../test/awslocal/testdata/on-demand-prices-us-east-1.tsv",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no on-demand price list found")
	return ""
}

// TestGeneratedTableIsCurrent re-runs the generator into a temporary file
// and compares it with the committed table: a price list edited without
// `go generate` fails here.
func TestGeneratedTableIsCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "zz_generated.pricing.go")
	require.NoError(t, run(priceList(t), out))
	fresh, err := os.ReadFile(out)
	require.NoError(t, err)
	committed, err := os.ReadFile("../zz_generated.pricing.go")
	require.NoError(t, err)
	require.True(t, bytes.Equal(fresh, committed), "zz_generated.pricing.go is stale: run go generate ./pkg/providers/aws/pricing")
}

func TestGenerateRejectsBadLists(t *testing.T) {
	for name, list := range map[string]string{
		"empty":          "# nothing\n",
		"three columns":  "m5.large\t0.096\textra\n",
		"not a number":   "m5.large\tcheap\n",
		"zero price":     "m5.large\t0\n",
		"duplicate type": "m5.large\t0.096\nm5.large\t0.097\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := generate(strings.NewReader(list), "list.tsv")
			require.Error(t, err)
		})
	}
}

func TestGenerateSortsAndKeepsNotes(t *testing.T) {
	src, err := generate(strings.NewReader("# read today\nm5.large\t0.096000\na1.large\t0.051\n"), "list.tsv")
	require.NoError(t, err)
	s := string(src)
	require.Contains(t, s, "DO NOT EDIT")
	require.Contains(t, s, "read today")
	require.Less(t, strings.Index(s, `"a1.large"`), strings.Index(s, `"m5.large"`))
	require.Contains(t, s, `"m5.large": 0.096,`)
}
