// Package options owns the controller's settings: every flag, the
// environment variable that backs it, its default and its validation, plus
// the feature gates and the optional scheduler configuration. Environment
// variables are the fallback and flags override them, so a Helm chart can set
// env while a developer can still pass a flag.
package options

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Policy values.
const (
	PreferencePolicyRespect = "Respect"
	PreferencePolicyIgnore  = "Ignore"
	MinValuesPolicyStrict   = "Strict"
	MinValuesPolicyBestEff  = "BestEffort"

	// ConsolidationAlgorithmUpstream is upstream's multi- and single-node
	// consolidation; ConsolidationAlgorithmPlanner the fleet repacking
	// planner (pkg/disruption/repack). Upstream's is the default until the
	// controller's 15 s validation accepts the planner's multi-replacement
	// moves (see docs/compatibility.md).
	ConsolidationAlgorithmUpstream = "upstream"
	ConsolidationAlgorithmPlanner  = "planner"
)

// Options are the operator's settings. The zero value is not useful; use
// New (defaults) followed by Parse.
type Options struct {
	ServiceName                      string
	MetricsPort                      int
	HealthProbePort                  int
	KubeClientQPS                    int
	KubeClientBurst                  int
	EnableProfiling                  bool
	DisableControllerWarmup          bool
	DisableLeaderElection            bool
	DisableClusterStateObservability bool
	LeaderElectionName               string
	LeaderElectionNamespace          string
	// MemoryLimit is in bytes; <=0 means unknown (no GOMEMLIMIT).
	MemoryLimit int64
	// EventDedupeWindow, when positive, replaces every event's
	// deduplication window (upstream's: 2 minutes, 5 for FailedScheduling,
	// 15 for Unconsolidatable); 0 keeps upstream's. Hidden (env
	// EVENT_DEDUPE_WINDOW): the chart tests' cycles last less than
	// upstream's windows and must still see an event repeated.
	EventDedupeWindow time.Duration
	// CPURequests is in millicores; <=0 is read as 1000.
	CPURequests         int64
	LogLevel            string
	LogOutputPaths      string
	LogErrorOutputPaths string
	BatchMaxDuration    time.Duration
	BatchIdleDuration   time.Duration
	PreferencePolicy    string
	MinValuesPolicy     string
	IgnoreDRARequests   bool
	// ConsolidationAlgorithm is "upstream" (default) or "planner".
	ConsolidationAlgorithm string
	// The planner's payback gate and cool-down (ours; only with the
	// "planner" algorithm): a move is taken when its saving over
	// ConsolidationPaybackHorizon exceeds ConsolidationRestartCost
	// dollars per evicted pod (weighted by eviction cost), and what a
	// move touched is left alone for ConsolidationCoolDown.
	ConsolidationPaybackHorizon time.Duration
	ConsolidationRestartCost    float64
	ConsolidationCoolDown       time.Duration
	// ConsolidationDrainDeletionCost (ours; planner only) gives the pods on
	// the nodes the planner drains a low controller.kubernetes.io/pod-deletion-cost,
	// so that ReplicaSet scale-downs empty those nodes first.
	ConsolidationDrainDeletionCost bool
	FeatureGates                   FeatureGates
	// SchedulerConfigFile is the --scheduler-config value; SchedulerConfig is
	// what it decoded to (nil when unset).
	SchedulerConfigFile string
	SchedulerConfig     *SchedulerConfig

	// RegistrationTTL is how long a launched NodeClaim may go without a
	// Node before it is deleted and replaced. Upstream hard-codes 15m; we
	// expose it (--registration-ttl) so tests need not wait that long.
	RegistrationTTL time.Duration

	// Leader-election timings have no flags upstream (controller-runtime's
	// defaults apply); zero keeps those defaults. Tests shorten them to
	// exercise hand-over quickly.
	LeaderElectionLeaseDuration time.Duration
	LeaderElectionRenewDeadline time.Duration
	LeaderElectionRetryPeriod   time.Duration
}

