package operator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
