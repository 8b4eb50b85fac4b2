package amifamily_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/amifamily"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

const k8sVersion = "1.33"

var (
	local   *awslocal.Local
	clients *sdk.Clients
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{KubernetesVersions: []string{k8sVersion}})
	if err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	clients = sdk.New(local.Config(ctx), 0)
	cancel()
	code := m.Run()
	local.Stop()
	os.Exit(code)
}

func newProvider() *amifamily.Provider {
	return amifamily.NewProvider(clients.EC2, clients.SSM, amifamily.Options{
		KubernetesVersion: func(context.Context) (string, error) { return k8sVersion, nil },
	})
}

func class(terms ...awsv1.AMISelectorTerm) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "test"}, Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: terms}}
}

// latest is the newest release of a series, by the local AWS's catalog.
func release(t *testing.T, family, arch, variant string, n int) awslocal.Image {
	t.Helper()
	var rs []awslocal.Image
	for _, img := range local.Images() {
		if img.Family == family && img.Arch == arch && img.Variant == variant && img.KubernetesVersion == k8sVersion {
			rs = append(rs, img)
		}
	}
	require.NotEmpty(t, rs, "%s/%s/%s", family, arch, variant)
	if n < 0 {
		return rs[len(rs)-1]
	}
	return rs[n]
}

// summary renders an AMI as "id arch extra-requirements" for comparison.
func summary(a amifamily.AMI) string {
	s := a.ID
	for _, r := range a.Requirements {
		s += fmt.Sprintf(" %s%s%v", r.Key, r.Operator, r.Values)
	}
	return s
}

func summaries(amis []amifamily.AMI) []string {
	out := make([]string, 0, len(amis))
	for _, a := range amis {
		out = append(out, summary(a))
	}
	sort.Strings(out)
	return out
}

func want(id, arch string, extra ...string) string {
	s := id + " " + corev1.LabelArchStable + "In[" + arch + "]"
	for _, e := range extra {
		s += " " + e
	}
	return s
}

const (
	gpuExists      = awsv1.LabelInstanceGPUCount + "Exists[]"
	accelExists    = awsv1.LabelInstanceAcceleratorCount + "Exists[]"
	standardNoAccs = awsv1.LabelInstanceGPUCount + "DoesNotExist[] " + awsv1.LabelInstanceAcceleratorCount + "DoesNotExist[]"
)

