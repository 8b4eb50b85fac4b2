package nodeclass_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/amifamily"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instanceprofile"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/securitygroup"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// al2023Latest maps "arch/variant" to the image the latest parameter names.
func al2023Latest(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range []awslocal.Series{
		{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "x86_64", Variant: "standard"},
		{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "x86_64", Variant: "nvidia"},
		{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "x86_64", Variant: "neuron"},
		{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "arm64", Variant: "standard"},
		{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "arm64", Variant: "nvidia"},
	} {
		img, ok := local.LatestImage(s)
		require.True(t, ok, s.String())
		arch := map[string]string{"x86_64": "amd64", "arm64": "arm64"}[s.Arch]
		out[arch+"/"+s.Variant] = img.ID
	}
	return out
}

// variantOf reads back which variant a status AMI's requirements describe.
func variantOf(a awsv1.AMI) string {
	var arch, variant string
	for _, r := range a.Requirements {
		switch {
		case r.Key == corev1.LabelArchStable:
			arch = r.Values[0]
		case r.Key == awsv1.LabelInstanceGPUCount && r.Operator == corev1.NodeSelectorOpExists:
			variant = "nvidia"
		case r.Key == awsv1.LabelInstanceAcceleratorCount && r.Operator == corev1.NodeSelectorOpExists:
			variant = "neuron"
		case r.Operator == corev1.NodeSelectorOpDoesNotExist && variant == "":
			variant = "standard"
		}
	}
	return arch + "/" + variant
}

