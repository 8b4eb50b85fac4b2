package options

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

func parse(t *testing.T, env map[string]string, args ...string) (*Options, error) {
	t.Helper()
	o := New()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	err := o.Parse(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, args...)
	return o, err
}

func TestDefaults(t *testing.T) {
	o, err := parse(t, nil)
	require.NoError(t, err)
	want := &Options{
		MetricsPort: 8080, HealthProbePort: 8081, KubeClientQPS: 200, KubeClientBurst: 300,
		DisableControllerWarmup: true, LeaderElectionName: "karpenter-leader-election",
		MemoryLimit: -1, CPURequests: 1000, LogLevel: "info", LogOutputPaths: "stdout", LogErrorOutputPaths: "stderr",
		BatchMaxDuration: 10 * time.Second, BatchIdleDuration: time.Second,
		PreferencePolicy: "Respect", MinValuesPolicy: "Strict", IgnoreDRARequests: true, ConsolidationAlgorithm: "upstream",
		FeatureGates:                FeatureGates{ReservedCapacity: true, AnticipateReplicaSets: true},
		RegistrationTTL:             15 * time.Minute,
		ConsolidationPaybackHorizon: time.Hour, ConsolidationRestartCost: 0.009, ConsolidationCoolDown: 5 * time.Minute,
		ConsolidationDrainDeletionCost: true,
	}
	assert.Equal(t, want, o)
	assert.Equal(t, "AnticipateReplicaSets=true,CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,StaticCapacity=false", o.FeatureGates.String())
}