// Defaults, as upstream documents them.
const (
	DefaultMetricsPort        = 8080
	DefaultHealthProbePort    = 8081
	DefaultKubeClientQPS      = 200
	DefaultKubeClientBurst    = 300
	DefaultLeaderElectionName = "karpenter-leader-election"
	DefaultCPURequests        = 1000
	DefaultLogLevel           = "info"
	DefaultBatchMaxDuration   = 10 * time.Second
	DefaultBatchIdleDuration  = time.Second
	DefaultRegistrationTTL    = 15 * time.Minute
	// The planner's defaults (repack.DefaultHorizon, DefaultRestartCost
	// and DefaultCoolDown; a test keeps them equal).
	DefaultConsolidationPaybackHorizon = time.Hour
	DefaultConsolidationRestartCost    = 0.009
	DefaultConsolidationCoolDown       = 5 * time.Minute
)

// New returns the defaults.
func New() *Options {
	return &Options{
		MetricsPort:                    DefaultMetricsPort,
		HealthProbePort:                DefaultHealthProbePort,
		KubeClientQPS:                  DefaultKubeClientQPS,
		KubeClientBurst:                DefaultKubeClientBurst,
		DisableControllerWarmup:        true,
		LeaderElectionName:             DefaultLeaderElectionName,
		MemoryLimit:                    -1,
		CPURequests:                    DefaultCPURequests,
		LogLevel:                       DefaultLogLevel,
		LogOutputPaths:                 "stdout",
		LogErrorOutputPaths:            "stderr",
		BatchMaxDuration:               DefaultBatchMaxDuration,
		BatchIdleDuration:              DefaultBatchIdleDuration,
		PreferencePolicy:               PreferencePolicyRespect,
		MinValuesPolicy:                MinValuesPolicyStrict,
		IgnoreDRARequests:              true,
		ConsolidationAlgorithm:         ConsolidationAlgorithmUpstream,
		ConsolidationPaybackHorizon:    DefaultConsolidationPaybackHorizon,
		ConsolidationRestartCost:       DefaultConsolidationRestartCost,
		ConsolidationCoolDown:          DefaultConsolidationCoolDown,
		ConsolidationDrainDeletionCost: true,
		FeatureGates:                   DefaultFeatureGates(),
		RegistrationTTL:                DefaultRegistrationTTL,
	}
}

// binding ties one flag to its environment variable.
type binding struct {
	flag, env string
}

