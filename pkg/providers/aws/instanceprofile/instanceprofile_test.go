package instanceprofile_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instanceprofile"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

const cluster = "ip-test"

var (
	local   *awslocal.Local
	clients *sdk.Clients
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	if local, err = awslocal.Start(ctx, awslocal.Options{}); err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	clients = sdk.New(local.Config(ctx), 0)
	for _, r := range []struct{ name, path string }{{"role-a", "/"}, {"role-b", "/teams/b/"}} {
		if _, err = clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(r.name), Path: aws.String(r.path),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)}); err != nil {
			break
		}
	}
	cancel()
	if err != nil {
		local.Stop()
		fmt.Fprintln(os.Stderr, "creating roles:", err)
		os.Exit(1)
	}
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

func nodeClass(name, uid, role string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)},
		Spec: awsv1.EC2NodeClassSpec{Role: role, Tags: map[string]string{"team": "x"}}}
}

func profile(t *testing.T, name string) *iam.GetInstanceProfileOutput {
	t.Helper()
	out, err := clients.IAM.GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	require.NoError(t, err)
	return out
}

func TestNames(t *testing.T) {
	a, b := instanceprofile.NewName(cluster, "us-east-1", "default"), instanceprofile.NewName(cluster, "us-east-1", "default")
	assert.Regexp(t, regexp.MustCompile(`^ip-test_[0-9]+$`), a)
	assert.NotEqual(t, a, b, "each profile gets a fresh UUID in its hash")
	assert.Equal(t, "/karpenter/us-east-1/ip-test/", instanceprofile.ClusterPath("us-east-1", cluster))
	assert.Equal(t, "/karpenter/us-east-1/ip-test/u1/", instanceprofile.NodeClassPath("us-east-1", cluster, "u1"))
}

func TestEnsureCreatesTaggedProfileAndKeepsIt(t *testing.T) {
	ctx := context.Background()
	p := instanceprofile.NewProvider(clients.IAM, "us-east-1", cluster)
	nc := nodeClass("ensure", "uid-ensure", "role-a")
	name, err := p.Ensure(ctx, nc)
	require.NoError(t, err)
	out := profile(t, name)
	assert.Equal(t, "/karpenter/us-east-1/ip-test/uid-ensure/", aws.ToString(out.InstanceProfile.Path))
	require.Len(t, out.InstanceProfile.Roles, 1)
	assert.Equal(t, "role-a", aws.ToString(out.InstanceProfile.Roles[0].RoleName))
	tags := map[string]string{}
	for _, tag := range out.InstanceProfile.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	assert.Equal(t, map[string]string{"team": "x", "kubernetes.io/cluster/ip-test": "owned", "eks:eks-cluster-name": "ip-test",
		"karpenter.k8s.aws/ec2nodeclass": "ensure", "topology.kubernetes.io/region": "us-east-1"}, tags)

	nc.Status.InstanceProfile = name
	again, err := p.Ensure(ctx, nc)
	require.NoError(t, err)
	assert.Equal(t, name, again, "a profile holding the role is kept")

	// A role with a path goes in by its name.
	nc.Spec.Role = "teams/b/role-b"
	rotated, err := p.Ensure(ctx, nc)
	require.NoError(t, err)
	assert.NotEqual(t, name, rotated)
	assert.Equal(t, "role-b", aws.ToString(profile(t, rotated).InstanceProfile.Roles[0].RoleName))

	listed, err := p.ListNodeClassProfiles(ctx, nc)
	require.NoError(t, err)
	assert.Len(t, listed, 2, "the old profile stays for cleanup")
	all, err := p.ListClusterProfiles(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(all), 2)
}

func TestCreateIsIdempotentAndFixesTheRole(t *testing.T) {
	ctx := context.Background()
	p := instanceprofile.NewProvider(clients.IAM, "us-east-1", cluster)
	require.NoError(t, p.Create(ctx, "fixed-name", "role-a", nil, "uid-fixed"))
	require.NoError(t, p.Create(ctx, "fixed-name", "role-a", nil, "uid-fixed"))
	// A fresh provider (no cache) sees role-a and swaps it for role-b.
	require.NoError(t, instanceprofile.NewProvider(clients.IAM, "us-east-1", cluster).Create(ctx, "fixed-name", "role-b", nil, "uid-fixed"))
	roles := profile(t, "fixed-name").InstanceProfile.Roles
	require.Len(t, roles, 1)
	assert.Equal(t, "role-b", aws.ToString(roles[0].RoleName))
}

func TestMissingRole(t *testing.T) {
	err := instanceprofile.NewProvider(clients.IAM, "us-east-1", cluster).Create(context.Background(), "never", "no-such-role", nil, "uid")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "role no-such-role does not exist")
	_, err = clients.IAM.GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("never")})
	assert.True(t, instanceprofile.IsNotFound(err), "nothing created: %v", err)
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	p := instanceprofile.NewProvider(clients.IAM, "us-east-1", cluster)
	require.NoError(t, p.Create(ctx, "to-delete", "role-a", nil, "uid-del"))
	require.NoError(t, p.Delete(ctx, "to-delete"))
	_, found, err := p.Get(ctx, "to-delete")
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, p.Delete(ctx, "to-delete"), "deleting a missing profile is not an error")
}