func TestStatusResolvesEverything(t *testing.T) {
	ctx := context.Background()
	c, _ := newController(0)
	newNodeClass(t, "default", nil)
	res := reconcileOnce(t, c, "default")
	assert.Equal(t, time.Minute, res.RequeueAfter, "subnets requeue after 1m, the soonest")

	nc := get(t, "default")
	assert.Contains(t, nc.Finalizers, awsv1.TerminationFinalizer)
	for _, cond := range []string{awsv1.ConditionTypeReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
		awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeValidationSucceeded, awsv1.ConditionTypePlacementGroupReady} {
		got := condition(nc, cond)
		assert.Equal(t, metav1.ConditionTrue, got.Status, "%s: %s %s", cond, got.Reason, got.Message)
		assert.Equal(t, cond, got.Reason)
		assert.Equal(t, nc.Generation, got.ObservedGeneration)
	}

	// Subnets: the three tagged ones, most free addresses first, with zones.
	require.Len(t, nc.Status.Subnets, 3)
	var gotIDs []string
	for _, s := range nc.Status.Subnets {
		gotIDs = append(gotIDs, s.ID)
		assert.True(t, strings.HasPrefix(s.Zone, "us-east-1"), s.Zone)
		assert.NotEmpty(t, s.ZoneID)
	}
	assert.Equal(t, subnetIDs, gotIDs, "/20, /22, /24 in order of available addresses")
	assert.Equal(t, "us-east-1a", nc.Status.Subnets[0].Zone)

	// Security groups, sorted by id, with their names.
	want := append([]string(nil), sgIDs...)
	sort.Strings(want)
	require.Len(t, nc.Status.SecurityGroups, 2)
	for i, g := range nc.Status.SecurityGroups {
		assert.Equal(t, want[i], g.ID)
		assert.True(t, strings.HasPrefix(g.Name, clusterName+"-"), g.Name)
	}

	// AMIs: one per AL2023 variant and architecture, each the latest.
	latest := al2023Latest(t)
	require.Len(t, nc.Status.AMIs, len(latest))
	for _, a := range nc.Status.AMIs {
		assert.Equal(t, latest[variantOf(a)], a.ID, "%s %v", a.Name, a.Requirements)
		assert.Equal(t, corev1.LabelArchStable, a.Requirements[0].Key, "shortest key first, as upstream sorts")
		assert.True(t, strings.HasPrefix(a.Name, "amazon-eks-node-al2023-"), a.Name)
	}

	// The managed instance profile: named for the cluster, on the class's
	// path, tagged, holding the role.
	name := nc.Status.InstanceProfile
	require.True(t, strings.HasPrefix(name, clusterName+"_"), name)
	out, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	require.NoError(t, err)
	assert.Equal(t, "/karpenter/us-east-1/"+clusterName+"/"+string(nc.UID)+"/", aws.ToString(out.InstanceProfile.Path))
	require.Len(t, out.InstanceProfile.Roles, 1)
	assert.Equal(t, nodeRole, aws.ToString(out.InstanceProfile.Roles[0].RoleName))
	gotTags := map[string]string{}
	for _, tag := range out.InstanceProfile.Tags {
		gotTags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	assert.Equal(t, map[string]string{
		"kubernetes.io/cluster/" + clusterName: "owned",
		"eks:eks-cluster-name":                 clusterName,
		"karpenter.k8s.aws/ec2nodeclass":       "default",
		"topology.kubernetes.io/region":        "us-east-1",
	}, gotTags)

	// A second pass keeps the same profile rather than minting another.
	reconcileOnce(t, c, "default")
	assert.Equal(t, name, get(t, "default").Status.InstanceProfile)
	profiles, err := instanceprofile.NewProvider(clients.IAM, clients.Region, clusterName).ListNodeClassProfiles(ctx, nc)
	require.NoError(t, err)
	assert.Len(t, profiles, 1)
}

func TestSelectorMatchingNothing(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*awsv1.EC2NodeClass)
		cond    string
		reason  string
		message string
		requeue time.Duration
	}{
		{"subnets", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{discovery: "elsewhere"}}}
		}, awsv1.ConditionTypeSubnetsReady, "SubnetsNotFound", "SubnetSelector did not match any Subnets", time.Minute},
		{"security groups", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "no-such-group"}}
		}, awsv1.ConditionTypeSecurityGroupsReady, "SecurityGroupsNotFound", "SecurityGroupSelector did not match any SecurityGroups", time.Minute},
		{"amis by tag", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "*"}}}
			nc.Spec.AMIFamily = aws.String(awsv1.AMIFamilyAL2023)
		}, awsv1.ConditionTypeAMIsReady, "AMINotFound", "AMISelector did not match any AMIs", time.Minute},
		{"alias pinned to an unpublished version", func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v19990101"}}
		}, awsv1.ConditionTypeAMIsReady, "AMINotFound", `failed to discover any AMIs for alias "al2023@v19990101" (kubernetes 1.34)`, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newController(0)
			newNodeClass(t, "broken", tt.mutate)
			res := reconcileOnce(t, c, "broken")
			assert.Equal(t, tt.requeue, res.RequeueAfter)
			nc := get(t, "broken")
			got := condition(nc, tt.cond)
			assert.Equal(t, metav1.ConditionFalse, got.Status)
			assert.Equal(t, tt.reason, got.Reason)
			assert.Equal(t, tt.message, got.Message)
			ready := condition(nc, awsv1.ConditionTypeReady)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, "UnhealthyDependents", ready.Reason)
			assert.Contains(t, ready.Message, tt.cond+"=False")
			v := condition(nc, awsv1.ConditionTypeValidationSucceeded)
			assert.Equal(t, metav1.ConditionFalse, v.Status)
			assert.Equal(t, "DependenciesNotReady", v.Reason)
		})
	}
}

func TestInstanceProfileGivenIsUsedAsIs(t *testing.T) {
	c, _ := newController(0)
	newNodeClass(t, "unmanaged", func(nc *awsv1.EC2NodeClass) {
		nc.Spec.Role = ""
		nc.Spec.InstanceProfile = aws.String("KarpenterNodeInstanceProfile-" + clusterName)
	})
	reconcileOnce(t, c, "unmanaged")
	nc := get(t, "unmanaged")
	assert.Equal(t, "KarpenterNodeInstanceProfile-"+clusterName, nc.Status.InstanceProfile)
	assert.Equal(t, metav1.ConditionTrue, condition(nc, awsv1.ConditionTypeInstanceProfileReady).Status)
}

