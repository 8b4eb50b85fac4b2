package sdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// TestRequestMetrics calls EC2 on the local AWS through a config with the
// metrics middleware: a plain call counts one request and one attempt with
// code 200; a call throttled twice counts one request with code 200, three
// attempts (two 503s) and two retries.
func TestRequestMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	local, err := awslocal.Start(ctx, awslocal.Options{})
	require.NoError(t, err)
	defer local.Stop()
	cfg := sdk.WithMetrics(local.Config(ctx))
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 5
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			o.RateLimiter = noRateLimit{}
		})
	}
	client := ec2.NewFromConfig(cfg)

	ok := []string{"EC2", "DescribeRegions", "200"}
	before := counter(t, metrics.SDKRequestTotal, ok)
	_, err = client.DescribeRegions(ctx, &ec2.DescribeRegionsInput{})
	require.NoError(t, err)
	assert.Equal(t, before+1, counter(t, metrics.SDKRequestTotal, ok))
	assert.Equal(t, 1.0, counter(t, metrics.SDKRequestAttemptTotal, ok))

	_, err = local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeAvailabilityZones", Kind: awslocal.FaultThrottle, Count: 2})
	require.NoError(t, err)
	zones := []string{"EC2", "DescribeAvailabilityZones", "200"}
	throttled := []string{"EC2", "DescribeAvailabilityZones", "503"}
	_, err = client.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)
	assert.Equal(t, 1.0, counter(t, metrics.SDKRequestTotal, zones))
	assert.Equal(t, 1.0, counter(t, metrics.SDKRequestAttemptTotal, zones))
	assert.Equal(t, 2.0, counter(t, metrics.SDKRequestAttemptTotal, throttled))
	retries := histogram(t, metrics.SDKRequestRetryCount, zones)
	assert.Equal(t, uint64(1), retries.GetSampleCount())
	assert.Equal(t, 2.0, retries.GetSampleSum())
	assert.Equal(t, uint64(1), histogram(t, metrics.SDKRequestDurationSeconds, zones).GetSampleCount())
}

type noRateLimit struct{}

func (noRateLimit) AddTokens(uint) error { return nil }
func (noRateLimit) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}

func counter(t *testing.T, c *prometheus.CounterVec, labels []string) float64 {
	t.Helper()
	return testutil.ToFloat64(c.WithLabelValues(labels...))
}

func histogram(t *testing.T, h *prometheus.HistogramVec, labels []string) *dto.Histogram {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, h.WithLabelValues(labels...).(prometheus.Metric).Write(m))
	return m.GetHistogram()
}
