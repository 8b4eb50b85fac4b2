// Package options owns the AWS provider's settings: upstream's flags, the
// environment variables behind them, their defaults and validation. Like the
// core operator's options, the environment is the fallback and a flag on the
// command line wins.
package options

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Options are the AWS provider's settings. Use New for the defaults.
type Options struct {
	ClusterName     string
	ClusterEndpoint string
	ClusterCABundle string
	// IsolatedVPC means no public endpoints: the Pricing API and IAM
	// instance-profile garbage collection are skipped.
	IsolatedVPC     bool
	EKSControlPlane bool
	// VMMemoryOverheadPercent is subtracted from EC2's memory figure.
	VMMemoryOverheadPercent float64
	// InterruptionQueue is the SQS queue name; empty disables interruption.
	InterruptionQueue string
	// InterruptionRateLearning (ours, off by default) keeps spot offerings
	// that keep being interrupted out of launches for longer than the
	// 3-minute insufficient-capacity cache, with a decaying memory.
	InterruptionRateLearning bool
	// InterruptionReplaceOnRebalance (ours, off by default) replaces a node
	// EC2 recommends rebalancing: a replacement first, then the drain, as
	// drift does. Off, a rebalance recommendation only records an event,
	// as upstream.
	InterruptionReplaceOnRebalance bool
	// InstanceStatusInterval is how often the instance-status check runs;
	// zero is upstream's minute. Test-only (env INSTANCE_STATUS_INTERVAL,
	// no flag), so e2e tests need not wait a minute for a check.
	InstanceStatusInterval time.Duration
	// SSMInvalidationInterval is how often cached "latest" AMI parameters
	// are checked for deprecated images; zero is upstream's 30 minutes.
	// Test-only (env SSM_INVALIDATION_INTERVAL, no flag).
	SSMInvalidationInterval time.Duration
	// VersionRefreshInterval is how often the Kubernetes version is read
	// again; zero is upstream's 5 minutes. Test-only (env
	// KUBERNETES_VERSION_REFRESH_INTERVAL, no flag).
	VersionRefreshInterval time.Duration
	// ReservedENIs are ENIs left out of the max-pods computation.
	ReservedENIs          int
	DisableDryRun         bool
	EnableZonalShift      bool
	AMIRefreshInterval    time.Duration
	SubnetRefreshInterval time.Duration
	// AWSFeatureGates is upstream's --aws-feature-gates string, kept as
	// given ("NodeClassCEL=false"); nothing reads it yet.
	AWSFeatureGates string
}

// Defaults, as upstream documents them.
const (
	DefaultVMMemoryOverheadPercent = 0.075
	DefaultAMIRefreshInterval      = time.Minute
	DefaultSubnetRefreshInterval   = time.Minute
	DefaultAWSFeatureGates         = "NodeClassCEL=false"
)

// New returns the defaults.
func New() *Options {
	return &Options{
		VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent,
		AMIRefreshInterval:      DefaultAMIRefreshInterval,
		SubnetRefreshInterval:   DefaultSubnetRefreshInterval,
		AWSFeatureGates:         DefaultAWSFeatureGates,
	}
}

// AddFlags registers every option on fs with the current values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "[REQUIRED] The kubernetes cluster name for resource discovery.")
	fs.StringVar(&o.ClusterEndpoint, "cluster-endpoint", o.ClusterEndpoint, "The external kubernetes cluster endpoint for new nodes to connect with. If not specified, will discover the cluster endpoint using DescribeCluster API.")
	fs.StringVar(&o.ClusterCABundle, "cluster-ca-bundle", o.ClusterCABundle, "Cluster CA bundle for nodes to use for TLS connections with the API server. If not set, this is taken from the controller's TLS configuration.")
	fs.BoolVar(&o.IsolatedVPC, "isolated-vpc", o.IsolatedVPC, "If true, then assume we can't reach AWS services which don't have a VPC endpoint. This also has the effect of disabling look-ups to the AWS on-demand pricing endpoint.")
	fs.BoolVar(&o.EKSControlPlane, "eks-control-plane", o.EKSControlPlane, "Marking this true means that your cluster is running with an EKS control plane and Karpenter should attempt to discover cluster details from the DescribeCluster API.")
	fs.Float64Var(&o.VMMemoryOverheadPercent, "vm-memory-overhead-percent", o.VMMemoryOverheadPercent, "The VM memory overhead as a percent that will be subtracted from the total memory for all instance types when cached information is unavailable.")
	fs.StringVar(&o.InterruptionQueue, "interruption-queue", o.InterruptionQueue, "Interruption queue is the name of the SQS queue used for processing interruption events from EC2. Interruption handling is disabled if not specified.")
	fs.BoolVar(&o.InterruptionReplaceOnRebalance, "interruption-replace-on-rebalance", o.InterruptionReplaceOnRebalance, "If true, a rebalance recommendation from the interruption queue replaces its node like drift does: the replacement launches first and the node drains once it is Ready, within the disruption budgets. Not in upstream, which only records an event.")
	fs.BoolVar(&o.InterruptionRateLearning, "interruption-rate-learning", o.InterruptionRateLearning, "If true, learn spot interruption rates per offering (instance type and zone) from the interruption queue and keep often-interrupted offerings out of launches for longer than the 3-minute insufficient-capacity cache. Not in upstream.")
	fs.IntVar(&o.ReservedENIs, "reserved-enis", o.ReservedENIs, "Reserved ENIs are not included in the calculations for max-pods or kube-reserved. This is most often used in the VPC CNI custom networking setup.")
	fs.BoolVar(&o.DisableDryRun, "disable-dry-run", o.DisableDryRun, "If true, then disable dry run validation for EC2NodeClasses.")
	fs.BoolVar(&o.EnableZonalShift, "enable-zonal-shift", o.EnableZonalShift, "If true, then Karpenter will avoid launching into availability zones under an ARC zonal shift.")
	fs.DurationVar(&o.AMIRefreshInterval, "ami-refresh-interval", o.AMIRefreshInterval, "How often AMI selector results are refreshed (at least 1m).")
	fs.DurationVar(&o.SubnetRefreshInterval, "subnet-refresh-interval", o.SubnetRefreshInterval, "How often subnet selector results are refreshed (at least 1m).")
	fs.StringVar(&o.AWSFeatureGates, "aws-feature-gates", o.AWSFeatureGates, "Optional AWS provider features. Current options are: NodeClassCEL")
}