// TestInstanceProfilePropagation: a class whose managed profile was just
// given its role stays not Ready (InstanceProfileReady False, reason
// InstanceProfilePropagating) until instanceprofile.PropagationDelay has
// passed, so no launch names a profile EC2 would refuse; then it goes
// Ready without another IAM change.
func TestInstanceProfilePropagation(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	c, _ := newController(0, func(o *nodeclass.Options) {
		o.InstanceProfiles = instanceprofile.NewProvider(clients.IAM, clients.Region, clusterName).WithPropagation(instanceprofile.PropagationDelay, clock)
	})
	newNodeClass(t, "propagating", nil)
	res := reconcileOnce(t, c, "propagating")
	nc := get(t, "propagating")
	got := condition(nc, awsv1.ConditionTypeInstanceProfileReady)
	assert.Equal(t, metav1.ConditionFalse, got.Status)
	assert.Equal(t, nodeclass.ReasonInstanceProfilePropagating, got.Reason)
	assert.Contains(t, got.Message, nc.Status.InstanceProfile)
	assert.Equal(t, metav1.ConditionFalse, condition(nc, awsv1.ConditionTypeReady).Status)
	assert.NotEmpty(t, nc.Status.InstanceProfile, "the profile is in status while it propagates")
	assert.Greater(t, res.RequeueAfter, time.Duration(0))
	assert.LessOrEqual(t, res.RequeueAfter, instanceprofile.PropagationDelay, "requeued for when it has propagated")

	now = now.Add(instanceprofile.PropagationDelay / 2)
	reconcileOnce(t, c, "propagating")
	assert.Equal(t, nodeclass.ReasonInstanceProfilePropagating, condition(get(t, "propagating"), awsv1.ConditionTypeInstanceProfileReady).Reason)

	now = now.Add(instanceprofile.PropagationDelay)
	reconcileOnce(t, c, "propagating")
	nc = get(t, "propagating")
	assert.Equal(t, metav1.ConditionTrue, condition(nc, awsv1.ConditionTypeInstanceProfileReady).Status)
	assert.Equal(t, metav1.ConditionTrue, condition(nc, awsv1.ConditionTypeReady).Status)
}

func TestRoleChangeCreatesANewProfile(t *testing.T) {
	ctx := context.Background()
	_, err := clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("other-role"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
	require.NoError(t, err)
	c, _ := newController(0)
	newNodeClass(t, "rotate", nil)
	reconcileOnce(t, c, "rotate")
	nc := get(t, "rotate")
	first := nc.Status.InstanceProfile

	nc.Spec.Role = "other-role"
	require.NoError(t, cp.Client.Update(ctx, nc))
	reconcileOnce(t, c, "rotate")
	second := get(t, "rotate").Status.InstanceProfile
	require.NotEqual(t, first, second)
	out, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(second)})
	require.NoError(t, err)
	assert.Equal(t, "other-role", aws.ToString(out.InstanceProfile.Roles[0].RoleName))
}

func TestAliasFollowsANewRelease(t *testing.T) {
	ctx := context.Background()
	// Upstream caches alias parameters for 24h; a short TTL stands in
	// for that day passing.
	c, _ := newController(time.Millisecond)
	newNodeClass(t, "follow", nil)
	reconcileOnce(t, c, "follow")
	before := map[string]string{}
	for _, a := range get(t, "follow").Status.AMIs {
		before[variantOf(a)] = a.ID
	}
	require.Len(t, before, 5)

	img, err := local.PublishImage(ctx, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "x86_64", Variant: "standard"})
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // let the shortened caches expire
	reconcileOnce(t, c, "follow")
	after := map[string]string{}
	nc := get(t, "follow")
	for _, a := range nc.Status.AMIs {
		after[variantOf(a)] = a.ID
	}
	assert.Equal(t, img.ID, after["amd64/standard"])
	assert.NotEqual(t, before["amd64/standard"], img.ID)
	for k, id := range before {
		if k != "amd64/standard" {
			assert.Equal(t, id, after[k], k)
		}
	}
	assert.Equal(t, img.ID, nc.Status.AMIs[0].ID, "the newest image comes first")
}

