package launchtemplate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
)

// overlapEC2 holds each CreateLaunchTemplate until want of them are in
// flight at once (or a few seconds have passed), and records the most it
// saw together.
type overlapEC2 struct {
	*ec2.Client
	want int

	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	most     int
}

func (o *overlapEC2) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	o.mu.Lock()
	o.inFlight++
	o.most = max(o.most, o.inFlight)
	o.cond.Broadcast()
	deadline := time.AfterFunc(3*time.Second, func() { o.mu.Lock(); o.cond.Broadcast(); o.mu.Unlock() })
	start := time.Now()
	for o.most < o.want && time.Since(start) < 3*time.Second {
		o.cond.Wait()
	}
	deadline.Stop()
	o.mu.Unlock()
	defer func() { o.mu.Lock(); o.inFlight--; o.mu.Unlock() }()
	return o.Client.CreateLaunchTemplate(ctx, in, opts...)
}

// TestEnsureAllCreatesConcurrently: a launch that needs several new
// templates (one per image and pod capacity) creates them at once, not one
// after the other on its way to CreateFleet, and still answers in order.
func TestEnsureAllCreatesConcurrently(t *testing.T) {
	nc := readyNodeClass("overlap", awsv1.AMIFamilyAL2023)
	var opts []*launchtemplate.Options
	for _, pods := range []int32{11, 23, 47} {
		opts = append(opts, resolve(t, nc, launchFor("overlap", pods)))
	}
	api := &overlapEC2{Client: clients.EC2, want: len(opts)}
	api.cond = sync.NewCond(&api.mu)
	lts, err := launchtemplate.NewProvider(api, cluster.Name, launchtemplate.ProviderOptions{}).EnsureAll(context.Background(), opts)
	require.NoError(t, err)
	require.Equal(t, len(opts), api.most, "the templates are created together")
	for i, o := range opts {
		name, err := launchtemplate.Name(o)
		require.NoError(t, err)
		require.Equal(t, name, lts[i].Name, "answers in the order asked")
	}
}

// TestDeleteAllTakesEveryTemplate: a class with more templates than a
// default DescribeLaunchTemplates page holds (the local AWS's is 15) has
// every one deleted.
func TestDeleteAllTakesEveryTemplate(t *testing.T) {
	ctx := context.Background()
	p := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{})
	nc := readyNodeClass("many", awsv1.AMIFamilyAL2023)
	var names []string
	for pods := int32(1); pods <= 20; pods++ {
		lt, err := p.Ensure(ctx, resolve(t, nc, launchFor("many", pods)))
		require.NoError(t, err)
		names = append(names, lt.Name)
	}
	require.NoError(t, p.DeleteAll(ctx, nc))
	for _, n := range names {
		require.Empty(t, templatesNamed(t, n), n)
	}
}
