package sdk_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var local *awslocal.Local

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	return m.Run()
}

// TestAdaptiveRetriesAndOutcomeMetrics: clients retry throttled calls with
// the adaptive retryer and count each throttled attempt; a denied call is
// not retried and is counted once.
func TestAdaptiveRetriesAndOutcomeMetrics(t *testing.T) {
	ctx := context.Background()
	clients := sdk.New(local.Config(ctx), 5)
	_, adaptive := clients.EC2.Options().Retryer.(*retry.AdaptiveMode)
	require.True(t, adaptive, "the EC2 client retries with the adaptive retryer")

	throttled := metrics.AWSRequestsThrottledTotal.WithLabelValues("EC2", "DescribeSubnets")
	before := testutil.ToFloat64(throttled)
	calls := local.Calls("ec2", "DescribeSubnets")
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeSubnets", Kind: awslocal.FaultThrottle, Count: 2})
	require.NoError(t, err)
	_, err = clients.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	require.NoError(t, err, "the third attempt succeeds")
	assert.Equal(t, 3, local.Calls("ec2", "DescribeSubnets")-calls)
	assert.Equal(t, before+2, testutil.ToFloat64(throttled))

	denied := metrics.AWSRequestsDeniedTotal.WithLabelValues("EC2", "DescribeImages")
	before = testutil.ToFloat64(denied)
	calls = local.Calls("ec2", "DescribeImages")
	_, err = local.AddFault(awslocal.Fault{Service: "ec2", Action: "DescribeImages", Kind: awslocal.FaultServerError, Code: "UnauthorizedOperation", Status: 403, Count: 1})
	require.NoError(t, err)
	_, err = clients.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"}})
	require.Error(t, err)
	assert.True(t, sdk.IsDenied(err), "%v", err)
	assert.False(t, sdk.IsThrottled(err))
	assert.Equal(t, 1, local.Calls("ec2", "DescribeImages")-calls, "a denied call is not retried")
	assert.Equal(t, before+1, testutil.ToFloat64(denied))
}
