package sdk

import (
	"context"
	"errors"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

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