// AddFlags registers every option on fs with the current values as defaults.
// Environment variables are applied in Parse, before the command line, so
// that flags win.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ServiceName, "karpenter-service", o.ServiceName, "The Karpenter Service name (unused in v1; kept for compatibility)")
	fs.IntVar(&o.MetricsPort, "metrics-port", o.MetricsPort, "The port the metric endpoint binds to for operating metrics about the controller itself")
	fs.IntVar(&o.HealthProbePort, "health-probe-port", o.HealthProbePort, "The port the health probe endpoint binds to for reporting controller health")
	fs.IntVar(&o.KubeClientQPS, "kube-client-qps", o.KubeClientQPS, "The smoothed rate of qps to kube-apiserver")
	fs.IntVar(&o.KubeClientBurst, "kube-client-burst", o.KubeClientBurst, "The maximum allowed burst of queries to the kube-apiserver")
	fs.BoolVar(&o.EnableProfiling, "enable-profiling", o.EnableProfiling, "Enable the profiling on the metric endpoint")
	fs.BoolVar(&o.DisableControllerWarmup, "disable-controller-warmup", o.DisableControllerWarmup, "Do not start controller sources before winning leader election")
	fs.BoolVar(&o.DisableLeaderElection, "disable-leader-election", o.DisableLeaderElection, "Disable the leader election client before executing the main loop")
	fs.BoolVar(&o.DisableClusterStateObservability, "disable-cluster-state-observability", o.DisableClusterStateObservability, "Disable the pod, node and nodepool metrics controllers")
	fs.StringVar(&o.LeaderElectionName, "leader-election-name", o.LeaderElectionName, "Leader election name to create and monitor the lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Leader election namespace to create and monitor the lease; empty means the pod's own namespace")
	fs.Int64Var(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "Memory limit on the container running the controller, in bytes; GOMEMLIMIT is set to 90% of it")
	fs.Int64Var(&o.CPURequests, "cpu-requests", o.CPURequests, "CPU requests in millicores on the container running the controller; scales scheduling parallelism")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "Log verbosity level. Can be one of 'debug', 'info', or 'error'")
	fs.StringVar(&o.LogOutputPaths, "log-output-paths", o.LogOutputPaths, "Comma-separated list of paths to write logs to")
	fs.StringVar(&o.LogErrorOutputPaths, "log-error-output-paths", o.LogErrorOutputPaths, "Comma-separated list of paths to write the logger's own errors to")
	fs.DurationVar(&o.BatchMaxDuration, "batch-max-duration", o.BatchMaxDuration, "The maximum length of a batch window; the longer this is, the more pods can be considered for provisioning at one time")
	fs.DurationVar(&o.BatchIdleDuration, "batch-idle-duration", o.BatchIdleDuration, "The maximum amount of time with no new pending pods that, if exceeded, ends the current batching window")
	fs.StringVar(&o.PreferencePolicy, "preference-policy", o.PreferencePolicy, "How preferred affinities and ScheduleAnyway spreads are treated: Respect or Ignore")
	fs.StringVar(&o.MinValuesPolicy, "min-values-policy", o.MinValuesPolicy, "How unsatisfiable minValues are treated: Strict or BestEffort")
	fs.BoolVar(&o.IgnoreDRARequests, "ignore-dra-requests", o.IgnoreDRARequests, "Do not provision for pods with ResourceClaims")
	fs.StringVar(&o.ConsolidationAlgorithm, "consolidation-algorithm", o.ConsolidationAlgorithm, "Consolidation algorithm: 'upstream' (multi- and single-node consolidation) or 'planner' (fleet repacking with a payback gate)")
	fs.DurationVar(&o.ConsolidationPaybackHorizon, "consolidation-payback-horizon", o.ConsolidationPaybackHorizon, "Planner only: how long a consolidation move's saving is counted for (bounded by the node's remaining lifetime under expireAfter)")
	fs.Float64Var(&o.ConsolidationRestartCost, "consolidation-restart-cost", o.ConsolidationRestartCost, "Planner only: dollars charged per evicted pod (times its eviction cost) against a move's saving over the payback horizon")
	fs.DurationVar(&o.ConsolidationCoolDown, "consolidation-cool-down", o.ConsolidationCoolDown, "Planner only: how long the nodes a consolidation move launched and the pods it evicted are left alone")
	fs.BoolVar(&o.ConsolidationDrainDeletionCost, "consolidation-drain-deletion-cost", o.ConsolidationDrainDeletionCost, "Planner only: give the ReplicaSet pods on the nodes the planner drains a pod-deletion-cost of -1000, so that scale-downs remove them first")
	fs.Var(&o.FeatureGates, "feature-gates", "Optional features can be enabled / disabled using feature gates. Current options are: "+strings.Join(gateNames(), ", "))
	fs.StringVar(&o.SchedulerConfigFile, "scheduler-config", o.SchedulerConfigFile, "Path to a YAML/JSON file (or inline JSON object) with podTopologySpread.defaultConstraints")
	fs.DurationVar(&o.RegistrationTTL, "registration-ttl", o.RegistrationTTL, "How long a launched NodeClaim may go without registering before it is replaced")
}

var envBindings = []binding{
	{"karpenter-service", "KARPENTER_SERVICE"},
	{"metrics-port", "METRICS_PORT"},
	{"health-probe-port", "HEALTH_PROBE_PORT"},
	{"kube-client-qps", "KUBE_CLIENT_QPS"},
	{"kube-client-burst", "KUBE_CLIENT_BURST"},
	{"enable-profiling", "ENABLE_PROFILING"},
	{"disable-controller-warmup", "DISABLE_CONTROLLER_WARMUP"},
	{"disable-leader-election", "DISABLE_LEADER_ELECTION"},
	{"disable-cluster-state-observability", "DISABLE_CLUSTER_STATE_OBSERVABILITY"},
	{"leader-election-name", "LEADER_ELECTION_NAME"},
	{"leader-election-namespace", "LEADER_ELECTION_NAMESPACE"},
	{"memory-limit", "MEMORY_LIMIT"},
	{"cpu-requests", "CPU_REQUESTS"},
	{"log-level", "LOG_LEVEL"},
	{"log-output-paths", "LOG_OUTPUT_PATHS"},
	{"log-error-output-paths", "LOG_ERROR_OUTPUT_PATHS"},
	{"batch-max-duration", "BATCH_MAX_DURATION"},
	{"batch-idle-duration", "BATCH_IDLE_DURATION"},
	{"preference-policy", "PREFERENCE_POLICY"},
	{"min-values-policy", "MIN_VALUES_POLICY"},
	{"ignore-dra-requests", "IGNORE_DRA_REQUESTS"},
	{"consolidation-algorithm", "CONSOLIDATION_ALGORITHM"},
	{"consolidation-payback-horizon", "CONSOLIDATION_PAYBACK_HORIZON"},
	{"consolidation-restart-cost", "CONSOLIDATION_RESTART_COST"},
	{"consolidation-cool-down", "CONSOLIDATION_COOL_DOWN"},
	{"consolidation-drain-deletion-cost", "CONSOLIDATION_DRAIN_DELETION_COST"},
	{"feature-gates", "FEATURE_GATES"},
	{"scheduler-config", "SCHEDULER_CONFIG"},
	{"registration-ttl", "REGISTRATION_TTL"},
}

