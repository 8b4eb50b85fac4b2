// Package sdk builds the aws-sdk-go-v2 configuration and service clients the
// AWS provider uses, from a small set of settings: region, endpoint and retry
// budget. It is the one place that decides where AWS calls go, so pointing
// the whole provider at the local AWS (AWS_ENDPOINT_URL) or at a real region
// is a matter of settings, not code. Every client retries with the SDK's
// adaptive retryer, which slows its own request rate once AWS throttles it,
// and counts throttled and denied attempts (metrics.go).
package sdk

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Settings choose where and how the clients call AWS. Zero values defer to
// the SDK's default chain (env, shared config, IMDS).
type Settings struct {
	// Region overrides the region from the environment or shared config.
	Region string
	// Endpoint is a base URL for every service; empty reads
	// AWS_ENDPOINT_URL (the SDK's own convention), else the real AWS.
	Endpoint string
	// MaxAttempts bounds retries per call; zero keeps the SDK's default (3).
	MaxAttempts int
}

// Load resolves an aws.Config from the default chain plus settings.
func Load(ctx context.Context, s Settings) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if s.Region != "" {
		opts = append(opts, config.WithRegion(s.Region))
	}
	if s.MaxAttempts > 0 {
		opts = append(opts, config.WithRetryMaxAttempts(s.MaxAttempts))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	endpoint := s.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("no AWS region: set AWS_REGION or the region setting")
	}
	Instrument(&cfg, s.MaxAttempts)
	return cfg, nil
}

// Instrument makes cfg's clients retry with the adaptive retryer (up to
// maxAttempts attempts a call, the SDK's default 3 when zero) and count
// throttled and denied attempts, and publishes the aws_sdk_go_* request
// series (see WithMetrics). The adaptive retryer is AWS's own answer
// to account-wide request limits: each client keeps a token bucket that
// shrinks its send rate after a throttle and grows it back after successes,
// so a scale-up of a thousand nodes backs off instead of retrying into
// EC2's buckets at full speed. Each client built from cfg gets a retryer
// (and so a send rate) of its own.
func Instrument(cfg *aws.Config, maxAttempts int) {
	cfg.Retryer = func() aws.Retryer {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			if maxAttempts > 0 {
				o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) { so.MaxAttempts = maxAttempts })
			}
		})
	}
	cfg.APIOptions = append(cfg.APIOptions, countOutcomes, addMetrics)
}

// Clients are the service clients the provider's resolvers share.
type Clients struct {
	Region string
	EC2    *ec2.Client
	SSM    *ssm.Client
	IAM    *iam.Client
}

// New builds the clients from cfg. maxAttempts > 0 overrides cfg's retry
// budget (with the adaptive retryer, see Instrument).
func New(cfg aws.Config, maxAttempts int) *Clients {
	if maxAttempts > 0 {
		cfg = cfg.Copy()
		Instrument(&cfg, maxAttempts)
	}
	return &Clients{
		Region: cfg.Region,
		EC2:    ec2.NewFromConfig(cfg),
		SSM:    ssm.NewFromConfig(cfg),
		IAM:    iam.NewFromConfig(cfg),
	}
}
