package sdk

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// deniedCodes are the error codes AWS answers a call the caller's IAM
// policy does not allow with: EC2's, and the other services'.
var deniedCodes = map[string]bool{
	"UnauthorizedOperation": true,
	"AccessDenied":          true,
	"AccessDeniedException": true,
}

// IsDenied reports an error AWS returns for a call IAM did not allow.
func IsDenied(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && deniedCodes[apiErr.ErrorCode()]
}

var throttles = retry.IsErrorThrottles(retry.DefaultThrottles)

// IsThrottled reports an error AWS returns for a call over its request rate.
func IsThrottled(err error) bool { return err != nil && throttles.IsErrorThrottle(err).Bool() }

// countOutcomes adds a middleware that sees every attempt (it runs inside
// the retry loop) and counts the throttled and denied ones.
func countOutcomes(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("KarpenterCountOutcomes",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil {
				service, operation := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				switch {
				case IsThrottled(err):
					metrics.AWSRequestsThrottledTotal.WithLabelValues(service, operation).Inc()
				case IsDenied(err):
					metrics.AWSRequestsDeniedTotal.WithLabelValues(service, operation).Inc()
				}
			}
			return out, md, err
		}), "Retry", middleware.After)
}

// WithMetrics returns cfg with a middleware on every client built from it
// that publishes the aws_sdk_go_* request series (calls, attempts, their
// durations and retries, by service, operation and HTTP status code), as
// upstream publishes them. A middleware of our own rather than a library:
// the one upstream uses drags in the v1 SDK.
func WithMetrics(cfg aws.Config) aws.Config {
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, cfg.APIOptions...), addMetrics)
	return cfg
}

func addMetrics(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("karpenter.RequestMetrics", observeCall), middleware.Before); err != nil {
		return err
	}
	// After the retry middleware, so each attempt passes through once.
	if _, ok := stack.Finalize.Get("Retry"); ok {
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("karpenter.AttemptMetrics", observeAttempt), "Retry", middleware.After)
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("karpenter.AttemptMetrics", observeAttempt), middleware.After)
}

// observeCall counts and times a whole call, retries included.
func observeCall(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	start := time.Now()
	out, md, err := next.HandleInitialize(ctx, in)
	labels := []string{awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), statusCode(awsmiddleware.GetRawResponse(md), err)}
	metrics.SDKRequestTotal.WithLabelValues(labels...).Inc()
	metrics.SDKRequestDurationSeconds.WithLabelValues(labels...).Observe(time.Since(start).Seconds())
	retries := 0
	if results, ok := retry.GetAttemptResults(md); ok && len(results.Results) > 0 {
		retries = len(results.Results) - 1
	}
	metrics.SDKRequestRetryCount.WithLabelValues(labels...).Observe(float64(retries))
	return out, md, err
}

// observeAttempt counts and times one HTTP attempt.
func observeAttempt(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	start := time.Now()
	out, md, err := next.HandleFinalize(ctx, in)
	labels := []string{awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), statusCode(awsmiddleware.GetRawResponse(md), err)}
	metrics.SDKRequestAttemptTotal.WithLabelValues(labels...).Inc()
	metrics.SDKRequestAttemptDurationSeconds.WithLabelValues(labels...).Observe(time.Since(start).Seconds())
	return out, md, err
}

// statusCode is the HTTP status of a response, or of the error's response,
// "0" when no response came back.
func statusCode(raw any, err error) string {
	if r, ok := raw.(*smithyhttp.Response); ok && r != nil && r.Response != nil {
		return strconv.Itoa(r.StatusCode)
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return strconv.Itoa(re.HTTPStatusCode())
	}
	return "0"
}
