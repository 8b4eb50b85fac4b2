package tagging_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclaim/tagging"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const clusterName = "tagging-test"

var (
	cp     *controlplane.ControlPlane
	local  *awslocal.Local
	ec2API *ec2.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{KubernetesVersions: []string{"1.34"}}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	ec2API = ec2.NewFromConfig(local.Config(ctx))
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

// launch runs a real instance with the given tags.
func launch(t *testing.T, tags map[string]string) string {
	t.Helper()
	img, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.34", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	in := &ec2.RunInstancesInput{ImageId: aws.String(img.ID), InstanceType: ec2types.InstanceTypeM5Large, MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}
	if len(tags) > 0 {
		spec := ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeInstance}
		for k, v := range tags {
			spec.Tags = append(spec.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []ec2types.TagSpecification{spec}
	}
	out, err := ec2API.RunInstances(context.Background(), in)
	require.NoError(t, err)
	return aws.ToString(out.Instances[0].InstanceId)
}

func tagsOf(t *testing.T, id string) map[string]string {
	t.Helper()
	out, err := ec2API.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	tags := map[string]string{}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			for _, tag := range i.Tags {
				tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
		}
	}
	return tags
}

// nodeClaim creates a NodeClaim of an EC2NodeClass for the instance, with
// its status as the lifecycle leaves it.
func nodeClaim(t *testing.T, instanceID string, registered bool, group string) *v1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "nc-" + uuid.NewString()[:8]},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: group, Kind: "EC2NodeClass", Name: "default"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{},
		},
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), nc) })
	nc.Status.ProviderID = "aws:///us-east-1a/" + instanceID
	nc.Status.NodeName = "ip-10-0-0-1.ec2.internal"
	status := metav1.ConditionFalse
	if registered {
		status = metav1.ConditionTrue
	}
	nc.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeRegistered, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}}
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	return nc
}

func reconcileOnce(t *testing.T, c *tagging.Controller, nc *v1.NodeClaim) *v1.NodeClaim {
	t.Helper()
	_, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	require.NoError(t, err)
	got := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got))
	return got
}

func TestTagging(t *testing.T) {
	c := newController()
	tests := []struct {
		name       string
		existing   map[string]string
		registered bool
		group      string
		wantTags   map[string]string
		wantMarked bool
	}{
		{
			name: "registered: Name, nodeclaim and cluster tags", registered: true, group: awsv1.Group,
			wantTags:   map[string]string{tagging.NameTagKey: "ip-10-0-0-1.ec2.internal", awsv1.NodeClaimTagKey: "<nodeclaim>", awsv1.EKSClusterNameTagKey: clusterName},
			wantMarked: true,
		},
		{
			name: "an existing Name is kept", existing: map[string]string{tagging.NameTagKey: "mine"}, registered: true, group: awsv1.Group,
			wantTags:   map[string]string{tagging.NameTagKey: "mine", awsv1.NodeClaimTagKey: "<nodeclaim>", awsv1.EKSClusterNameTagKey: clusterName},
			wantMarked: true,
		},
		{
			name: "not registered yet: untouched", registered: false, group: awsv1.Group,
			wantTags: map[string]string{},
		},
		{
			name: "another provider's NodeClaim: untouched", registered: true, group: "karpenter.kwok.sh",
			wantTags: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := launch(t, tt.existing)
			nc := nodeClaim(t, id, tt.registered, tt.group)
			calls := local.Calls("ec2", "CreateTags")
			got := reconcileOnce(t, c, nc)
			want := map[string]string{}
			for k, v := range tt.wantTags {
				if v == "<nodeclaim>" {
					v = nc.Name
				}
				want[k] = v
			}
			require.Equal(t, want, tagsOf(t, id))
			if !tt.wantMarked {
				require.Empty(t, got.Annotations[awsv1.AnnotationInstanceTagged])
				require.Equal(t, calls, local.Calls("ec2", "CreateTags"), "no CreateTags")
				return
			}
			require.Equal(t, "true", got.Annotations[awsv1.AnnotationInstanceTagged])
			require.Equal(t, "true", got.Annotations[awsv1.AnnotationClusterNameTaggedCompatibility])
			// Tagged once: a second pass calls nothing.
			calls = local.Calls("ec2", "CreateTags")
			reconcileOnce(t, c, got)
			require.Equal(t, calls, local.Calls("ec2", "CreateTags"))
		})
	}
}

