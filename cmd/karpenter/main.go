// Command karpenter is the read-only Karpenter CLI (also usable as the
// kubectl plugin kubectl-karpenter): `status`, `why pod NS/NAME`, `why node
// NAME`, `simulate -f CHANGES.yaml` and `snapshot`. It needs only a
// kubeconfig, or a snapshot file saved earlier with `karpenter snapshot >
// FILE` and passed with --snapshot; EC2NodeClass pools are answered with the
// AWS configuration the SDK's default chain finds (environment, profile,
// instance role).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis"
	"github.com/karpenter-go/karpenter/pkg/cli"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

const usage = `usage: karpenter [flags] COMMAND
  status              NodePools: nodes, usage vs limits, allowed disruptions; NodeClaims not Ready
  why pod NS/NAME     where a pod runs or would run, or each NodePool's refusal
  why node NAME       why the disruption pass keeps (or would disrupt) a node
  simulate -f FILE    what NodePool edits and Deployment replicas in FILE would do: new NodeClaims,
                      drifted nodes, the next disruption commands, evictions, $/h before and after
  snapshot            write the listed objects (JSON, or YAML with -o yaml) to stdout, env values
                      and credential-looking annotations redacted (--redact=false keeps them)
  completion SHELL    a completion script for bash or zsh
flags:
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("karpenter", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	kube := kubeFlags{}
	kube.register(fs)
	redact := fs.Bool("redact", true, "snapshot: replace env values and credential-looking annotations with "+cli.Redacted+" (--redact=false keeps them)")
	snapshotFile := fs.String("snapshot", "", "answer offline from `FILE`, written by karpenter snapshot")
	output := fs.StringP("output", "o", cli.FormatTable, "output format: table, json or yaml")
	catalog := fs.String(kwok.FlagCatalog, kwok.CatalogDefault, "kwok catalog KWOKNodeClass pools launch from (as the controller's)")
	changesFile := fs.StringP("filename", "f", "", "simulate: the NodePools and Deployments (spec.replicas) to apply to the snapshot")
	algorithm := fs.String("consolidation-algorithm", repack.AlgorithmUpstream, "the consolidation 'why node' runs: upstream or planner (as the controller's --consolidation-algorithm)")
	horizon := fs.Duration("consolidation-payback-horizon", repack.DefaultHorizon, "planner: the payback horizon (as the controller's)")
	restartCost := fs.Float64("consolidation-restart-cost", repack.DefaultRestartCost, "planner: dollars per evicted pod (as the controller's)")
	coolDown := fs.Duration("consolidation-cool-down", repack.DefaultCoolDown, "planner: the cool-down (as the controller's)")
	// Help asked for goes to stdout, as kubectl's; usage after a mistake
	// to stderr.
	usageOut := stderr
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" {
			usageOut = stdout
		}
	}
	fs.Usage = func() { fs.SetOutput(usageOut); fmt.Fprint(usageOut, usage); fs.PrintDefaults(); fs.SetOutput(stderr) }
	if err := fs.Parse(args); err != nil {
		// Asking for help is not a mistake: kubectl exits 0 on --help too.
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "error: %v\nSee 'karpenter --help'.\n", err)
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 2
	}
	if rest[0] == "completion" {
		if len(rest) != 2 {
			fmt.Fprintln(stderr, "error: completion takes one shell: bash or zsh")
			return 2
		}
		if err := completion(stdout, rest[1], fs); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		return 0
	}
	load := func() (*cli.Objects, error) {
		if *snapshotFile != "" {
			raw, err := os.ReadFile(*snapshotFile)
			if err != nil {
				return nil, fmt.Errorf("reading snapshot: %w", err)
			}
			return cli.ReadObjects(raw)
		}
		c, err := kube.client()
		if err != nil {
			return nil, err
		}
		return cli.Load(ctx, c, time.Now())
	}
	err := func() error {
		o, err := load()
		if err != nil {
			return err
		}
		if rest[0] == "snapshot" {
			if len(rest) != 1 {
				return fmt.Errorf("snapshot takes no arguments")
			}
			if *redact {
				o.Redact()
			}
			return o.Write(stdout, *output == cli.FormatYAML)
		}
		if *algorithm != repack.AlgorithmUpstream && *algorithm != repack.AlgorithmPlanner {
			return fmt.Errorf("consolidation-algorithm must be %q or %q, got %q", repack.AlgorithmUpstream, repack.AlgorithmPlanner, *algorithm)
		}
		if *horizon <= 0 || !(*restartCost > 0) || *coolDown <= 0 {
			return fmt.Errorf("consolidation-payback-horizon, consolidation-restart-cost and consolidation-cool-down must be positive")
		}
		// EC2NodeClass pools are answered with the user's AWS configuration
		// (the SDK's default chain: environment, profile, instance role);
		// without a region there is no EC2 to ask.
		var awsCfg *aws.Config
		if cfg, cerr := awsconfig.LoadDefaultConfig(ctx); cerr == nil && cfg.Region != "" {
			awsCfg = &cfg
		}
		s, err := cli.NewSession(o, cli.Options{KwokCatalog: *catalog, ConsolidationAlgorithm: *algorithm, AWS: awsCfg,
			Planner: repack.Options{Horizon: *horizon, RestartCost: *restartCost, CoolDown: *coolDown}})
		if err != nil {
			return err
		}
		var answer any
		switch {
		case rest[0] == "status" && len(rest) == 1:
			answer = s.Status(ctx)
		case rest[0] == "why" && len(rest) == 3 && rest[1] == "pod":
			ns, name, ok := strings.Cut(rest[2], "/")
			if !ok {
				ns, name = kube.namespace(), rest[2]
			}
			answer, err = s.WhyPod(ctx, types.NamespacedName{Namespace: ns, Name: name})
		case rest[0] == "why" && len(rest) == 3 && rest[1] == "node":
			answer, err = s.WhyNode(ctx, rest[2])
		case rest[0] == "simulate" && len(rest) == 1:
			if *changesFile == "" {
				return fmt.Errorf("simulate needs -f CHANGES.yaml")
			}
			raw, rerr := os.ReadFile(*changesFile)
			if rerr != nil {
				return fmt.Errorf("reading changes: %w", rerr)
			}
			changes, perr := cli.ReadChanges(raw)
			if perr != nil {
				return fmt.Errorf("%s: %w", *changesFile, perr)
			}
			answer, err = s.Simulate(ctx, changes)
		default:
			fs.Usage()
			return fmt.Errorf("unknown command %q", strings.Join(rest, " "))
		}
		if err != nil {
			return err
		}
		return cli.Render(stdout, *output, answer)
	}()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// kubeFlags are kubectl's connection flags, with kubectl's meanings.
type kubeFlags struct {
	kubeconfig, context, ns, as, requestTimeout string
	asGroups                                    []string
}

func (k *kubeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "kubeconfig context")
	fs.StringVarP(&k.ns, "namespace", "n", "", "namespace of a pod named without one in why pod (default: the kubeconfig context's, else default)")
	fs.StringVar(&k.as, "as", "", "user to impersonate")
	fs.StringArrayVar(&k.asGroups, "as-group", nil, "group to impersonate (repeat for several)")
	fs.StringVar(&k.requestTimeout, "request-timeout", "0", "time to wait for each request (1s, 2m; a bare number is seconds; 0 waits forever)")
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context, Timeout: k.requestTimeout}
	overrides.Context.Namespace = k.ns
	overrides.AuthInfo.Impersonate = k.as
	overrides.AuthInfo.ImpersonateGroups = k.asGroups
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// namespace is -n, else the kubeconfig context's namespace, else default;
// offline (--snapshot without a usable kubeconfig) it is -n or default.
func (k *kubeFlags) namespace() string {
	ns, _, err := k.clientConfig().Namespace()
	if err != nil || ns == "" {
		if k.ns != "" {
			return k.ns
		}
		return "default"
	}
	return ns
}

// client builds a read-only use of the kubeconfig's credentials.
func (k *kubeFlags) client() (client.Client, error) {
	cfg, err := k.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := apis.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return kube, nil
}