func TestAliases(t *testing.T) {
	std := func(n int, arch, kubeArch string) string {
		return want(release(t, awslocal.FamilyAL2023, arch, "standard", n).ID, kubeArch, standardNoAccs)
	}
	first := release(t, awslocal.FamilyAL2023, "x86_64", "standard", 0)
	tests := []struct {
		alias string
		want  []string
	}{
		{"al2023@latest", []string{
			std(-1, "x86_64", "amd64"), std(-1, "arm64", "arm64"),
			want(release(t, awslocal.FamilyAL2023, "x86_64", "nvidia", -1).ID, "amd64", gpuExists),
			want(release(t, awslocal.FamilyAL2023, "arm64", "nvidia", -1).ID, "arm64", gpuExists),
			want(release(t, awslocal.FamilyAL2023, "x86_64", "neuron", -1).ID, "amd64", accelExists),
		}},
		// A pinned version reads the version parameters: the first release.
		{"al2023@" + first.Version, []string{
			std(0, "x86_64", "amd64"), std(0, "arm64", "arm64"),
			want(release(t, awslocal.FamilyAL2023, "x86_64", "nvidia", 0).ID, "amd64", gpuExists),
			want(release(t, awslocal.FamilyAL2023, "arm64", "nvidia", 0).ID, "arm64", gpuExists),
			want(release(t, awslocal.FamilyAL2023, "x86_64", "neuron", 0).ID, "amd64", accelExists),
		}},
		// The AL2 GPU image serves both GPU and Neuron instance types.
		{"al2@latest", []string{
			want(release(t, awslocal.FamilyAL2, "x86_64", "", -1).ID, "amd64", standardNoAccs),
			want(release(t, awslocal.FamilyAL2, "arm64", "", -1).ID, "arm64", standardNoAccs),
			want(release(t, awslocal.FamilyAL2, "x86_64", "gpu", -1).ID, "amd64", gpuExists),
			want(release(t, awslocal.FamilyAL2, "x86_64", "gpu", -1).ID, "amd64", accelExists),
		}},
		{"bottlerocket@latest", []string{
			want(release(t, awslocal.FamilyBottlerocket, "x86_64", "", -1).ID, "amd64", standardNoAccs),
			want(release(t, awslocal.FamilyBottlerocket, "arm64", "", -1).ID, "arm64", standardNoAccs),
			want(release(t, awslocal.FamilyBottlerocket, "x86_64", "nvidia", -1).ID, "amd64", gpuExists),
			want(release(t, awslocal.FamilyBottlerocket, "arm64", "nvidia", -1).ID, "arm64", gpuExists),
		}},
		// Bottlerocket versions may be written with a leading v.
		{"bottlerocket@v" + release(t, awslocal.FamilyBottlerocket, "x86_64", "", 0).Version, []string{
			want(release(t, awslocal.FamilyBottlerocket, "x86_64", "", 0).ID, "amd64", standardNoAccs),
			want(release(t, awslocal.FamilyBottlerocket, "arm64", "", 0).ID, "arm64", standardNoAccs),
			want(release(t, awslocal.FamilyBottlerocket, "x86_64", "nvidia", 0).ID, "amd64", gpuExists),
			want(release(t, awslocal.FamilyBottlerocket, "arm64", "nvidia", 0).ID, "arm64", gpuExists),
		}},
		{"windows2022@latest", []string{
			want(release(t, awslocal.FamilyWindows2022, "x86_64", "", -1).ID, "amd64",
				corev1.LabelOSStable+"In[windows]", corev1.LabelWindowsBuild+"In[10.0.20348]"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.alias, func(t *testing.T) {
			amis, err := newProvider().List(context.Background(), class(awsv1.AMISelectorTerm{Alias: tt.alias}))
			require.NoError(t, err)
			wantSorted := append([]string(nil), tt.want...)
			sort.Strings(wantSorted)
			// Requirement order within an entry is upstream's status
			// order; compare sets of entries with keys sorted alike.
			assert.Equal(t, normalize(wantSorted), normalize(summaries(amis)))
		})
	}
}

// normalize sorts the requirement tokens inside each summary.
func normalize(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		var toks []string
		start := 0
		for i := 0; i <= len(s); i++ {
			if i == len(s) || s[i] == ' ' {
				toks = append(toks, s[start:i])
				start = i + 1
			}
		}
		sort.Strings(toks[1:])
		joined := toks[0]
		for _, tok := range toks[1:] {
			joined += " " + tok
		}
		out = append(out, joined)
	}
	sort.Strings(out)
	return out
}

func TestUnsupportedAlias(t *testing.T) {
	for _, alias := range []string{"windows2022@v2025.11.01", "ubuntu@latest", "al2023"} {
		_, err := newProvider().List(context.Background(), class(awsv1.AMISelectorTerm{Alias: alias}))
		var unsupported *amifamily.UnsupportedAliasError
		assert.True(t, errors.As(err, &unsupported), "%s: %v", alias, err)
	}
}

func TestNameAndOwnerKeepsTheNewestPerArchitectureAcrossPages(t *testing.T) {
	old := amifamily.PageSize
	amifamily.PageSize = 5
	t.Cleanup(func() { amifamily.PageSize = old })
	before := local.Calls("ec2", "DescribeImages")
	amis, err := newProvider().List(context.Background(), class(awsv1.AMISelectorTerm{
		Name: "amazon-eks-node-al2023-*-" + k8sVersion + "-*", Owner: "602401143452",
	}))
	require.NoError(t, err)
	// 5 series x 2 releases = 10 images: two pages of five. Calls counts
	// the SDK's retries too (a slow answer on a loaded machine is retried),
	// so a third call is no failure; a single call would be.
	assert.GreaterOrEqual(t, local.Calls("ec2", "DescribeImages")-before, 2, "paginated")
	// Without SSM there are no variant requirements: one image per
	// architecture, the newest, equal dates broken by the greater name
	// (standard > nvidia > neuron).
	assert.Equal(t, normalize([]string{
		want(release(t, awslocal.FamilyAL2023, "x86_64", "standard", -1).ID, "amd64"),
		want(release(t, awslocal.FamilyAL2023, "arm64", "standard", -1).ID, "arm64"),
	}), normalize(summaries(amis)))
	assert.True(t, !amis[0].CreationDate.Before(amis[1].CreationDate), "newest first")
}

func TestIDAndSSMParameterTerms(t *testing.T) {
	ctx := context.Background()
	byID := release(t, awslocal.FamilyAL2, "arm64", "", 0)
	bySSM := release(t, awslocal.FamilyAL2, "x86_64", "", -1)
	p := newProvider()
	ssmBefore := local.Calls("ssm", "GetParameter")
	amis, err := p.List(ctx, class(
		awsv1.AMISelectorTerm{ID: byID.ID},
		awsv1.AMISelectorTerm{SSMParameter: bySSM.Parameter},
	))
	require.NoError(t, err)
	assert.Equal(t, normalize([]string{want(byID.ID, "arm64"), want(bySSM.ID, "amd64")}), normalize(summaries(amis)))
	assert.Equal(t, 1, local.Calls("ssm", "GetParameter")-ssmBefore)

	// The answer is cached: a second resolution calls SSM no more.
	_, err = p.List(ctx, class(awsv1.AMISelectorTerm{ID: byID.ID}, awsv1.AMISelectorTerm{SSMParameter: bySSM.Parameter}))
	require.NoError(t, err)
	assert.Equal(t, 1, local.Calls("ssm", "GetParameter")-ssmBefore)
}

func TestTagsMatchingNothing(t *testing.T) {
	amis, err := newProvider().List(context.Background(), class(awsv1.AMISelectorTerm{Tags: map[string]string{"nobody": "*"}}))
	require.NoError(t, err)
	assert.Empty(t, amis)
}

func TestStatusSortsRequirementsAsUpstream(t *testing.T) {
	got := amifamily.Status([]amifamily.AMI{{ID: "ami-1", Requirements: []corev1.NodeSelectorRequirement{
		{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
	}}})
	var keys []string
	for _, r := range got[0].Requirements {
		keys = append(keys, r.Key)
	}
	assert.Equal(t, []string{corev1.LabelArchStable, awsv1.LabelInstanceGPUCount, awsv1.LabelInstanceAcceleratorCount}, keys)
}

// TestInvalidateDeprecated: an alias's "latest" parameters are cached for a
// day, so a new release alone is not seen; once the cached image is
// deprecated, InvalidateDeprecated forgets exactly those parameters and the
// next resolution finds the new release. A pinned version whose image is
// deprecated stays cached (its parameter never moves).
func TestInvalidateDeprecated(t *testing.T) {
	ctx := context.Background()
	p := newProvider()
	series := awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: k8sVersion, Arch: "arm64", Variant: "standard"}
	idOf := func(alias string) string {
		t.Helper()
		amis, err := p.List(ctx, class(awsv1.AMISelectorTerm{Alias: alias}))
		require.NoError(t, err)
		for _, a := range amis {
			if strings.Contains(a.Name, "arm64-standard") {
				return a.ID
			}
		}
		t.Fatalf("%s resolved no arm64 standard image: %v", alias, summaries(amis))
		return ""
	}
	old := idOf("al2023@latest")
	pinned := release(t, awslocal.FamilyAL2023, "arm64", "standard", 0)
	require.Equal(t, pinned.ID, idOf("al2023@"+pinned.Version))

	forgotten, err := p.InvalidateDeprecated(ctx)
	require.NoError(t, err)
	require.Empty(t, forgotten, "nothing is deprecated yet")

	fresh, err := local.PublishImage(ctx, series)
	require.NoError(t, err)
	require.Equal(t, old, idOf("al2023@latest"), "the cached parameter still names the old release")

	past := time.Now().Add(-time.Minute)
	require.NoError(t, local.DeprecateImage(ctx, old, past))
	require.NoError(t, local.DeprecateImage(ctx, pinned.ID, past))
	ssmBefore := local.Calls("ssm", "GetParameter")
	forgotten, err = p.InvalidateDeprecated(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/arm64/standard/recommended/image_id", k8sVersion)}, forgotten)
	require.Equal(t, fresh.ID, idOf("al2023@latest"), "the next resolution reads SSM again")
	require.Equal(t, 1, local.Calls("ssm", "GetParameter")-ssmBefore, "only the forgotten parameter is read again")
	require.Equal(t, pinned.ID, idOf("al2023@"+pinned.Version), "a pinned version keeps its image")
}
