package cloudprovider_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
)

func resourceMilli(m int64) *resource.Quantity {
	return resource.NewMilliQuantity(m, resource.DecimalSI)
}

// newEnvSharingClass is a second, freshly built provider on e's class: a
// controller that restarted and lost its in-memory state.
func newEnvSharingClass(t *testing.T, e *env) *env {
	unavailable := cloudprovider.NewUnavailableOfferings(nil, 0)
	types := instancetypes.NewProvider(ec2API, prices, instancetypes.Options{Region: "us-east-1", Settings: instancetype.DefaultSettings(), Unavailable: unavailable})
	subnets := subnet.NewProvider(ec2API, time.Minute)
	return &env{unavailable: unavailable, types: types, subnets: subnets, nodeClass: e.nodeClass, cp: awscloudprovider.New(awscloudprovider.Options{
		Kube: kube, InstanceTypes: types,
		LaunchTemplates: launchtemplate.NewProvider(ec2API, clusterName, launchtemplate.ProviderOptions{}),
		Instances:       instance.NewProvider(ec2API, clusterName, unavailable, instance.WithSubnets(subnets)),
		Subnets:         subnets,
		Cluster:         launchtemplate.Cluster{Name: clusterName, Endpoint: "https://cluster.example.com", CABundle: "Y2E=", CIDR: "10.100.0.0/16", DNS: "10.100.0.10"},
	})}
}

// deleteUntilGone repeats Delete, as the lifecycle does, until it reports
// the instance gone.
func deleteUntilGone(t *testing.T, e *env, nc *v1.NodeClaim) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		err := e.cp.Delete(context.Background(), nc)
		if cloudprovider.IsNodeClaimNotFoundError(err) {
			return nil
		}
		if err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("instance %s not gone after 30s", nc.Status.ProviderID)
	return nil
}

func cleanup(t *testing.T, e *env, got *v1.NodeClaim) {
	t.Helper()
	nc := got.DeepCopy()
	require.NoError(t, deleteUntilGone(t, e, nc))
}

// recordingEC2 is the real EC2 client that keeps every CreateFleet request.
type recordingEC2 struct {
	*ec2.Client
	mu     sync.Mutex
	fleets []*ec2.CreateFleetInput
}

func (r *recordingEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	r.mu.Lock()
	r.fleets = append(r.fleets, in)
	r.mu.Unlock()
	return r.Client.CreateFleet(ctx, in, opts...)
}

func (r *recordingEC2) last(t *testing.T) *ec2.CreateFleetInput {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.fleets)
	return r.fleets[len(r.fleets)-1]
}