func TestEnvAndFlags(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, o *Options)
	}{
		{"env sets every option",
			map[string]string{
				"KARPENTER_SERVICE": "svc", "METRICS_PORT": "9000", "HEALTH_PROBE_PORT": "9001",
				"KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "60", "ENABLE_PROFILING": "true",
				"DISABLE_CONTROLLER_WARMUP": "false", "DISABLE_LEADER_ELECTION": "true",
				"DISABLE_CLUSTER_STATE_OBSERVABILITY": "true", "LEADER_ELECTION_NAME": "le",
				"LEADER_ELECTION_NAMESPACE": "ns", "MEMORY_LIMIT": "1000", "CPU_REQUESTS": "2500",
				"LOG_LEVEL": "debug", "LOG_OUTPUT_PATHS": "stderr", "LOG_ERROR_OUTPUT_PATHS": "stdout",
				"BATCH_MAX_DURATION": "20s", "BATCH_IDLE_DURATION": "2s", "PREFERENCE_POLICY": "Ignore",
				"MIN_VALUES_POLICY": "BestEffort", "IGNORE_DRA_REQUESTS": "false",
				"FEATURE_GATES": "NodeRepair=true", "REGISTRATION_TTL": "30s", "CONSOLIDATION_ALGORITHM": "planner",
				"CONSOLIDATION_PAYBACK_HORIZON": "2h", "CONSOLIDATION_RESTART_COST": "0.05", "CONSOLIDATION_COOL_DOWN": "10m",
				"CONSOLIDATION_DRAIN_DELETION_COST": "false",
			}, nil,
			func(t *testing.T, o *Options) {
				assert.Equal(t, "svc", o.ServiceName)
				assert.Equal(t, 9000, o.MetricsPort)
				assert.Equal(t, 9001, o.HealthProbePort)
				assert.Equal(t, 50, o.KubeClientQPS)
				assert.Equal(t, 60, o.KubeClientBurst)
				assert.True(t, o.EnableProfiling)
				assert.False(t, o.DisableControllerWarmup)
				assert.True(t, o.DisableLeaderElection)
				assert.True(t, o.DisableClusterStateObservability)
				assert.Equal(t, "le", o.LeaderElectionName)
				assert.Equal(t, "ns", o.LeaderElectionNamespace)
				assert.Equal(t, int64(1000), o.MemoryLimit)
				assert.Equal(t, int64(900), o.GoMemLimit())
				assert.Equal(t, int64(2500), o.CPURequests)
				assert.Equal(t, 3, o.Parallelism())
				assert.Equal(t, "debug", o.LogLevel)
				assert.Equal(t, "stderr", o.LogOutputPaths)
				assert.Equal(t, "stdout", o.LogErrorOutputPaths)
				assert.Equal(t, 20*time.Second, o.BatchMaxDuration)
				assert.Equal(t, 2*time.Second, o.BatchIdleDuration)
				assert.Equal(t, "Ignore", o.PreferencePolicy)
				assert.Equal(t, "BestEffort", o.MinValuesPolicy)
				assert.False(t, o.IgnoreDRARequests)
				assert.Equal(t, FeatureGates{NodeRepair: true, ReservedCapacity: true, AnticipateReplicaSets: true}, o.FeatureGates)
				assert.Equal(t, 30*time.Second, o.RegistrationTTL)
				assert.Equal(t, "planner", o.ConsolidationAlgorithm)
				assert.Equal(t, 2*time.Hour, o.ConsolidationPaybackHorizon)
				assert.InDelta(t, 0.05, o.ConsolidationRestartCost, 1e-12)
				assert.Equal(t, 10*time.Minute, o.ConsolidationCoolDown)
				assert.False(t, o.ConsolidationDrainDeletionCost)
			}},
		{"consolidation algorithm flag overrides env",
			map[string]string{"CONSOLIDATION_ALGORITHM": "planner"}, []string{"--consolidation-algorithm=upstream"},
			func(t *testing.T, o *Options) { assert.Equal(t, "upstream", o.ConsolidationAlgorithm) }},
		{"flags override env",
			map[string]string{"BATCH_IDLE_DURATION": "2s", "LOG_LEVEL": "debug", "DISABLE_LEADER_ELECTION": "true"},
			[]string{"--batch-idle-duration=500ms", "--log-level=error", "--disable-leader-election=false"},
			func(t *testing.T, o *Options) {
				assert.Equal(t, 500*time.Millisecond, o.BatchIdleDuration)
				assert.Equal(t, "error", o.LogLevel)
				assert.False(t, o.DisableLeaderElection)
			}},
		{"non-positive cpu requests read as 1000",
			nil, []string{"--cpu-requests=0"},
			func(t *testing.T, o *Options) {
				assert.Equal(t, int64(1000), o.CPURequests)
				assert.Equal(t, 1, o.Parallelism())
			}},
		{"feature gates: unknown ignored, unnamed keep defaults",
			map[string]string{"FEATURE_GATES": "Bogus=true,SpotToSpotConsolidation=true, ReservedCapacity=false"}, nil,
			func(t *testing.T, o *Options) {
				assert.Equal(t, FeatureGates{SpotToSpotConsolidation: true, AnticipateReplicaSets: true}, o.FeatureGates)
			}},
		{"no memory limit, no GOMEMLIMIT",
			nil, nil,
			func(t *testing.T, o *Options) { assert.Zero(t, o.GoMemLimit()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(t, tt.env, tt.args...)
			require.NoError(t, err)
			tt.check(t, o)
		})
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{"bad env int", map[string]string{"METRICS_PORT": "x"}, nil, "METRICS_PORT"},
		{"bad env duration", map[string]string{"BATCH_MAX_DURATION": "10"}, nil, "BATCH_MAX_DURATION"},
		{"bad flag", nil, []string{"--kube-client-qps=abc"}, "kube-client-qps"},
		{"zero payback horizon", nil, []string{"--consolidation-payback-horizon=0s"}, "consolidation-payback-horizon must be positive"},
		{"negative restart cost", map[string]string{"CONSOLIDATION_RESTART_COST": "-1"}, nil, "consolidation-restart-cost must be a positive number"},
		{"restart cost not a number", nil, []string{"--consolidation-restart-cost=NaN"}, "consolidation-restart-cost must be a positive number"},
		{"zero cool-down", nil, []string{"--consolidation-cool-down=0s"}, "consolidation-cool-down must be positive"},
		{"unknown flag", nil, []string{"--nope"}, "nope"},
		{"log level", nil, []string{"--log-level=warn"}, "log-level"},
		{"preference policy", nil, []string{"--preference-policy=Maybe"}, "preference-policy"},
		{"min values policy", nil, []string{"--min-values-policy=Loose"}, "min-values-policy"},
		{"consolidation algorithm", nil, []string{"--consolidation-algorithm=greedy"}, "consolidation-algorithm"},
		{"consolidation algorithm env", map[string]string{"CONSOLIDATION_ALGORITHM": "fast"}, nil, "consolidation-algorithm"},
		{"batch idle > max", nil, []string{"--batch-idle-duration=20s"}, "batch-idle-duration"},
		{"zero batch max", nil, []string{"--batch-max-duration=0s"}, "batch-max-duration"},
		{"zero qps", nil, []string{"--kube-client-qps=0"}, "kube-client-qps"},
		{"port range", nil, []string{"--health-probe-port=70000"}, "health-probe-port"},
		{"malformed gate", map[string]string{"FEATURE_GATES": "NodeRepair"}, nil, "missing bool value"},
		{"gate value", nil, []string{"--feature-gates=NodeRepair=yes"}, "invalid value"},
		{"missing scheduler config", nil, []string{"--scheduler-config=/does/not/exist"}, "reading scheduler config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.env, tt.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSchedulerConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		wantErr string
	}{
		{"valid yaml", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: ScheduleAnyway\n  - maxSkew: 3\n    topologyKey: kubernetes.io/hostname\n    whenUnsatisfiable: ScheduleAnyway\n", ""},
		{"empty", "{}", ""},
		{"unknown field", "podTopologySpread:\n  other: 1\n", "unknown field"},
		{"zero skew", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 0\n    topologyKey: zone\n    whenUnsatisfiable: DoNotSchedule\n", "maxSkew"},
		{"bad key", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: 'a b'\n    whenUnsatisfiable: DoNotSchedule\n", "topologyKey"},
		{"bad mode", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: zone\n    whenUnsatisfiable: Sometimes\n", "whenUnsatisfiable"},
		{"selector", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: zone\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector: {matchLabels: {a: b}}\n", "labelSelector"},
		{"match label keys", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: zone\n    whenUnsatisfiable: DoNotSchedule\n    matchLabelKeys: [a]\n", "matchLabelKeys"},
		{"duplicate", "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: zone\n    whenUnsatisfiable: DoNotSchedule\n  - maxSkew: 2\n    topologyKey: zone\n    whenUnsatisfiable: DoNotSchedule\n", "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sched.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tt.config), 0o600))
			o, err := parse(t, map[string]string{"SCHEDULER_CONFIG": path})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, o.SchedulerConfig)
		})
	}
	t.Run("inline json", func(t *testing.T) {
		o, err := parse(t, nil, `--scheduler-config={"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]}}`)
		require.NoError(t, err)
		require.Len(t, o.SchedulerConfig.PodTopologySpread.DefaultConstraints, 1)
	})
}

func TestEveryFlagHasEnv(t *testing.T) {
	o := New()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	envs := EnvNames()
	fs.VisitAll(func(f *flag.Flag) {
		assert.Contains(t, envs, f.Name, "flag %s has no environment variable", f.Name)
	})
	assert.Len(t, envs, 29)
}

func TestHiddenLeaderElectionEnv(t *testing.T) {
	env := map[string]string{
		"LEADER_ELECTION_LEASE_DURATION": "3s",
		"LEADER_ELECTION_RENEW_DEADLINE": "2s",
		"LEADER_ELECTION_RETRY_PERIOD":   "250ms",
	}
	o := New()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, o.Parse(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	assert.Equal(t, 3*time.Second, o.LeaderElectionLeaseDuration)
	assert.Equal(t, 2*time.Second, o.LeaderElectionRenewDeadline)
	assert.Equal(t, 250*time.Millisecond, o.LeaderElectionRetryPeriod)
	assert.Nil(t, fs.Lookup("leader-election-lease-duration"), "no flag: the setting is hidden")

	env["LEADER_ELECTION_RETRY_PERIOD"] = "soon"
	o = New()
	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	assert.Error(t, o.Parse(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
}

func TestContext(t *testing.T) {
	o := New()
	o.LogLevel = "debug"
	ctx := ToContext(t.Context(), o)
	assert.Same(t, o, FromContext(ctx))
	assert.Equal(t, "info", FromContext(t.Context()).LogLevel)
}

func TestPlannerDefaultsMatchRepack(t *testing.T) {
	assert.Equal(t, repack.DefaultHorizon, DefaultConsolidationPaybackHorizon)
	assert.InDelta(t, repack.DefaultRestartCost, DefaultConsolidationRestartCost, 1e-12)
	assert.Equal(t, repack.DefaultCoolDown, DefaultConsolidationCoolDown)
}
