// Command localcluster is what `make run` starts: a real control plane on
// loopback (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok as the kubelets) with this project's CRDs installed and the manifests
// of an examples directory applied. It runs until interrupted and then stops
// every process it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	examples := flag.String("examples", "examples", "directory of manifests to apply, in file-name order")
	dir := flag.String("dir", ".cache/local", "working directory for data, logs and the kubeconfig (recreated on start)")
	controller := flag.String("controller", "", "path to the controller binary to run against the cluster; empty runs none")
	live := flag.Duration("watch", 2*time.Second, "how often to refresh the live view of NodeClaims, nodes, pods and cost; 0 disables it")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", *dir, err)
	}
	// A previous run's etcd data would resurrect its objects; start clean.
	if err := os.RemoveAll(abs); err != nil {
		return fmt.Errorf("cleaning %s: %w", abs, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", abs, err)
	}

	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := controlplane.Start(startCtx, controlplane.Options{
		Dir:               abs,
		ControllerManager: true,
		Scheduler:         true,
		Kwok:              true,
	})
	if err != nil {
		return err
	}
	defer cp.Stop()

	files, err := filepath.Glob(filepath.Join(*examples, "*.yaml"))
	if err != nil {
		return fmt.Errorf("listing %s: %w", *examples, err)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		if err := controlplane.Apply(startCtx, cp.Client, data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		fmt.Printf("applied %s\n", f)
	}

	// `make tools` builds kubectl beside the control plane; the Makefile
	// exports where.
	if *controller != "" {
		// The controller reads the same kubeconfig a user would; leader
		// election stays on, as in a real deployment.
		if _, err := cp.Spawn(*controller, "controller", "--kubeconfig="+cp.KubeconfigPath); err != nil {
			return fmt.Errorf("starting controller: %w", err)
		}
		fmt.Printf("started controller %s (log: %s)\n", *controller, cp.LogPath("controller"))
	}

	kubectl := "kubectl"
	if bin := os.Getenv("KARPENTER_TOOLS_DIR"); bin != "" {
		kubectl = filepath.Join(bin, "kubectl")
	}
	fmt.Printf(`
local cluster ready in %s
  kubeconfig: %s
  logs:       %s

In another terminal:
  export KUBECONFIG=%s
  %s get nodepools,ec2nodeclasses,nodeclaims
  %s scale deployment/inflate --replicas=8

Press Ctrl-C to stop every process.
`, time.Since(start).Round(100*time.Millisecond), cp.KubeconfigPath, filepath.Join(cp.Dir, "logs"),
		cp.KubeconfigPath, kubectl, kubectl)

	if *live > 0 {
		go watch(ctx, cp.Client, os.Stdout, *live)
	}
	<-ctx.Done()
	fmt.Println("\nstopping…")
	return nil
}