func TestFinalizerWaitsForNodeClaimsThenRemovesTheProfile(t *testing.T) {
	ctx := context.Background()
	c, rec := newController(0)
	newNodeClass(t, "doomed", nil)
	reconcileOnce(t, c, "doomed")
	profile := get(t, "doomed").Status.InstanceProfile
	require.NotEmpty(t, profile)

	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "doomed-claim"}, Spec: v1.NodeClaimSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "doomed"},
		Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
	}}
	require.NoError(t, cp.Client.Create(ctx, claim))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), claim) })

	require.NoError(t, cp.Client.Delete(ctx, get(t, "doomed")))
	res := reconcileOnce(t, c, "doomed")
	assert.Equal(t, 10*time.Minute, res.RequeueAfter)
	assert.Contains(t, get(t, "doomed").Finalizers, awsv1.TerminationFinalizer, "held while a NodeClaim uses it")
	require.Len(t, rec.events, 1)
	assert.Equal(t, "WaitingOnNodeClaimTermination: Waiting on NodeClaim termination for doomed-claim", rec.events[0])
	_, err := clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
	require.NoError(t, err, "profile kept while the class waits")

	require.NoError(t, cp.Client.Delete(ctx, claim))
	reconcileOnce(t, c, "doomed")
	err = cp.Client.Get(ctx, types.NamespacedName{Name: "doomed"}, &awsv1.EC2NodeClass{})
	assert.True(t, apierrors.IsNotFound(err), "finalizer removed, object gone: %v", err)
	_, err = clients.IAM.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
	assert.True(t, instanceprofile.IsNotFound(err), "managed profile deleted: %v", err)
}

// TestStatusConflictKeepsTheProfile: a status write that loses to another
// write of the class (the hash controller's annotation at start) is
// retried with the profile the failed pass made: IAM sees one
// CreateInstanceProfile and no DeleteInstanceProfile, as a real account
// would, and the class's propagation wait is not started over.
func TestStatusConflictKeepsTheProfile(t *testing.T) {
	ctx := context.Background()
	var attempted []string
	watching, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
	require.NoError(t, err)
	conflicting := interceptor.NewClient(watching, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			nc := obj.(*awsv1.EC2NodeClass)
			attempted = append(attempted, nc.Status.InstanceProfile)
			if len(attempted) == 1 {
				// Another writer gets in first: the optimistic lock of this
				// patch now names a stale resourceVersion.
				fresh := &awsv1.EC2NodeClass{}
				require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(nc), fresh))
				fresh.Annotations = map[string]string{"example.com/other-writer": "1"}
				require.NoError(t, c.Update(ctx, fresh))
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	profiles := instanceprofile.NewProvider(clients.IAM, clients.Region, clusterName).WithPropagation(0, nil)
	c := nodeclass.NewController(conflicting, nodeclass.Options{
		Subnets: subnet.NewProvider(clients.EC2, time.Minute), SecurityGroups: securitygroup.NewProvider(clients.EC2, 0),
		AMIs: amifamily.NewProvider(clients.EC2, clients.SSM, amifamily.Options{
			KubernetesVersion: func(context.Context) (string, error) { return k8sVersion, nil }, ImageTTL: time.Millisecond}),
		InstanceProfiles: profiles, Recorder: &recorder{}, ClusterName: clusterName,
	})
	newNodeClass(t, "conflict", nil)
	creates, deletes := local.Calls("iam", "CreateInstanceProfile"), local.Calls("iam", "DeleteInstanceProfile")

	res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "conflict"}})
	require.NoError(t, err)
	require.True(t, res.Requeue, "the conflicting status write is retried")
	require.Len(t, attempted, 1)
	require.Empty(t, get(t, "conflict").Status.InstanceProfile)

	reconcileOnce(t, c, "conflict")
	nc := get(t, "conflict")
	assert.Equal(t, attempted[0], nc.Status.InstanceProfile, "the retry stores the profile the first pass made")
	assert.Equal(t, 1, local.Calls("iam", "CreateInstanceProfile")-creates)
	assert.Equal(t, 0, local.Calls("iam", "DeleteInstanceProfile")-deletes)
	made, err := profiles.ListNodeClassProfiles(ctx, nc)
	require.NoError(t, err)
	assert.Len(t, made, 1)
}
