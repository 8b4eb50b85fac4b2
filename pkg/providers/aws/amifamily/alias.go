package amifamily

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
)

// VersionLatest is the alias version that follows each new release.
const VersionLatest = "latest"

// Variant is an EKS-optimized AMI flavour; each implies node requirements
// DescribeImages cannot tell (which accelerators the image drives).
type Variant string

// Variants as upstream names them.
const (
	VariantStandard Variant = "standard"
	VariantNvidia   Variant = "nvidia"
	VariantNeuron   Variant = "neuron"
)

// Requirements are the variant's node requirements: standard images are for
// instance types with neither GPUs nor accelerators, nvidia images for GPU
// types, neuron images for accelerator (Inferentia/Trainium) types.
func (v Variant) Requirements() []corev1.NodeSelectorRequirement {
	switch v {
	case VariantStandard:
		return []corev1.NodeSelectorRequirement{
			{Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		}
	case VariantNvidia:
		return []corev1.NodeSelectorRequirement{{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}}
	case VariantNeuron:
		return []corev1.NodeSelectorRequirement{{Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}}
	}
	return nil
}

// windowsBuilds are the node.kubernetes.io/windows-build values per family.
var windowsBuilds = map[string]string{
	awsv1.AMIFamilyWindows2019: "10.0.17763",
	awsv1.AMIFamilyWindows2022: "10.0.20348",
	awsv1.AMIFamilyWindows2025: "10.0.26100",
}

// ssmQuery is one public SSM parameter an alias reads and the requirement
// sets the image it names serves.
type ssmQuery struct {
	path     string
	extra    [][]corev1.NodeSelectorRequirement
	variants []Variant
	// mutable parameters move to each new release (the "latest" ones);
	// pinned ones name one image forever.
	mutable bool
}

// UnsupportedAliasError says an alias names no family or a version the
// family does not publish (Windows has latest only).
type UnsupportedAliasError struct{ Alias string }

func (e *UnsupportedAliasError) Error() string {
	return fmt.Sprintf("unsupported alias %q", e.Alias)
}

// aliasQueries lists the SSM parameters behind alias for k8sVersion, with
// upstream's paths: AL2023 per architecture and variant (neuron on x86_64
// only), AL2 standard / arm64 / gpu (gpu serves nvidia and neuron),
// Bottlerocket standard and nvidia per architecture, Windows latest only.
func aliasQueries(alias, k8sVersion string) ([]ssmQuery, error) {
	family := awsv1.AMIFamilyFromAlias(strings.ToLower(alias))
	version := awsv1.AMIVersionFromAlias(alias)
	if family == "" || version == "" {
		return nil, &UnsupportedAliasError{alias}
	}
	latest := version == VersionLatest
	var out []ssmQuery
	add := func(path string, variants ...Variant) {
		out = append(out, ssmQuery{path: path, variants: variants, mutable: latest})
	}
	switch family {
	case awsv1.AMIFamilyAL2023:
		for _, av := range []struct {
			arch     string
			variants []Variant
		}{
			{"x86_64", []Variant{VariantStandard, VariantNvidia, VariantNeuron}},
			{"arm64", []Variant{VariantStandard, VariantNvidia}},
		} {
			for _, v := range av.variants {
				name := "recommended"
				if !latest {
					name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", av.arch, v, k8sVersion, version)
				}
				add(fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8sVersion, av.arch, v, name), v)
			}
		}
	case awsv1.AMIFamilyAL2:
		for _, d := range []struct {
			dir, kind string
			variants  []Variant
		}{
			{"amazon-linux-2", "", []Variant{VariantStandard}},
			{"amazon-linux-2-arm64", "arm64-", []Variant{VariantStandard}},
			{"amazon-linux-2-gpu", "gpu-", []Variant{VariantNeuron, VariantNvidia}},
		} {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("amazon-eks-%snode-%s-%s", d.kind, k8sVersion, version)
			}
			add(fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/%s/image_id", k8sVersion, d.dir, name), d.variants...)
		}
	case awsv1.AMIFamilyBottlerocket:
		// Bottlerocket versions are published without the leading "v"
		// users tend to write.
		name := strings.TrimPrefix(version, "v")
		for _, arch := range []string{"x86_64", "arm64"} {
			add(fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s/%s/%s/image_id", k8sVersion, arch, name), VariantStandard)
			add(fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s-nvidia/%s/%s/image_id", k8sVersion, arch, name), VariantNvidia)
		}
	default: // Windows publishes a latest parameter only.
		if !latest {
			return nil, &UnsupportedAliasError{alias}
		}
		year := strings.TrimPrefix(family, "Windows")
		out = append(out, ssmQuery{
			mutable: true,
			path:    fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, k8sVersion),
			extra: [][]corev1.NodeSelectorRequirement{{
				{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{string(corev1.Windows)}},
				{Key: corev1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{windowsBuilds[family]}},
			}},
		})
	}
	for i := range out {
		for _, v := range out[i].variants {
			out[i].extra = append(out[i].extra, v.Requirements())
		}
	}
	return out, nil
}
