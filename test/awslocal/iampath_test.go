package awslocal_test

import (
	"context"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIAMListsHonourPathPrefix: as IAM, ListInstanceProfiles and ListRoles
// return only what lies under PathPrefix (moto returns everything).
func TestIAMListsHonourPathPrefix(t *testing.T) {
	ctx := context.Background()
	api := iam.NewFromConfig(local.Config(ctx))
	for name, path := range map[string]string{"pp-a1": "/pp/a/", "pp-a2": "/pp/a/x/", "pp-b": "/pp/b/"} {
		_, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String(path)})
		require.NoError(t, err)
		_, err = api.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: aws.String(path),
			AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)})
		require.NoError(t, err)
	}
	profiles, err := api.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/pp/a/")})
	require.NoError(t, err)
	var got []string
	for _, p := range profiles.InstanceProfiles {
		got = append(got, aws.ToString(p.InstanceProfileName))
	}
	sort.Strings(got)
	assert.Equal(t, []string{"pp-a1", "pp-a2"}, got)

	roles, err := api.ListRoles(ctx, &iam.ListRolesInput{PathPrefix: aws.String("/pp/b/")})
	require.NoError(t, err)
	require.Len(t, roles.Roles, 1)
	assert.Equal(t, "pp-b", aws.ToString(roles.Roles[0].RoleName))

	all, err := api.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(all.InstanceProfiles), 3, "no prefix lists everything")
}
