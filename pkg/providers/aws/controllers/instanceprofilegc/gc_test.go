package instanceprofilegc_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/instanceprofilegc"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instanceprofile"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

const (
	cluster = "gc-test"
	region  = "us-east-1"
)

var (
	cp      *controlplane.ControlPlane
	local   *awslocal.Local
	clients *sdk.Clients
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		return 1
	}
	defer local.Stop()
	clients = sdk.New(local.Config(ctx), 0)
	for _, role := range []string{"role-a", "role-b"} {
		if _, err := clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(role),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)}); err != nil {
			fmt.Fprintln(os.Stderr, "creating a role:", err)
			return 1
		}
	}
	return controlplane.Main(m, controlplane.Options{}, &cp)
}

func exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := clients.IAM.GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if instanceprofile.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// TestCollect: of the cluster's managed profiles, only the one nothing
// names, that no role change just replaced and that is old enough is
// deleted; another cluster's profile is never touched.
func TestCollect(t *testing.T) {
	ctx := context.Background()
	profiles := instanceprofile.NewProvider(clients.IAM, region, cluster)
	other := instanceprofile.NewProvider(clients.IAM, region, "other-cluster")
	create := func(p *instanceprofile.Provider, name, uid string) {
		require.NoError(t, p.Create(ctx, name, "role-a", map[string]string{"team": "x"}, uid))
	}
	create(profiles, "in-status", "uid-1")
	create(profiles, "on-nodeclaim", "uid-1")
	create(profiles, "orphan", "uid-gone")
	create(other, "other-orphan", "uid-x")

	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "gc"}, Spec: awsv1.EC2NodeClassSpec{Role: "role-a",
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-1"}}}}
	require.NoError(t, cp.Client.Create(ctx, class))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), class) })
	class.Status.InstanceProfile = "in-status"
	require.NoError(t, cp.Client.Status().Update(ctx, class))
	claim := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gc-claim", Annotations: map[string]string{awsv1.AnnotationInstanceProfile: "on-nodeclaim"}},
		Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "gc"},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{}},
	}
	require.NoError(t, cp.Client.Create(ctx, claim))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), claim) })

	// A role change replaces the status's profile: the old one is
	// protected although nothing names it any more.
	rotating := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "rotating", UID: types.UID("uid-2")}, Spec: awsv1.EC2NodeClassSpec{Role: "role-a"}}
	first, err := profiles.Ensure(ctx, rotating)
	require.NoError(t, err)
	rotating.Status.InstanceProfile = first
	rotating.Spec.Role = "role-b"
	second, err := profiles.Ensure(ctx, rotating)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	assert.True(t, profiles.IsProtected(first))

	// Created just now, every profile is too young to collect.
	gc := instanceprofilegc.NewController(cp.Client, profiles, instanceprofilegc.Options{Log: logr.Discard()})
	deleted, err := gc.Collect(ctx)
	require.NoError(t, err)
	assert.Empty(t, deleted)

	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	gc = instanceprofilegc.NewController(cp.Client, profiles, instanceprofilegc.Options{Clock: later, Log: logr.Discard()})
	deleted, err = gc.Collect(ctx)
	require.NoError(t, err)
	sort.Strings(deleted)
	// second is in no status (the rotating class is not stored), so it
	// goes too; first is protected.
	want := []string{"orphan", second}
	sort.Strings(want)
	assert.Equal(t, want, deleted)
	for name, want := range map[string]bool{"in-status": true, "on-nodeclaim": true, first: true, "other-orphan": true, "orphan": false, second: false} {
		assert.Equal(t, want, exists(t, name), name)
	}
}