// EnvNames maps each flag to its environment variable (for docs and tests).
func EnvNames() map[string]string {
	out := make(map[string]string, len(envBindings))
	for _, b := range envBindings {
		out[b.flag] = b.env
	}
	return out
}

// Parse applies the environment (looked up with lookupEnv, os.LookupEnv when
// nil) and then args to the flags AddFlags registered on fs, and validates.
func (o *Options) Parse(fs *flag.FlagSet, lookupEnv func(string) (string, bool), args ...string) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	for _, b := range envBindings {
		v, ok := lookupEnv(b.env)
		if !ok || fs.Lookup(b.flag) == nil {
			continue
		}
		if err := fs.Set(b.flag, v); err != nil {
			return fmt.Errorf("parsing environment variable %s=%q: %w", b.env, v, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing flags: %w", err)
	}
	if err := o.parseHiddenEnv(lookupEnv); err != nil {
		return err
	}
	if o.CPURequests <= 0 {
		o.CPURequests = DefaultCPURequests
	}
	if o.SchedulerConfigFile != "" {
		cfg, err := LoadSchedulerConfig(o.SchedulerConfigFile)
		if err != nil {
			return err
		}
		o.SchedulerConfig = cfg
	}
	return o.Validate()
}

// hiddenDurationEnv are test-only settings with no flag, so --help and the
// flag set stay upstream's: the leader-election timings, which e2e tests
// shorten to watch a hand-over in seconds rather than after a 15s lease,
// and the event deduplication window, which the chart tests shorten to see
// an event repeated (a PATCH of its count) within their cycles.
var hiddenDurationEnv = []struct {
	env string
	dst func(*Options) *time.Duration
}{
	{"LEADER_ELECTION_LEASE_DURATION", func(o *Options) *time.Duration { return &o.LeaderElectionLeaseDuration }},
	{"LEADER_ELECTION_RENEW_DEADLINE", func(o *Options) *time.Duration { return &o.LeaderElectionRenewDeadline }},
	{"LEADER_ELECTION_RETRY_PERIOD", func(o *Options) *time.Duration { return &o.LeaderElectionRetryPeriod }},
	{"EVENT_DEDUPE_WINDOW", func(o *Options) *time.Duration { return &o.EventDedupeWindow }},
}

func (o *Options) parseHiddenEnv(lookupEnv func(string) (string, bool)) error {
	for _, h := range hiddenDurationEnv {
		v, ok := lookupEnv(h.env)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return fmt.Errorf("parsing environment variable %s=%q: want a positive duration", h.env, v)
		}
		*h.dst(o) = d
	}
	return nil
}

