package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// controllerBin is the controller binary every e2e test runs, built once
// per package run so the tests exercise exactly what ships.
var controllerBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "karpenter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// client.New logs through controller-runtime's global logger; without
	// one it prints a warning with a stack trace into every test log.
	ctrllog.SetLogger(logr.Discard())
	controllerBin = filepath.Join(dir, "controller")
	build := exec.Command("go", "build", "-o", controllerBin, "./cmd/controller")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building controller: %v\n%s", err, out)
		return 1
	}
	if code := m.Run(); code != 0 {
		return code
	}
	return proveShippedPolicyRules()
}

// cluster starts a full control plane (API server, controller-manager,
// scheduler, kwok) for one test.
func cluster(t testing.TB) *controlplane.ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(cp.LogPath("controller")); err == nil {
				t.Logf("controller log (tail):\n%s", tail(string(b), 6000))
				if dir := os.Getenv("E2E_KEEP_LOGS"); dir != "" {
					_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".controller.log"), b, 0o644)
				}
			}
		}
		cp.Stop()
	})
	return cp
}

// mutationDetector turns client-go's cache mutation detector on in the
// controllers the tests start. The controller hands the informers' objects
// out without copying them (UnsafeDisableDeepCopy), so one write into them
// would change what every reader sees; the detector keeps a deep copy of
// each object an informer stores, compares the two every second and panics
// the controller on a difference, which fails the test with the
// controller's log. Benchmarks run without it: it copies and compares every
// cached object.
const mutationDetector = "KUBE_CACHE_MUTATION_DETECTOR=true"

// startController runs the controller binary against cp. Each replica gets
// free metrics and probe ports so several can run at once, on this machine
// and beside other test binaries.
func startController(t *testing.T, cp *controlplane.ControlPlane, name string, extra ...string) int {
	t.Helper()
	args := append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-port=" + strconv.Itoa(freePort(t)),
		"--health-probe-port=" + strconv.Itoa(freePort(t)),
		"--leader-election-namespace=kube-system",
	}, extra...)
	pid, err := cp.SpawnEnv(controllerBin, name, []string{mutationDetector}, args...)
	if err != nil {
		t.Fatalf("starting controller: %v", err)
	}
	return pid
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
