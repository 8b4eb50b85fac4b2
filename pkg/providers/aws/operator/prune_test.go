package operator_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	coreoperator "github.com/karpenter-go/karpenter/pkg/operator"
	coreoptions "github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	awsoperator "github.com/karpenter-go/karpenter/pkg/providers/aws/operator"
	awsoptions "github.com/karpenter-go/karpenter/pkg/providers/aws/options"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestLeaderPrunesLaunchTemplates: the AWS operator runs the launch
// template pruner on the leader. A template of the cluster that no launch
// uses (left by a previous leader) is deleted through the SDK on the local
// AWS; another cluster's template is kept.
func TestLeaderPrunesLaunchTemplates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const clusterName = "leader-prunes"
	ec2api := ec2.NewFromConfig(local.Config(ctx))
	create := func(name, cluster string) {
		_, err := ec2api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12c6146b")},
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
				{Key: aws.String(launchtemplate.ClusterTagKey), Value: aws.String(cluster)},
			}}},
		})
		require.NoError(t, err)
	}
	exists := func(name string) bool {
		out, err := ec2api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
			{Name: aws.String("launch-template-name"), Values: []string{name}},
		}})
		require.NoError(t, err)
		return len(out.LaunchTemplates) > 0
	}
	create("karpenter.k8s.aws/leader-prunes-stale", clusterName)
	create("karpenter.k8s.aws/leader-prunes-other", "another-cluster")

	o := coreoptions.New()
	var err error
	for _, port := range []*int{&o.MetricsPort, &o.HealthProbePort} {
		*port, err = controlplane.FreePort()
		require.NoError(t, err)
	}
	o.LeaderElectionNamespace, o.LeaderElectionName = "default", "leader-prunes"
	o.LogOutputPaths = filepath.Join(t.TempDir(), "log.json")
	op, err := coreoperator.New(ctx, cp.Config, o)
	require.NoError(t, err)
	settings := awsoptions.New()
	settings.ClusterName, settings.ClusterEndpoint = clusterName, "https://127.0.0.1:6443"
	p, err := awsoperator.New(ctx, awsoperator.Options{
		Kube: op.Client, RestConfig: cp.Config, AWS: local.Config(ctx), Settings: settings,
		Unavailable: cloudprovider.NewUnavailableOfferings(op.Clock, 0), Clock: op.Clock,
		LaunchTemplateTTL: time.Second, LaunchTemplatePruneInterval: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, p.Register(ctx, op.Manager))
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	select {
	case <-op.Elected():
	case <-time.After(time.Minute):
		t.Fatal("the replica did not take the lease")
	}
	require.Eventually(t, func() bool { return !exists("karpenter.k8s.aws/leader-prunes-stale") }, time.Minute, 100*time.Millisecond,
		"the leader prunes the cluster's unused template")
	require.True(t, exists("karpenter.k8s.aws/leader-prunes-other"), "another cluster's template is kept")
	_, err = ec2api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("karpenter.k8s.aws/leader-prunes-other")})
	require.NoError(t, err)
}
