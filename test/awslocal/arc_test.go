package awslocal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// TestZonalShiftAPI drives ARC's zonal shift API through the SDK: an EKS
// cluster is not a managed resource until zonal shift is enabled on it; a
// started shift appears on the resource (applied, with its expiry) and in
// ListZonalShifts; a second active shift is refused; cancelling removes it;
// an autoshift applies only once autoshift is enabled on the resource.
func TestZonalShiftAPI(t *testing.T) {
	ctx := context.Background()
	_, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: "arc-test"})
	require.NoError(t, err)
	arc := arczonalshift.NewFromConfig(local.Config(ctx))
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}

	_, err = arc.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String("arn:aws:eks:us-east-1:123456789012:cluster/arc-test")})
	require.Equal(t, "ResourceNotFoundException", code(err), "not registered yet: %v", err)

	arn, err := local.EnableZonalShift(ctx, "arc-test", false)
	require.NoError(t, err)
	res, err := arc.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
	require.NoError(t, err)
	require.Equal(t, arn, aws.ToString(res.Arn))
	require.Empty(t, res.ZonalShifts)
	require.Equal(t, float32(1), res.AppliedWeights["use1-az1"])

	_, err = arc.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{ResourceIdentifier: aws.String(arn), AwayFrom: aws.String("us-east-1a"), ExpiresIn: aws.String("30m"), Comment: aws.String("x")})
	require.Equal(t, "ValidationException", code(err), "a zone name is not a zone ID: %v", err)
	started, err := arc.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{ResourceIdentifier: aws.String(arn), AwayFrom: aws.String("use1-az1"), ExpiresIn: aws.String("30m"), Comment: aws.String("impaired")})
	require.NoError(t, err)
	require.Equal(t, arctypes.ZonalShiftStatusActive, started.Status)
	require.WithinDuration(t, time.Now().Add(30*time.Minute), aws.ToTime(started.ExpiryTime), 5*time.Second)
	_, err = arc.StartZonalShift(ctx, &arczonalshift.StartZonalShiftInput{ResourceIdentifier: aws.String(arn), AwayFrom: aws.String("use1-az2"), ExpiresIn: aws.String("1h"), Comment: aws.String("x")})
	require.Equal(t, "ConflictException", code(err), "one active shift per resource: %v", err)

	res, err = arc.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
	require.NoError(t, err)
	require.Len(t, res.ZonalShifts, 1)
	require.Equal(t, "use1-az1", aws.ToString(res.ZonalShifts[0].AwayFrom))
	require.Equal(t, arctypes.AppliedStatusApplied, res.ZonalShifts[0].AppliedStatus)
	require.Equal(t, float32(0), res.AppliedWeights["use1-az1"])
	list, err := arc.ListZonalShifts(ctx, &arczonalshift.ListZonalShiftsInput{Status: arctypes.ZonalShiftStatusActive, ResourceIdentifier: aws.String(arn)})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)

	_, err = arc.CancelZonalShift(ctx, &arczonalshift.CancelZonalShiftInput{ZonalShiftId: started.ZonalShiftId})
	require.NoError(t, err)
	res, err = arc.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
	require.NoError(t, err)
	require.Empty(t, res.ZonalShifts)

	require.NoError(t, local.StartAutoshift(ctx, "use1-az3"))
	defer local.EndAutoshift("use1-az3")
	res, err = arc.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
	require.NoError(t, err)
	require.Empty(t, res.Autoshifts, "autoshift is off on the resource")
	_, err = arc.UpdateZonalAutoshiftConfiguration(ctx, &arczonalshift.UpdateZonalAutoshiftConfigurationInput{ResourceIdentifier: aws.String(arn), ZonalAutoshiftStatus: arctypes.ZonalAutoshiftStatusEnabled})
	require.NoError(t, err)
	res, err = arc.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(arn)})
	require.NoError(t, err)
	require.Len(t, res.Autoshifts, 1)
	require.Equal(t, "use1-az3", aws.ToString(res.Autoshifts[0].AwayFrom))
	autos, err := arc.ListAutoshifts(ctx, &arczonalshift.ListAutoshiftsInput{Status: arctypes.AutoshiftExecutionStatusActive})
	require.NoError(t, err)
	require.Len(t, autos.Items, 1)
}
