package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cli"
)

// cliAnswersForAWSPool asks the karpenter CLI (its package, against the
// live cluster) about the EC2NodeClass pool general-purpose, with the AWS
// configuration the SDK's default chain gives it from the local AWS's
// environment, as `karpenter` gets it from a user's: its instance types and
// prices come from EC2 through the AWS provider. `why pod` explains the
// pending arm64 pod with the pool's own refusal, `why node` answers for a
// launched node, `status` prices the pool's nodes at the local AWS's
// prices, and `simulate` predicts NodeClaims of EC2 instance types for a
// scale-up. Without AWS credentials the pool is left out, saying so.
func cliAnswersForAWSPool(t *testing.T, ctx context.Context, e *awsEnv, pending *corev1.Pod) {
	t.Helper()
	const pool = "general-purpose"
	for _, kv := range e.local.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	require.NoError(t, err)
	objects, err := cli.Load(ctx, e.cp.Client, time.Now())
	require.NoError(t, err)
	s, err := cli.NewSession(objects, cli.Options{AWS: &cfg})
	require.NoError(t, err)

	why, err := s.WhyPod(ctx, client.ObjectKeyFromObject(pending))
	require.NoError(t, err)
	require.Equal(t, "Unschedulable", why.Phase, "%+v", why)
	var verdict *cli.PoolVerdict
	for i := range why.NodePools {
		if why.NodePools[i].NodePool == pool {
			verdict = &why.NodePools[i]
		}
	}
	require.NotNil(t, verdict, "why pod names the pool: %+v", why)
	require.NotEqual(t, "Skipped", verdict.Kind, "the pool's instance types resolve through the AWS provider: %+v", verdict)
	require.Contains(t, verdict.Message, corev1.LabelArchStable)

	offline, err := cli.NewSession(objects, cli.Options{})
	require.NoError(t, err)
	why, err = offline.WhyPod(ctx, client.ObjectKeyFromObject(pending))
	require.NoError(t, err)
	skipped := false
	for _, v := range why.NodePools {
		skipped = skipped || (v.NodePool == pool && v.Kind == "Skipped" && strings.Contains(v.Message, "without AWS credentials"))
	}
	require.True(t, skipped, "without AWS credentials the pool is left out, saying why: %+v", why.NodePools)

	var claims v1.NodeClaimList
	require.NoError(t, e.cp.Client.List(ctx, &claims))
	require.NotEmpty(t, claims.Items)
	node, err := s.WhyNode(ctx, claims.Items[0].Status.NodeName)
	require.NoError(t, err)
	require.Equal(t, pool, node.NodePool)
	require.NotEmpty(t, node.Message)
	for _, v := range node.Verdicts {
		require.NotContains(t, []string{"InstanceTypeNotFound", "OfferingNotFound"}, v.Kind, "the node is priced: %s", v.Message)
	}

	want := 0.0
	for _, nc := range claims.Items {
		price, ok := e.local.OnDemandPrice(nc.Labels[corev1.LabelInstanceTypeStable], cfg.Region)
		require.True(t, ok)
		want += price
	}
	var status *cli.PoolStatus
	for _, p := range s.Status(ctx).NodePools {
		if p.Name == pool {
			status = &p
		}
	}
	require.NotNil(t, status)
	require.Equal(t, len(claims.Items), status.Nodes)
	require.Zero(t, status.Unpriced, "every node is priced from its EC2 offering")
	require.InDelta(t, want, status.CostPerHour, 1e-6, "status prices the nodes at the local AWS's on-demand prices")

	changes, err := cli.ReadChanges([]byte(strings.Replace(awsInflate, "replicas: 0", "replicas: 16", 1)))
	require.NoError(t, err)
	predicted, err := s.Simulate(ctx, changes)
	require.NoError(t, err)
	require.NotEmpty(t, predicted.NodeClaims, "simulate plans NodeClaims from the EC2 pool: %+v", predicted)
	for _, nc := range predicted.NodeClaims {
		require.Equal(t, pool, nc.NodePool)
		require.Positive(t, nc.Price)
		require.Regexp(t, `^[a-z][a-z0-9-]*\.[a-z0-9]+$`, nc.InstanceType, "an EC2 instance type")
	}
	require.Greater(t, predicted.CostAfter, predicted.CostBefore)
	t.Logf("karpenter CLI on the EC2 pool: %d nodes at $%.4f/h; simulate 16 inflate: %d NodeClaims, $%.4f/h -> $%.4f/h",
		status.Nodes, status.CostPerHour, len(predicted.NodeClaims), predicted.CostBefore, predicted.CostAfter)
}
