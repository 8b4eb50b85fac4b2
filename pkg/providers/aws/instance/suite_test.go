package instance_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// local is the local AWS (moto behind our front) the launch tests share;
// each test uses its own cluster name, so its instances are its own.
var (
	local  *awslocal.Local
	ec2API *ec2.Client
)

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
	ec2API = ec2.NewFromConfig(local.Config(ctx))
	return m.Run()
}
