package operator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	coreoperator "github.com/karpenter-go/karpenter/pkg/operator"
	coreoptions "github.com/karpenter-go/karpenter/pkg/operator/options"
	awsoperator "github.com/karpenter-go/karpenter/pkg/providers/aws/operator"
	awsoptions "github.com/karpenter-go/karpenter/pkg/providers/aws/options"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var (
	cp    *controlplane.ControlPlane
	local *awslocal.Local
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	code := controlplane.Main(m, controlplane.Options{}, &cp)
	local.Stop()
	os.Exit(code)
}

// TestStandbyReplicaIsWarm: a replica that does not lead (another holds
// the lease) loads instance types and offerings and computes its classes'
// lists at start, so when it takes over its first GetInstanceTypes calls
// no EC2 API.
func TestStandbyReplicaIsWarm(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubeCtx := context.Background()

	// Another replica holds the lease and keeps it for the test.
	const leaseName = "standby-warm"
	now := metav1.NewMicroTime(time.Now())
	require.NoError(t, cp.Client.Create(kubeCtx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: leaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}))
	// A class the nodeclass controller (leader-only) resolved earlier.
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "standby"},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-1"}},
		},
	}
	require.NoError(t, cp.Client.Create(kubeCtx, class))
	class.Status.Subnets = []awsv1.Subnet{{ID: "subnet-1", Zone: "us-east-1a", ZoneID: "use1-az6"}}
	require.NoError(t, cp.Client.Status().Update(kubeCtx, class))

	o := coreoptions.New()
	var err error
	for _, port := range []*int{&o.MetricsPort, &o.HealthProbePort} {
		*port, err = controlplane.FreePort()
		require.NoError(t, err)
	}
	o.LeaderElectionNamespace, o.LeaderElectionName = "default", leaseName
	o.LogOutputPaths = filepath.Join(t.TempDir(), "log.json")
	op, err := coreoperator.New(ctx, cp.Config, o)
	require.NoError(t, err)
	settings := awsoptions.New()
	settings.ClusterName, settings.ClusterEndpoint = "standby", "https://127.0.0.1:6443"
	p, err := awsoperator.New(ctx, awsoperator.Options{
		Kube: op.Client, RestConfig: cp.Config, AWS: local.Config(ctx), Settings: settings,
		Unavailable: cloudprovider.NewUnavailableOfferings(op.Clock, 0), Clock: op.Clock,
	})
	require.NoError(t, err)
	require.NoError(t, p.Register(ctx, op.Manager))
	op.HoldLeadership(p.Warm())
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	select {
	case <-p.Warm():
	case <-time.After(2 * time.Minute):
		t.Fatal("the standby did not load its instance types")
	}
	select {
	case <-op.Elected():
		t.Fatal("the standby took a lease another replica holds")
	default:
	}

	describes := func() int {
		return local.Calls("ec2", "DescribeInstanceTypes") + local.Calls("ec2", "DescribeInstanceTypeOfferings")
	}
	before := describes()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "standby"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class.Name}
	its, err := p.CloudProvider.GetInstanceTypes(ctx, np)
	require.NoError(t, err)
	assert.NotEmpty(t, its)
	assert.Equal(t, before, describes(), "the first GetInstanceTypes is served from the loaded caches")
}