// Validate reports every invalid setting at once.
func (o *Options) Validate() error {
	var errs []error
	port := func(name string, p int) {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s must be between 0 and 65535, got %d", name, p))
		}
	}
	port("metrics-port", o.MetricsPort)
	port("health-probe-port", o.HealthProbePort)
	if o.KubeClientQPS <= 0 {
		errs = append(errs, fmt.Errorf("kube-client-qps must be positive, got %d", o.KubeClientQPS))
	}
	if o.KubeClientBurst <= 0 {
		errs = append(errs, fmt.Errorf("kube-client-burst must be positive, got %d", o.KubeClientBurst))
	}
	if !o.DisableLeaderElection && o.LeaderElectionName == "" {
		errs = append(errs, errors.New("leader-election-name must be set unless leader election is disabled"))
	}
	switch o.LogLevel {
	case "debug", "info", "error":
	default:
		errs = append(errs, fmt.Errorf("log-level must be one of 'debug', 'info' or 'error', got %q", o.LogLevel))
	}
	if o.BatchMaxDuration <= 0 {
		errs = append(errs, fmt.Errorf("batch-max-duration must be positive, got %s", o.BatchMaxDuration))
	}
	if o.BatchIdleDuration <= 0 {
		errs = append(errs, fmt.Errorf("batch-idle-duration must be positive, got %s", o.BatchIdleDuration))
	}
	if o.BatchIdleDuration > o.BatchMaxDuration && o.BatchMaxDuration > 0 {
		errs = append(errs, fmt.Errorf("batch-idle-duration (%s) must not exceed batch-max-duration (%s)", o.BatchIdleDuration, o.BatchMaxDuration))
	}
	if o.PreferencePolicy != PreferencePolicyRespect && o.PreferencePolicy != PreferencePolicyIgnore {
		errs = append(errs, fmt.Errorf("preference-policy must be %q or %q, got %q", PreferencePolicyRespect, PreferencePolicyIgnore, o.PreferencePolicy))
	}
	if o.MinValuesPolicy != MinValuesPolicyStrict && o.MinValuesPolicy != MinValuesPolicyBestEff {
		errs = append(errs, fmt.Errorf("min-values-policy must be %q or %q, got %q", MinValuesPolicyStrict, MinValuesPolicyBestEff, o.MinValuesPolicy))
	}
	if o.ConsolidationAlgorithm != ConsolidationAlgorithmUpstream && o.ConsolidationAlgorithm != ConsolidationAlgorithmPlanner {
		errs = append(errs, fmt.Errorf("consolidation-algorithm must be %q or %q, got %q", ConsolidationAlgorithmUpstream, ConsolidationAlgorithmPlanner, o.ConsolidationAlgorithm))
	}
	if o.ConsolidationPaybackHorizon <= 0 {
		errs = append(errs, fmt.Errorf("consolidation-payback-horizon must be positive, got %s", o.ConsolidationPaybackHorizon))
	}
	if !(o.ConsolidationRestartCost > 0) || math.IsInf(o.ConsolidationRestartCost, 0) {
		errs = append(errs, fmt.Errorf("consolidation-restart-cost must be a positive number of dollars, got %v", o.ConsolidationRestartCost))
	}
	if o.ConsolidationCoolDown <= 0 {
		errs = append(errs, fmt.Errorf("consolidation-cool-down must be positive, got %s", o.ConsolidationCoolDown))
	}
	if o.RegistrationTTL <= 0 {
		errs = append(errs, fmt.Errorf("registration-ttl must be positive, got %s", o.RegistrationTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validating options: %w", err)
	}
	return nil
}

// Parallelism is how many scheduling workers the CPU request allows:
// ceil(cpu/1000), at least 1.
func (o *Options) Parallelism() int {
	cpu := o.CPURequests
	if cpu <= 0 {
		cpu = DefaultCPURequests
	}
	return int((cpu + 999) / 1000)
}

// GoMemLimit is the soft memory limit to set (90% of MemoryLimit), or 0 when
// no limit is known.
func (o *Options) GoMemLimit() int64 {
	if o.MemoryLimit <= 0 {
		return 0
	}
	return o.MemoryLimit / 10 * 9
}

type ctxKey struct{}

// ToContext stores the options in ctx so that controllers need not thread
// them through every constructor.
func ToContext(ctx context.Context, o *Options) context.Context {
	return context.WithValue(ctx, ctxKey{}, o)
}

// FromContext returns the options stored by ToContext, or the defaults.
func FromContext(ctx context.Context) *Options {
	if o, ok := ctx.Value(ctxKey{}).(*Options); ok && o != nil {
		return o
	}
	return New()
}

// parseBool accepts what strconv does (flag's own rules).
func parseBool(s string) (bool, error) { return strconv.ParseBool(strings.TrimSpace(s)) }
