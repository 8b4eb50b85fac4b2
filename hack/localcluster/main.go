// Command localcluster is what `make run` starts: a real control plane on
// loopback (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok as the kubelets) with this project's CRDs installed and the manifests
// of the examples directories applied, and the controller with the provider
// --provider names. For aws it also starts the local AWS (moto behind the
// awslocal front), seeds the cluster's subnets, security group, node role and
// EKS record, and boots each instance into a Node from its user data. It runs
// until interrupted and then stops every process it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	examples := flag.String("examples", "examples", "comma-separated directories of manifests to apply in file-name order; a later directory's file replaces an earlier one of the same name")
	provider := flag.String("provider", "aws", "the controller's cloud provider: aws (the local AWS; needs moto_server) or kwok (nothing else needed)")
	dir := flag.String("dir", ".cache/local", "working directory for data, logs and the kubeconfig (recreated on start)")
	controller := flag.String("controller", "", "path to the controller binary to run against the cluster; empty runs none")
	live := flag.Duration("watch", 2*time.Second, "how often to refresh the live view of NodeClaims, nodes, pods and cost; 0 disables it")
	iamPolicy := flag.String("iam", "shipped", "the IAM policy the controller's calls to the local AWS are authorized against: shipped (docs/iam/cloudformation.yaml), upstream (upstream Karpenter's controller policy) or root (the account's root key: no IAM, throttling or eventual consistency)")
	iamAuditOnly := flag.Bool("iam-audit-only", false, "record the calls the --iam policy denies (GET /_awslocal/iam/denials on the local AWS) instead of refusing them")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *provider != "aws" && *provider != "kwok" {
		return fmt.Errorf("unknown --provider %q (aws or kwok)", *provider)
	}

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

	var local *awslocal.Local
	if *provider == "aws" {
		if local, err = startAWS(startCtx, ctx, cp, filepath.Join(abs, "aws")); err != nil {
			return err
		}
		defer local.Stop()
	}

	files, err := exampleFiles(strings.Split(*examples, ","))
	if err != nil {
		return err
	}
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
		args := []string{"--kubeconfig=" + cp.KubeconfigPath, "--cloud-provider=" + *provider}
		var env []string
		if local != nil {
			awsEnv, err := controllerEnv(local, *iamPolicy, *iamAuditOnly)
			if err != nil {
				return err
			}
			env = append(awsEnv, "CLUSTER_NAME="+clusterName, "CLUSTER_ENDPOINT="+cp.Config.Host)
		}
		if _, err := cp.SpawnEnv(*controller, "controller", env, args...); err != nil {
			return fmt.Errorf("starting controller: %w", err)
		}
		fmt.Printf("started controller %s with the %s provider (log: %s)\n", *controller, *provider, cp.LogPath("controller"))
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
		go watch(ctx, cp.Client, os.Stdout, *live, nodePrice(local))
	}
	<-ctx.Done()
	fmt.Println("\nstopping…")
	return nil
}

// clusterName is the examples' discovery tag value and the controller's
// CLUSTER_NAME.
const clusterName = "local"

// startAWS starts the local AWS, seeds the cluster's AWS resources and boots
// running instances into Nodes of cp until runCtx ends.
func startAWS(ctx, runCtx context.Context, cp *controlplane.ControlPlane, dir string) (*awslocal.Local, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	local, err := awslocal.Start(ctx, awslocal.Options{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("%w\n(`make run PROVIDER=kwok` runs the simulated provider and needs no moto)", err)
	}
	// The control plane's service CIDR (test/controlplane), which EKS
	// DescribeCluster reports and AL2023 nodes bootstrap with.
	if _, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: clusterName, ServiceCIDR: "10.0.0.0/24"}); err != nil {
		local.Stop()
		return nil, err
	}
	local.Boot(runCtx, cp.Client, awslocal.BootOptions{ClusterName: clusterName})
	fmt.Printf("started the local AWS at %s (moto log: %s)\n", local.Endpoint(), filepath.Join(dir, "moto.log"))
	return local, nil
}

// controllerEnv is the controller's AWS environment: the credentials of an
// IAM principal holding policy (or the root key), so its calls are
// authorized, throttled and see eventual consistency as on a real account.
func controllerEnv(local *awslocal.Local, policy string, auditOnly bool) ([]string, error) {
	vars := awslocal.PolicyVars{ClusterName: clusterName}
	var pols []awslocal.Policy
	var err error
	switch policy {
	case "root":
		return local.Env(), nil
	case "upstream":
		pols, err = awslocal.UpstreamControllerPolicies(vars)
	case "shipped":
		var b []byte
		if b, err = os.ReadFile(filepath.Join("docs", "iam", "cloudformation.yaml")); err == nil {
			pols, err = awslocal.CloudFormationPolicies(b, vars)
		}
	default:
		return nil, fmt.Errorf("unknown --iam %q (shipped, upstream or root)", policy)
	}
	if err != nil {
		return nil, fmt.Errorf("the controller's %s IAM policy: %w", policy, err)
	}
	creds, err := local.AddPrincipal(awslocal.Principal{Name: "karpenter-controller", Policies: pols, AuditOnly: auditOnly})
	if err != nil {
		return nil, err
	}
	fmt.Printf("the controller signs its AWS calls as karpenter-controller under the %s IAM policy (audit only: %t)\n", policy, auditOnly)
	return local.EnvWith(creds), nil
}

// exampleFiles are the YAML files of dirs in file-name order; a file of a
// later directory replaces the one of the same name before it (examples/aws
// overrides the kwok workload of examples/).
func exampleFiles(dirs []string) ([]string, error) {
	byName := map[string]string{}
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.yaml"))
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", d, err)
		}
		for _, f := range files {
			byName[filepath.Base(f)] = f
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out, nil
}
