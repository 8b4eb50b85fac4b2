package awslocal_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func describeImage(t *testing.T, id string) (name, arch, platform string, created time.Time) {
	t.Helper()
	out, err := ec2Client(t).DescribeImages(context.Background(), &ec2.DescribeImagesInput{ImageIds: []string{id}})
	require.NoError(t, err)
	require.Len(t, out.Images, 1)
	img := out.Images[0]
	created, err = time.Parse(time.RFC3339, *img.CreationDate)
	require.NoError(t, err)
	return *img.Name, string(img.Architecture), string(img.Platform), created
}

func getParameter(t *testing.T, name string) string {
	t.Helper()
	out, err := ssmClient(t).GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String(name)})
	require.NoError(t, err, name)
	return *out.Parameter.Value
}

func TestPublicParametersResolveToImagesInMoto(t *testing.T) {
	cases := []struct {
		param, namePrefix, arch, platform string
	}{
		{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", "amazon-eks-node-al2023-x86_64-standard-1.33-v", "x86_64", ""},
		{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id", "amazon-eks-node-al2023-arm64-standard-1.33-v", "arm64", ""},
		{"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id", "amazon-eks-node-al2023-x86_64-nvidia-1.33-v", "x86_64", ""},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id", "amazon-eks-node-1.32-v", "x86_64", ""},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id", "amazon-eks-arm64-node-1.32-v", "arm64", ""},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id", "amazon-eks-gpu-node-1.32-v", "x86_64", ""},
		{"/aws/service/bottlerocket/aws-k8s-1.33/arm64/latest/image_id", "bottlerocket-aws-k8s-1.33-arm64-v1.50.0-", "arm64", ""},
		{"/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.49.0/image_id", "bottlerocket-aws-k8s-1.33-x86_64-v1.49.0-", "x86_64", ""},
		{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id", "Windows_Server-2022-English-Core-EKS_Optimized-1.33-", "x86_64", "windows"},
	}
	for _, tc := range cases {
		t.Run(tc.namePrefix, func(t *testing.T) {
			name, arch, platform, created := describeImage(t, getParameter(t, tc.param))
			require.Contains(t, name, tc.namePrefix)
			require.Equal(t, tc.arch, arch)
			require.Equal(t, tc.platform, platform)
			require.True(t, created.Before(time.Now().AddDate(0, -6, 0)), "the initial releases carry their own (old) dates, not moto's now: %s", created)
		})
	}

	// Parameters moto owns still come from moto; unknown ones are its 400.
	out, err := ssmClient(t).GetParameters(context.Background(), &ssm.GetParametersInput{Names: []string{cases[0].param, "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64", "/no/such"}})
	require.NoError(t, err)
	require.Len(t, out.Parameters, 2)
	require.Equal(t, []string{"/no/such"}, out.InvalidParameters)
	_, err = ssmClient(t).GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v19990101/image_id")})
	require.Equal(t, "ParameterNotFound", apiCode(t, err))
}

func TestGetParametersByPathPages(t *testing.T) {
	ctx := context.Background()
	names := map[string]string{}
	p := ssm.NewGetParametersByPathPaginator(ssmClient(t), &ssm.GetParametersByPathInput{Path: aws.String("/aws/service/eks/optimized-ami/1.34/amazon-linux-2023"), Recursive: aws.Bool(true)})
	pages := 0
	for ; p.HasMorePages(); pages++ {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, prm := range out.Parameters {
			names[*prm.Name] = *prm.Value
		}
	}
	require.Greater(t, pages, 1)
	// 5 series (x86/arm standard, x86/arm nvidia, x86 neuron) × (recommended + 2 releases).
	require.Len(t, names, 15)
	img, _ := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.34", Arch: "arm64", Variant: "standard"})
	require.Equal(t, img.ID, names["/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/image_id"])
}

func TestPublishingANewReleaseMovesTheParameter(t *testing.T) {
	ctx := context.Background()
	series := awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.35", Arch: "arm64", Variant: "standard"}
	param := "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/standard/recommended/image_id"
	old := getParameter(t, param)
	oldName, _, _, oldCreated := describeImage(t, old)

	img, err := local.PublishImage(ctx, series)
	require.NoError(t, err)
	require.NotEqual(t, old, img.ID)
	require.Equal(t, img.ID, getParameter(t, param))

	name, arch, _, created := describeImage(t, img.ID)
	require.Equal(t, img.Name, name)
	require.Greater(t, name, oldName, "release names sort by date")
	require.Equal(t, "arm64", arch)
	require.True(t, created.After(oldCreated))
	// The older release stays reachable by its version parameter.
	require.Equal(t, old, getParameter(t, "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/standard/"+oldName+"/image_id"))

	// Bottlerocket bumps its version.
	br, err := local.PublishImage(ctx, awslocal.Series{Family: awslocal.FamilyBottlerocket, KubernetesVersion: "1.35", Arch: "x86_64"})
	require.NoError(t, err)
	require.Equal(t, "1.51.0", br.Version)
	require.Equal(t, br.ID, getParameter(t, "/aws/service/bottlerocket/aws-k8s-1.35/x86_64/1.51.0/image_id"))

	_, err = local.PublishImage(ctx, awslocal.Series{Family: "centos", KubernetesVersion: "1.35", Arch: "x86_64"})
	require.Error(t, err)
}

// TestImageDeprecation: moto keeps no deprecation, so the front does. An
// image deprecated through EC2's own EnableImageDeprecation carries its
// deprecationTime, drops out of listings once deprecated unless the call
// names it or sets IncludeDeprecated (as EC2), paged or not; a future time
// is reported but hides nothing; DisableImageDeprecation undoes it.
func TestImageDeprecation(t *testing.T) {
	ctx := context.Background()
	api := ec2Client(t)
	img, err := local.PublishImage(ctx, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "arm64", Variant: "standard"})
	require.NoError(t, err)
	later, err := local.PublishImage(ctx, awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "arm64", Variant: "nvidia"})
	require.NoError(t, err)

	listed := func(in *ec2.DescribeImagesInput) map[string]string {
		t.Helper()
		got := map[string]string{}
		if in.MaxResults == nil {
			out, err := api.DescribeImages(ctx, in)
			require.NoError(t, err)
			for _, im := range out.Images {
				got[aws.ToString(im.ImageId)] = aws.ToString(im.DeprecationTime)
			}
			return got
		}
		for p := ec2.NewDescribeImagesPaginator(api, in); p.HasMorePages(); {
			out, err := p.NextPage(ctx)
			require.NoError(t, err)
			for _, im := range out.Images {
				got[aws.ToString(im.ImageId)] = aws.ToString(im.DeprecationTime)
			}
		}
		return got
	}
	byName := &ec2.DescribeImagesInput{Owners: []string{"amazon"}, Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-arm64-*-1.33-*"}}}}
	require.Contains(t, listed(byName), img.ID)

	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	_, err = api.EnableImageDeprecation(ctx, &ec2.EnableImageDeprecationInput{ImageId: aws.String(img.ID), DeprecateAt: aws.Time(past)})
	require.NoError(t, err)
	future := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	require.NoError(t, local.DeprecateImage(ctx, later.ID, future))

	for _, paged := range []bool{false, true} {
		in := *byName
		if paged {
			in.MaxResults = aws.Int32(5)
		}
		got := listed(&in)
		require.NotContains(t, got, img.ID, "a deprecated image is left out of a listing (paged %v)", paged)
		require.Equal(t, future.Format("2006-01-02T15:04:05.000Z"), got[later.ID], "a future deprecation is reported (paged %v)", paged)

		in.IncludeDeprecated = aws.Bool(true)
		got = listed(&in)
		require.Equal(t, past.Format("2006-01-02T15:04:05.000Z"), got[img.ID], "IncludeDeprecated lists it with its time (paged %v)", paged)
	}
	require.Contains(t, listed(&ec2.DescribeImagesInput{ImageIds: []string{img.ID}}), img.ID, "named by id, a deprecated image is listed")

	_, err = api.EnableImageDeprecation(ctx, &ec2.EnableImageDeprecationInput{ImageId: aws.String("ami-0000000000000dead"), DeprecateAt: aws.Time(past)})
	require.ErrorContains(t, err, "InvalidAMIID.NotFound")

	_, err = api.DisableImageDeprecation(ctx, &ec2.DisableImageDeprecationInput{ImageId: aws.String(img.ID)})
	require.NoError(t, err)
	require.NoError(t, local.DeprecateImage(ctx, later.ID, future)) // idempotent
	got := listed(byName)
	require.Contains(t, got, img.ID)
	require.Empty(t, got[img.ID])
}
