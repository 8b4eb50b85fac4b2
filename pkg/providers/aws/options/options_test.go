package options_test

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/options"
)

func parse(env map[string]string, args ...string) (*options.Options, error) {
	o := options.New()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs)
	err := o.Parse(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, args...)
	return o, err
}

func TestDefaultsAndEnv(t *testing.T) {
	o, err := parse(map[string]string{"CLUSTER_NAME": "c"})
	require.NoError(t, err)
	assert.Equal(t, 0.075, o.VMMemoryOverheadPercent)
	assert.Equal(t, time.Minute, o.AMIRefreshInterval)
	assert.Equal(t, time.Minute, o.SubnetRefreshInterval)
	assert.Equal(t, "NodeClassCEL=false", o.AWSFeatureGates)
	assert.False(t, o.IsolatedVPC)

	o, err = parse(map[string]string{
		"CLUSTER_NAME": "env", "CLUSTER_ENDPOINT": "https://api.example.com", "ISOLATED_VPC": "true",
		"VM_MEMORY_OVERHEAD_PERCENT": "0.1", "INTERRUPTION_QUEUE": "q", "INTERRUPTION_RATE_LEARNING": "true", "INTERRUPTION_REPLACE_ON_REBALANCE": "true", "RESERVED_ENIS": "1", "DISABLE_DRY_RUN": "true",
	}, "--cluster-name", "flag")
	require.NoError(t, err)
	assert.Equal(t, "flag", o.ClusterName, "a flag beats the environment")
	assert.Equal(t, "https://api.example.com", o.ClusterEndpoint)
	assert.True(t, o.IsolatedVPC)
	assert.Equal(t, 0.1, o.VMMemoryOverheadPercent)
	assert.Equal(t, "q", o.InterruptionQueue)
	assert.True(t, o.InterruptionRateLearning)
	assert.True(t, o.InterruptionReplaceOnRebalance)
	assert.Equal(t, 1, o.ReservedENIs)
	assert.True(t, o.DisableDryRun)
	assert.Len(t, options.EnvNames(), 15)
	assert.Zero(t, o.InstanceStatusInterval, "upstream's minute unless the test-only env says")

	assert.Zero(t, o.SSMInvalidationInterval, "upstream's 30 minutes unless the test-only env says")

	o, err = parse(map[string]string{"CLUSTER_NAME": "c", options.EnvInstanceStatusInterval: "5s", options.EnvSSMInvalidationInterval: "7s"})
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, o.InstanceStatusInterval)
	assert.Equal(t, 7*time.Second, o.SSMInvalidationInterval)
	for _, env := range []string{options.EnvInstanceStatusInterval, options.EnvSSMInvalidationInterval} {
		for _, bad := range []string{"soon", "0s", "-1s"} {
			_, err = parse(map[string]string{"CLUSTER_NAME": "c", env: bad})
			assert.ErrorContains(t, err, env, bad)
		}
	}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"cluster name required", map[string]string{}, "missing field, cluster-name"},
		{"endpoint must be absolute", map[string]string{"CLUSTER_NAME": "c", "CLUSTER_ENDPOINT": "api.example.com"}, "not a valid clusterEndpoint URL"},
		{"negative overhead", map[string]string{"CLUSTER_NAME": "c", "VM_MEMORY_OVERHEAD_PERCENT": "-0.1"}, "vm-memory-overhead-percent cannot be negative"},
		{"negative reserved ENIs", map[string]string{"CLUSTER_NAME": "c", "RESERVED_ENIS": "-1"}, "reserved-enis cannot be negative"},
		{"AMI refresh below a minute", map[string]string{"CLUSTER_NAME": "c", "AMI_REFRESH_INTERVAL": "30s"}, "ami-refresh-interval must be at least 1m"},
		{"subnet refresh below a minute", map[string]string{"CLUSTER_NAME": "c", "SUBNET_REFRESH_INTERVAL": "1s"}, "subnet-refresh-interval must be at least 1m"},
		{"unknown gate", map[string]string{"CLUSTER_NAME": "c", "AWS_FEATURE_GATES": "Foo=true"}, `invalid aws-feature-gates entry "Foo=true"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.env)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
