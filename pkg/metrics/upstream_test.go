package metrics

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpstreamReferenceIsDocumented checks that every metric upstream's
// metrics reference lists under the karpenter_, operator_ and aws_sdk_go_
// prefixes is in docs/metrics.md, which TestReference keeps equal to what
// the controller registers. The other prefixes (controller_runtime_,
// workqueue_, client_go_, leader_election_) come from controller-runtime.
func TestUpstreamReferenceIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(referencePath)
	require.NoError(t, err)
	names := readNames(t, filepath.Join("testdata", "upstream-reference.txt"))
	require.Greater(t, len(names), 100, "the upstream reference list looks truncated")
	checked := 0
	for _, name := range names {
		if !strings.HasPrefix(name, Namespace+"_") && !strings.HasPrefix(name, OperatorNamespace+"_") && !strings.HasPrefix(name, "aws_sdk_go_") {
			continue
		}
		checked++
		assert.Containsf(t, string(doc), "| `"+name+"` |", "%s (in upstream's metrics reference) is not in docs/metrics.md", name)
	}
	assert.Greater(t, checked, 100)
}

// readNames reads a testdata list: one name a line, '#' comments and
// '[section]' headers skipped.
func readNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		out = append(out, line)
	}
	require.NoError(t, s.Err())
	return out
}
