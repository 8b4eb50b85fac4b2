package interruption_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const testFinalizer = "test.karpenter.sh/hold"

var (
	cp        *controlplane.ControlPlane
	local     *awslocal.Local
	sqsClient *sqs.Client
	ec2Client *ec2.Client
	imageID   string
	seq       atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	cfg := local.Config(ctx)
	sqsClient, ec2Client = sqs.NewFromConfig(cfg), ec2.NewFromConfig(cfg)
	img, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	if !ok {
		fmt.Fprintln(os.Stderr, "no AL2023 image in the local AWS")
		return 1
	}
	imageID = img.ID
	log.SetLogger(logr.Discard())
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

func unique(prefix string) string { return prefix + "-" + strconv.FormatInt(seq.Add(1), 10) }

// launch runs a real instance in moto and returns its ID and zone.
func launch(t *testing.T, instanceType string) (string, string) {
	t.Helper()
	ctx := context.Background()
	out, err := ec2Client.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(imageID), InstanceType: ec2types.InstanceType(instanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-east-1b")}})
	require.NoError(t, err)
	inst := out.Instances[0]
	id := aws.ToString(inst.InstanceId)
	t.Cleanup(func() {
		_, _ = ec2Client.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	})
	return id, aws.ToString(inst.Placement.AvailabilityZone)
}

// claim is a launched NodeClaim with its registered Node, for the instance.
type claim struct {
	nc   *v1.NodeClaim
	node *corev1.Node
}

// newClaim creates a NodeClaim (held by a test finalizer, so its deletion
// is observable) for a real instance, and its Node.
func newClaim(t *testing.T, instanceID, zone, instanceType, capacityType string) claim {
	t.Helper()
	return newClaimIn(t, unique("pool"), instanceID, zone, instanceType, capacityType)
}

// newClaimIn is newClaim in the named NodePool.
func newClaimIn(t *testing.T, pool, instanceID, zone, instanceType, capacityType string) claim {
	t.Helper()
	ctx := context.Background()
	providerID := fmt.Sprintf("aws:///%s/%s", zone, instanceID)
	labels := map[string]string{
		v1.NodePoolLabelKey: pool, v1.CapacityTypeLabelKey: capacityType,
		corev1.LabelInstanceTypeStable: instanceType, corev1.LabelTopologyZone: zone,
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: unique("node"), Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	require.NoError(t, cp.Client.Create(ctx, node))
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: unique("claim"), Labels: labels, Finalizers: []string{testFinalizer}}}
	nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	require.NoError(t, cp.Client.Create(ctx, nc))
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = node.Name
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	t.Cleanup(func() {
		ctx := context.Background()
		stored := &v1.NodeClaim{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), stored); err == nil {
			stored.Finalizers = nil
			_ = cp.Client.Update(ctx, stored)
			_ = cp.Client.Delete(ctx, stored)
		}
		_ = cp.Client.Delete(ctx, node)
	})
	return claim{nc: nc, node: node}
}

// deleting reports whether the NodeClaim has been deleted (or is gone).
func deleting(t *testing.T, nc *v1.NodeClaim) bool {
	t.Helper()
	got := &v1.NodeClaim{}
	err := cp.Client.Get(context.Background(), client.ObjectKeyFromObject(nc), got)
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return !got.DeletionTimestamp.IsZero()
}

func get(t *testing.T, nc *v1.NodeClaim) *v1.NodeClaim {
	t.Helper()
	got := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(context.Background(), client.ObjectKeyFromObject(nc), got))
	return got
}

// recorder remembers events by object name.
type recorder struct {
	mu     sync.Mutex
	events map[string][]string
}

func newRecorder() *recorder { return &recorder{events: map[string][]string{}} }

func (r *recorder) Eventf(obj runtime.Object, _, reason, _ string, _ ...any) {
	name := obj.(metav1.Object).GetName()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[name] = append(r.events[name], reason)
}

func (r *recorder) reasons(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events[name]...)
}

func createQueue(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	name := unique("interruption-queue")
	out, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = sqsClient.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	return name, aws.ToString(out.QueueUrl)
}

func sendRaw(t *testing.T, url string, bodies ...string) {
	t.Helper()
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := start; i < min(start+10, len(bodies)); i++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(bodies[i])})
		}
		out, err := sqsClient.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		require.NoError(t, err)
		require.Empty(t, out.Failed)
	}
}

// queueEmpty reports whether no message is visible or in flight.
func queueEmpty(t *testing.T, url string) bool {
	t.Helper()
	out, err := sqsClient.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" &&
		out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] == "0"
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, c.Write(m))
	return m.GetCounter().GetValue()
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, g.Write(m))
	return m.GetGauge().GetValue()
}
