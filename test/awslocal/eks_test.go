package awslocal_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// TestUpdateClusterVersion: EKS UpdateClusterVersion (which moto lacks)
// upgrades the record by one minor version, DescribeCluster then reports
// it, and a jump of two versions is refused.
func TestUpdateClusterVersion(t *testing.T) {
	ctx := context.Background()
	_, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: "upgrade-test", KubernetesVersion: "1.34"})
	require.NoError(t, err)
	api := eks.NewFromConfig(local.Config(ctx))
	version := func() string {
		out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("upgrade-test")})
		require.NoError(t, err)
		return aws.ToString(out.Cluster.Version)
	}
	require.Equal(t, "1.34", version())
	_, err = api.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String("upgrade-test"), Version: aws.String("1.36")})
	require.Error(t, err, "two minor versions at once")
	out, err := api.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String("upgrade-test"), Version: aws.String("1.35")})
	require.NoError(t, err)
	require.Equal(t, "Successful", string(out.Update.Status))
	require.Equal(t, "1.35", version())
	_, err = api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("no-such-cluster")})
	require.Error(t, err)
}
