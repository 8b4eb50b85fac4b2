package operator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/operator/options"
)

func TestLogger(t *testing.T) {
	tests := []struct {
		level     string
		wantLines []string // messages that must appear, in order
	}{
		{"debug", []string{"debug line", "info line", "error line"}},
		{"info", []string{"info line", "error line"}},
		{"error", []string{"error line"}},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.json")
			o := options.New()
			o.LogLevel = tt.level
			o.LogOutputPaths = path
			logger, err := NewLogger(o)
			require.NoError(t, err)
			l := logger.WithValues("controller", "provisioner")
			l.V(1).Info("debug line")
			l.Info("info line", "NodeClaim", map[string]string{"name": "default-sfpsl"}, "duration", 100*time.Millisecond)
			l.Error(os.ErrNotExist, "error line")

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var entry map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
				got = append(got, entry["message"].(string))
				assert.Equal(t, Commit, entry["commit"])
				assert.Equal(t, "provisioner", entry["controller"])
				assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, entry["time"])
				assert.Contains(t, []string{"DEBUG", "INFO", "ERROR"}, entry["level"])
				if entry["message"] == "info line" {
					assert.Equal(t, "100ms", entry["duration"])
					assert.Equal(t, map[string]any{"name": "default-sfpsl"}, entry["NodeClaim"])
				}
				if entry["message"] == "error line" {
					assert.Equal(t, "file does not exist", entry["error"])
				}
			}
			assert.Equal(t, tt.wantLines, got)
		})
	}
	_, err := NewLogger(&options.Options{LogLevel: "warn"})
	assert.Error(t, err)
}

// TestLoggerValuesAreLazy checks that WithValues encodes nothing until a line
// is written (controller-runtime adds values to every reconcile's logger,
// and most reconciles write no line) and that the lines are the ones the
// zap logger writes with its values encoded at once.
func TestLoggerValuesAreLazy(t *testing.T) {
	dir := t.TempDir()
	build := func(name string, lazy bool) (logr.Logger, string) {
		path := filepath.Join(dir, name)
		o := options.New()
		o.LogLevel = "debug"
		o.LogOutputPaths = path
		logger, err := NewLogger(o)
		require.NoError(t, err)
		if !lazy {
			logger = logr.New(logger.GetSink().(lazySink).base)
		}
		return logger, path
	}
	write := func(l logr.Logger) {
		base := l.WithName("controller").WithValues("controller", "provisioner", "count", 3)
		child := base.WithValues("NodeClaim", map[string]string{"name": "default-abc"}).WithName("launch")
		sibling := base.WithValues("Node", "n-1")
		child.Info("launched", "duration", 100*time.Millisecond)
		sibling.V(1).Info("sibling line")
		base.Error(os.ErrNotExist, "error line", "attempt", 2)
		l.Info("bare line")
	}
	lines := func(path string) []map[string]any {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var entry map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
			delete(entry, "time")
			out = append(out, entry)
		}
		return out
	}
	lazy, lazyPath := build("lazy.json", true)
	eager, eagerPath := build("eager.json", false)
	write(lazy)
	write(eager)
	assert.Equal(t, lines(eagerPath), lines(lazyPath))

	// Bytes per WithValues: zap's encoder clone takes a fresh 1 KiB buffer.
	withValues := func(l logr.Logger) float64 {
		const n = 1000
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			_ = l.WithValues("controller", "nodeclaim.lifecycle", "NodeClaim", "default-abc", "reconcileID", "0f3c")
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / n
	}
	lazyBytes, eagerBytes := withValues(lazy), withValues(eager)
	t.Logf("bytes per WithValues: lazy %.0f, zap %.0f", lazyBytes, eagerBytes)
	assert.Less(t, lazyBytes, 300.0)
}