func newController() *tagging.Controller {
	return tagging.NewController(cp.Client, ec2API, instance.NewProvider(ec2API, clusterName, nil), clusterName)
}

// TestTaggingStaysWithinFiftyTags: an instance that already carries 48
// tags gets karpenter.sh/nodeclaim and eks:eks-cluster-name, which reach
// exactly EC2's 50, and no Name, which would be the 51st; one with 49
// gets only the NodeClaim's.
func TestTaggingStaysWithinFiftyTags(t *testing.T) {
	c := newController()
	for _, tc := range []struct {
		existing int
		want     []string
	}{
		{48, []string{awsv1.NodeClaimTagKey, awsv1.EKSClusterNameTagKey}},
		{49, []string{awsv1.NodeClaimTagKey}},
		{47, []string{awsv1.NodeClaimTagKey, awsv1.EKSClusterNameTagKey, tagging.NameTagKey}},
	} {
		t.Run(fmt.Sprint(tc.existing), func(t *testing.T) {
			existing := map[string]string{}
			for i := 0; i < tc.existing; i++ {
				existing[fmt.Sprintf("team-%02d", i)] = "x"
			}
			id := launch(t, existing)
			got := reconcileOnce(t, c, nodeClaim(t, id, true, awsv1.Group))
			require.Equal(t, "true", got.Annotations[awsv1.AnnotationInstanceTagged])
			tags := tagsOf(t, id)
			require.LessOrEqual(t, len(tags), 50)
			for _, k := range tc.want {
				require.Contains(t, tags, k)
			}
			require.Len(t, tags, tc.existing+len(tc.want))
		})
	}
}

// TestTaggingDenied: IAM refusing the tags is not retried: the NodeClaim
// is marked and the next pass calls nothing.
func TestTaggingDenied(t *testing.T) {
	c := newController()
	id := launch(t, nil)
	nc := nodeClaim(t, id, true, awsv1.Group)
	_, err := local.AddFault(awslocal.Fault{Service: "ec2", Action: "CreateTags", Kind: awslocal.FaultServerError, Code: "UnauthorizedOperation", Status: 403, Count: 1})
	require.NoError(t, err)
	calls := local.Calls("ec2", "CreateTags")
	got := reconcileOnce(t, c, nc)
	require.Equal(t, 1, local.Calls("ec2", "CreateTags")-calls)
	require.Equal(t, "true", got.Annotations[awsv1.AnnotationInstanceTagged])
	reconcileOnce(t, c, got)
	require.Equal(t, 1, local.Calls("ec2", "CreateTags")-calls)
}

// TestTaggingAGoneInstance: an instance EC2 does not report is looked for
// again while its NodeClaim launched recently (EC2's eventual consistency:
// a new instance can be unknown for seconds while its node has already
// registered); later it is taken as gone and the NodeClaim is marked.
func TestTaggingAGoneInstance(t *testing.T) {
	now := time.Now()
	c := newController().WithClock(func() time.Time { return now })
	nc := nodeClaim(t, "i-0123456789abcdef0", true, awsv1.Group)
	res, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	require.NoError(t, err)
	require.Greater(t, res.RequeueAfter, time.Duration(0), "a just-launched instance may not be visible yet")
	got := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: nc.Name}, got))
	require.Empty(t, got.Annotations[awsv1.AnnotationInstanceTagged], "not marked while it may still appear")

	now = now.Add(10 * time.Minute)
	got = reconcileOnce(t, c, nc)
	require.Equal(t, "true", got.Annotations[awsv1.AnnotationInstanceTagged], "nothing left to tag; the lifecycle handles the gone instance")
}
