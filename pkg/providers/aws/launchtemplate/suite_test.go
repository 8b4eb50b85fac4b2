package launchtemplate_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

var (
	local   *awslocal.Local
	clients *sdk.Clients
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	clients = sdk.New(local.Config(ctx), 0)
	return m.Run()
}

// countingEC2 counts the provider's calls per action, to prove what the
// cache saves.
type countingEC2 struct {
	*ec2.Client
	describe, create, del atomic.Int32
}

func (c *countingEC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	c.describe.Add(1)
	return c.Client.DescribeLaunchTemplates(ctx, in, opts...)
}

func (c *countingEC2) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	c.create.Add(1)
	return c.Client.CreateLaunchTemplate(ctx, in, opts...)
}

func (c *countingEC2) DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	c.del.Add(1)
	return c.Client.DeleteLaunchTemplate(ctx, in, opts...)
}