var envBindings = [][2]string{
	{"cluster-name", "CLUSTER_NAME"},
	{"cluster-endpoint", "CLUSTER_ENDPOINT"},
	{"cluster-ca-bundle", "CLUSTER_CA_BUNDLE"},
	{"isolated-vpc", "ISOLATED_VPC"},
	{"eks-control-plane", "EKS_CONTROL_PLANE"},
	{"vm-memory-overhead-percent", "VM_MEMORY_OVERHEAD_PERCENT"},
	{"interruption-queue", "INTERRUPTION_QUEUE"},
	{"interruption-rate-learning", "INTERRUPTION_RATE_LEARNING"},
	{"interruption-replace-on-rebalance", "INTERRUPTION_REPLACE_ON_REBALANCE"},
	{"reserved-enis", "RESERVED_ENIS"},
	{"disable-dry-run", "DISABLE_DRY_RUN"},
	{"enable-zonal-shift", "ENABLE_ZONAL_SHIFT"},
	{"ami-refresh-interval", "AMI_REFRESH_INTERVAL"},
	{"subnet-refresh-interval", "SUBNET_REFRESH_INTERVAL"},
	{"aws-feature-gates", "AWS_FEATURE_GATES"},
}

// EnvNames maps each flag to its environment variable.
func EnvNames() map[string]string {
	out := make(map[string]string, len(envBindings))
	for _, b := range envBindings {
		out[b[0]] = b[1]
	}
	return out
}

// Parse applies the environment (lookupEnv, os.LookupEnv when nil), then
// args, to the flags AddFlags registered on fs, and validates. fs may hold
// other flags too (the core operator's); unknown arguments are fs's concern.
func (o *Options) Parse(fs *flag.FlagSet, lookupEnv func(string) (string, bool), args ...string) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	for _, b := range envBindings {
		v, ok := lookupEnv(b[1])
		if !ok || fs.Lookup(b[0]) == nil {
			continue
		}
		if err := fs.Set(b[0], v); err != nil {
			return fmt.Errorf("parsing environment variable %s=%q: %w", b[1], v, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing flags: %w", err)
	}
	for env, dst := range map[string]*time.Duration{
		EnvInstanceStatusInterval:  &o.InstanceStatusInterval,
		EnvSSMInvalidationInterval: &o.SSMInvalidationInterval,
		EnvVersionRefreshInterval:  &o.VersionRefreshInterval,
	} {
		if v, ok := lookupEnv(env); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("parsing environment variable %s=%q: want a positive duration", env, v)
			}
			*dst = d
		}
	}
	return o.Validate()
}

// EnvInstanceStatusInterval is the test-only environment variable behind
// InstanceStatusInterval.
const EnvInstanceStatusInterval = "INSTANCE_STATUS_INTERVAL"

// EnvSSMInvalidationInterval is the test-only environment variable behind
// SSMInvalidationInterval.
const EnvSSMInvalidationInterval = "SSM_INVALIDATION_INTERVAL"

// EnvVersionRefreshInterval is the test-only environment variable behind
// VersionRefreshInterval.
const EnvVersionRefreshInterval = "KUBERNETES_VERSION_REFRESH_INTERVAL"

// Validate reports every invalid setting at once, with upstream's rules.
func (o *Options) Validate() error {
	var errs []error
	if o.ClusterName == "" {
		errs = append(errs, errors.New("missing field, cluster-name"))
	}
	if o.ClusterEndpoint != "" {
		u, err := url.Parse(o.ClusterEndpoint)
		if err != nil || !u.IsAbs() || u.Hostname() == "" {
			errs = append(errs, fmt.Errorf("%q not a valid clusterEndpoint URL", o.ClusterEndpoint))
		}
	}
	if o.VMMemoryOverheadPercent < 0 {
		errs = append(errs, errors.New("vm-memory-overhead-percent cannot be negative"))
	}
	if o.ReservedENIs < 0 {
		errs = append(errs, errors.New("reserved-enis cannot be negative"))
	}
	if o.AMIRefreshInterval < time.Minute {
		errs = append(errs, errors.New("ami-refresh-interval must be at least 1m"))
	}
	if o.SubnetRefreshInterval < time.Minute {
		errs = append(errs, errors.New("subnet-refresh-interval must be at least 1m"))
	}
	for _, gate := range strings.Split(o.AWSFeatureGates, ",") {
		if gate = strings.TrimSpace(gate); gate == "" {
			continue
		}
		name, value, ok := strings.Cut(gate, "=")
		if !ok || name != "NodeClassCEL" || (value != "true" && value != "false") {
			errs = append(errs, fmt.Errorf("invalid aws-feature-gates entry %q (known: NodeClassCEL=true|false)", gate))
		}
	}
	return errors.Join(errs...)
}
