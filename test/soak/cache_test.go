package soak_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	cpmetrics "github.com/karpenter-go/karpenter/pkg/cloudprovider/metrics"
	"github.com/karpenter-go/karpenter/pkg/controllers"
	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/anchors"
	"github.com/karpenter-go/karpenter/test/cachecheck"
	"github.com/karpenter-go/karpenter/test/controlplane"
	"github.com/karpenter-go/karpenter/test/soak"
)

// TestSoakKeepsTheCacheIntact runs the soak's minute (provisioning,
// consolidation, drift and the termination of the nodes they replace)
// with our controller in the test's process, and checks every few seconds
// and at the end that nothing wrote into the informer cache's pods, Nodes,
// NodeClaims, NodePools and DaemonSets: the cluster state and the
// snapshots hand out the cache's own objects, not copies.
func TestSoakKeepsTheCacheIntact(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ctrl, findings := inProcess(t, 3*time.Second)
	res, err := soak.Run(ctx, soak.Config{
		Nodes: 20, Pods: 200, Duration: time.Minute, Step: 15 * time.Second, Sample: 5 * time.Second,
		BuildTimeout: 3 * time.Minute, SettleTimeout: 3 * time.Minute, Logf: t.Logf,
	}, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(soak.Summary(res))
	if res.BuildUp == 0 {
		t.Errorf("the build-up did not bind every pod within %s", res.Config.BuildTimeout)
	}
	// Consolidation and drift evict pods through the nodes they terminate.
	if res.Evictions == 0 {
		t.Error("no pod was evicted: the soak disrupted no node")
	}
	checks, found := findings()
	t.Logf("%d cache checks", checks)
	if checks < 10 {
		t.Errorf("only %d cache checks ran", checks)
	}
	// A write repeated on every read is found at every check: each
	// object is reported once, the first 20 of them.
	seen := map[string]bool{}
	for _, f := range found {
		object, _, _ := strings.Cut(f, "\n")
		if seen[object] {
			continue
		}
		if seen[object] = true; len(seen) <= 20 {
			t.Error(f)
		}
	}
	if len(seen) > 20 {
		t.Errorf("%d objects modified in the cache in all", len(seen))
	}
}

// inProcess is our controller (the kwokonly build's program, with the
// upstream-kwok catalog) run in this process, so that a cachecheck.Detector
// reads its manager's cache: every interval it checks what the cache held
// at the last check and records it again. findings are the checks run and
// what they found, once the controller stopped.
func inProcess(t *testing.T, interval time.Duration) (ctrl soak.Controller, findings func() (int, []string)) {
	var (
		mu     sync.Mutex
		checks int
		found  []string
		stop   func()
	)
	logPath := filepath.Join(t.TempDir(), "controller.log")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("controller log (tail):\n%s", tail(string(b), 6000))
			}
		}
	})
	start := func(_ *controlplane.ControlPlane, kubeconfig string) (int, int, error) {
		ports, err := anchors.FreePorts()
		if err != nil {
			return 0, 0, err
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return 0, 0, fmt.Errorf("loading %s: %w", kubeconfig, err)
		}
		opts := options.New()
		fs := flag.NewFlagSet("controller", flag.ContinueOnError)
		opts.AddFlags(fs)
		if err := opts.Parse(fs, func(string) (string, bool) { return "", false },
			"--metrics-port="+strconv.Itoa(ports.Metrics), "--health-probe-port="+strconv.Itoa(ports.Health),
			"--leader-election-namespace="+leaseNamespace, "--log-output-paths="+logPath,
			"--consolidation-algorithm=upstream"); err != nil {
			return 0, 0, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		op, err := operator.New(ctx, cfg, opts)
		if err != nil {
			cancel()
			return 0, 0, fmt.Errorf("building operator: %w", err)
		}
		ctx = op.Context(ctx)
		unavailable := cloudprovider.NewUnavailableOfferings(op.Clock, 0)
		cloud, err := kwok.New(ctx, op.Client, kwok.Options{Catalog: kwok.CatalogUpstreamKWOK, Unavailable: unavailable.IsUnavailable})
		if err != nil {
			cancel()
			return 0, 0, fmt.Errorf("building kwok cloud provider: %w", err)
		}
		if _, err := controllers.Register(ctx, controllers.Runtime{
			Manager: op.Manager, Client: op.Client, Clock: op.Clock, EventRecorder: op.EventRecorder, Options: op.Options,
		}, controllers.Shared{
			CloudProvider: cpmetrics.Decorate(cloud), Unavailable: unavailable, WellKnownLabels: kwok.WellKnownLabels(),
		}); err != nil {
			cancel()
			return 0, 0, err
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := op.Start(ctx); err != nil {
				t.Errorf("controller: %v", err)
			}
		}()
		d := cachecheck.New(op.Manager.GetCache(),
			&corev1.Pod{}, &corev1.Node{}, &v1.NodeClaim{}, &v1.NodePool{}, &appsv1.DaemonSet{})
		checkCtx, stopChecks := context.WithCancel(ctx)
		check := func(ctx context.Context) {
			f, err := d.Check(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				found = append(found, fmt.Sprintf("checking the cache: %v", err))
				return
			}
			checks++
			found = append(found, f...)
		}
		go func() {
			defer wg.Done()
			// GetInformer blocks until the manager started the cache and
			// it synced.
			if err := d.Record(checkCtx); err != nil {
				return
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-checkCtx.Done():
					return
				case <-tick.C:
				}
				check(checkCtx)
				if err := d.Record(checkCtx); err != nil && checkCtx.Err() == nil {
					t.Errorf("recording the cache: %v", err)
				}
			}
		}()
		stop = func() {
			stopChecks()
			// The last check, with the controller still running: its
			// readers may hold the objects the last Record saw.
			check(ctx)
			cancel()
			wg.Wait()
		}
		return os.Getpid(), ports.Metrics, nil
	}
	ctrl = soak.Controller{Name: "ours-in-process", Start: start, Stop: func() {
		if stop != nil {
			stop()
		}
	}}
	return ctrl, func() (int, []string) {
		mu.Lock()
		defer mu.Unlock()
		return checks, append([]string(nil), found...)
	}
}
