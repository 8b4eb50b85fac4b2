package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// heapProfile saves the controller's heap profile to path.
func heapProfile(ctx context.Context, port int, path string) error {
	return savePprof(ctx, port, "heap", path)
}

// cpuProfile starts a CPU profile of the controller over d, saved to path
// when it ends; the returned wait blocks until then and says whether it
// was saved. The profile is taken by the controller's own pprof handler,
// so it costs the controller what profiling costs and nothing else.
func cpuProfile(ctx context.Context, port int, d time.Duration, path string) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		done <- savePprof(ctx, port, "profile?seconds="+strconv.Itoa(int(d.Seconds())), path)
	}()
	return func() error { return <-done }
}

// savePprof writes /debug/pprof/<what> from the controller's metrics port
// to path.
func savePprof(ctx context.Context, port int, what, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/debug/pprof/"+what, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/%s: %s", what, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading /debug/pprof/%s: %w", what, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}
