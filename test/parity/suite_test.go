package parity_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// controllerBin is the controller binary the tests run, built once.
var controllerBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "karpenter-parity-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctrllog.SetLogger(logr.Discard())
	controllerBin = filepath.Join(dir, "controller")
	build := exec.Command("go", "build", "-o", controllerBin, "./cmd/controller")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building controller: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// cluster starts a control plane with the kube-scheduler, the
// controller-manager and kwok for one test; the controller's log tail is
// printed when the test fails.
func cluster(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true})
	require.NoError(t, err, "starting control plane")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(cp.LogPath("controller")); err == nil {
				s := string(b)
				if len(s) > 8000 {
					s = s[len(s)-8000:]
				}
				t.Logf("controller log (tail):\n%s", s)
			}
		}
		cp.Stop()
	})
	return cp
}

// startController runs the controller (kwok provider) with the given
// environment and returns its metrics port.
func startController(t *testing.T, cp *controlplane.ControlPlane, env []string, args ...string) int {
	t.Helper()
	metricsPort, err := controlplane.FreePort()
	require.NoError(t, err)
	probePort, err := controlplane.FreePort()
	require.NoError(t, err)
	_, err = cp.SpawnEnv(controllerBin, "controller", env, append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-port=" + strconv.Itoa(metricsPort),
		"--health-probe-port=" + strconv.Itoa(probePort),
		"--leader-election-namespace=kube-system",
	}, args...)...)
	require.NoError(t, err, "starting the controller")
	return metricsPort
}

// apply creates or updates the manifests.
func apply(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, manifests ...string) {
	t.Helper()
	for _, m := range manifests {
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(m)), m)
	}
}

// applyExample applies a file of examples/.
func applyExample(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, file string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	require.NoError(t, err)
	require.NoError(t, controlplane.Apply(ctx, cp.Client, raw))
}

// seriesNames scrapes the controller's /metrics and returns the name of
// every sample it serves (a histogram's as name_bucket, name_sum and
// name_count).
func seriesNames(ctx context.Context, port int) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out, sc.Err()
}

// nodePool is a NodePool on the kwok provider's default KWOKNodeClass.
type nodePool struct {
	name string
	// instanceTypes, when set, are the only types it may launch.
	instanceTypes []string
	// consolidateAfter is "Never" unless set.
	consolidateAfter string
	// cpuLimit, when set, is spec.limits.cpu.
	cpuLimit string
}

func (p nodePool) yaml() string {
	after := p.consolidateAfter
	if after == "" {
		after = "Never"
	}
	limits := ""
	if p.cpuLimit != "" {
		limits = fmt.Sprintf("  limits:\n    cpu: %q\n", p.cpuLimit)
	}
	types := ""
	if len(p.instanceTypes) > 0 {
		types = fmt.Sprintf("        - key: node.kubernetes.io/instance-type\n          operator: In\n          values: [%s]\n", strings.Join(p.instanceTypes, ", "))
	}
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    metadata:
      labels:
        parity/pool: %[1]s
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
%[2]s      nodeClassRef:
        group: karpenter.kwok.sh
        kind: KWOKNodeClass
        name: default
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: %[3]s
    budgets:
      - nodes: "100%%"
%[4]s`, p.name, types, after, limits)
}

// deployment is a Deployment of pause pods on one pool.
type deployment struct {
	name, pool string
	replicas   int
	cpu        string
	// extra is appended to the container's resources.requests (YAML lines
	// indented for it).
	extra string
}

func (d deployment) yaml() string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[3]d
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      nodeSelector:
        parity/pool: %[2]s
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: pause
          resources:
            requests:
              cpu: %[4]s
              memory: 128Mi
%[5]s`, d.name, d.pool, d.replicas, d.cpu, d.extra)
}

// daemonSet runs a small pause pod on every node of a pool.
func daemonSet(name, pool string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %[1]s
  namespace: default
spec:
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      nodeSelector:
        parity/pool: %[2]s
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: pause
          resources:
            requests:
              cpu: 50m
              memory: 32Mi
            limits:
              cpu: 100m
              memory: 64Mi
`, name, pool)
}
