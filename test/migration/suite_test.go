// Package migration_test switches clusters between upstream Karpenter's
// controllers (test/anchors) and ours, both ways, and checks that the
// switch leaves the fleet alone. It is its own package so that `go test
// ./...` runs it beside test/e2e.
package migration_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/test/anchors"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// ours is our controller binary, built once per run; upstream are the
// upstream controllers `make tools` built.
var (
	ours     string
	upstream anchors.Binaries
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "karpenter-migration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctrllog.SetLogger(logr.Discard())
	if upstream, err = anchors.Find(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ours = filepath.Join(dir, "controller")
	build := exec.Command("go", "build", "-o", ours, "./cmd/controller")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building controller: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// cluster starts a control plane with kwok as the kubelets.
func cluster(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(cp.Stop)
	return cp
}

// running is a started controller: its process and metrics port.
type running struct {
	name string
	pid  int
	port int
}

func startUpstreamKWOK(t *testing.T, cp *controlplane.ControlPlane, name string) running {
	t.Helper()
	ports, err := anchors.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := anchors.StartKWOK(cp, upstream, name, ports)
	if err != nil {
		t.Fatalf("starting upstream's kwok controller: %v", err)
	}
	return running{name: name, pid: pid, port: ports.Metrics}
}

func startOurs(t *testing.T, cp *controlplane.ControlPlane, name string, extra ...string) running {
	t.Helper()
	ports, err := anchors.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-port=" + strconv.Itoa(ports.Metrics),
		"--health-probe-port=" + strconv.Itoa(ports.Health),
		"--leader-election-namespace=kube-system",
	}, extra...)
	pid, err := cp.Spawn(ours, name, args...)
	if err != nil {
		t.Fatalf("starting our controller: %v", err)
	}
	return running{name: name, pid: pid, port: ports.Metrics}
}

// passCount is how many disruption passes the controller behind port has
// made, as both implementations publish it: every pass evaluates emptiness
// first, so the count of its decision_evaluation_duration_seconds histogram
// counts passes. -1 when the metrics cannot be read.
func passCount(ctx context.Context, port int) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return -1
	}
	f, ok := families["karpenter_voluntary_disruption_decision_evaluation_duration_seconds"]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "consolidation_type" && l.GetValue() == "empty" && m.GetHistogram() != nil {
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

// quietFor asserts that broken() stays "" for at least d and while the
// controller behind port makes passes more disruption passes, so that a
// controller that makes no passes fails instead of passing vacuously.
func quietFor(t *testing.T, ctx context.Context, port, passes int, d, timeout time.Duration, broken func() string) {
	t.Helper()
	start, begun := passCount(ctx, port), time.Now()
	for {
		if msg := broken(); msg != "" {
			t.Fatalf("after %s: %s", time.Since(begun).Round(time.Second), msg)
		}
		now := passCount(ctx, port)
		if start < 0 {
			start = now
		}
		if start >= 0 && now >= start+float64(passes)+1 && time.Since(begun) >= d {
			t.Logf("quiet for %s and %v disruption passes", time.Since(begun).Round(time.Second), now-start)
			return
		}
		if time.Since(begun) > timeout {
			t.Fatalf("the controller made %v of %d disruption passes in %s; the window proves nothing", now-start, passes+1, timeout)
		}
		time.Sleep(time.Second)
	}
}
