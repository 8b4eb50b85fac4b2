// Package bootstrap renders the user data that makes an EC2 instance join
// the cluster as a node, for each AMI family: nodeadm NodeConfig in MIME
// multipart (AL2023), Bottlerocket settings TOML, AL2's bootstrap.sh and
// Windows' Start-EKSBootstrap.ps1, merged with the EC2NodeClass's own
// spec.userData the way upstream merges it; Custom passes the user's data
// through untouched.
//
// It owns the text only: it is pure (no AWS, no clock), so launch templates
// hash the same options to the same bytes. Which kubelet settings, labels
// and taints a launch carries is decided by the caller.
package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	karpv1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
)

// Options are the inputs of one node's bootstrap.
type Options struct {
	// Family is the EC2NodeClass's AMI family (awsv1.AMIFamily*).
	Family string
	// ClusterName, ClusterEndpoint and CABundle (base64 PEM, as EKS
	// reports it) say which cluster to join.
	ClusterName     string
	ClusterEndpoint string
	CABundle        string
	// ClusterCIDR is the service CIDR; nodeadm (AL2023) requires it.
	ClusterCIDR string
	// Kubelet is the EC2NodeClass's spec.kubelet after defaulting (see
	// ResolveKubelet): upstream's KubeletConfiguration field names.
	Kubelet awsv1.KubeletConfiguration
	// Labels and Taints are what the node registers with (the NodeClaim's
	// labels, taints and startup taints).
	Labels map[string]string
	Taints []corev1.Taint
	// InstanceStorePolicy RAID0 stripes the instance-store disks for
	// kubelet and container storage.
	InstanceStorePolicy *awsv1.InstanceStorePolicy
	// CustomUserData is the EC2NodeClass's spec.userData.
	CustomUserData *string
	// BottlerocketDefaultMountPaths uses `apiclient ephemeral-storage bind`
	// without --dirs, which Bottlerocket 1.46 and later understand.
	BottlerocketDefaultMountPaths bool
}

// MIME content types of the parts Karpenter writes.
const (
	ContentTypeShellScript = `text/x-shellscript; charset="us-ascii"`
	ContentTypeNodeConfig  = "application/node.eks.aws"
)

// UserData renders the user data for opts.Family as plain text; the launch
// template carries it base64-encoded.
func UserData(ctx context.Context, opts Options) (string, error) {
	if opts.Family == awsv1.AMIFamilyCustom {
		// Custom images bootstrap themselves: Karpenter adds nothing.
		if opts.CustomUserData == nil {
			return "", nil
		}
		return *opts.CustomUserData, nil
	}
	kc, err := parseKubelet(opts.Kubelet)
	if err != nil {
		return "", err
	}
	o := resolved{Options: opts, kubelet: kc, labels: nodeLabels(opts.Labels), taints: sortedTaints(opts.Taints)}
	if err := o.validate(); err != nil {
		return "", err
	}
	switch opts.Family {
	case awsv1.AMIFamilyAL2:
		return o.al2()
	case awsv1.AMIFamilyAL2023:
		return o.nodeadm()
	case awsv1.AMIFamilyBottlerocket:
		return o.bottlerocket(ctx)
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return o.windows()
	}
	return "", fmt.Errorf("no user data for AMI family %q", opts.Family)
}

// ResolveKubelet returns kc with upstream's launch-time defaults filled in:
// clusterDNS from the cluster's kube-dns Service when the class sets none,
// and maxPods from the instance types' capacity (one launch template per
// distinct value) when the class sets none. kc is not modified.
func ResolveKubelet(kc awsv1.KubeletConfiguration, clusterDNS string, maxPods *int32) awsv1.KubeletConfiguration {
	out := make(awsv1.KubeletConfiguration, len(kc)+2)
	for k, v := range kc {
		out[k] = v
	}
	if _, ok := out["clusterDNS"]; !ok && clusterDNS != "" {
		out["clusterDNS"] = rawJSON([]string{clusterDNS})
	}
	if _, ok := out["maxPods"]; !ok && maxPods != nil {
		out["maxPods"] = rawJSON(*maxPods)
	}
	return out
}

// rawJSON is only called with string slices and integers, which always
// marshal.
func rawJSON(v any) apiextensionsv1.JSON {
	b, _ := json.Marshal(v)
	return apiextensionsv1.JSON{Raw: b}
}

// resolved is Options with the kubelet settings parsed and labels and
// taints in their deterministic order.
type resolved struct {
	Options
	kubelet kubelet
	labels  []label
	taints  []corev1.Taint
}

func (o resolved) raid0() bool {
	return o.InstanceStorePolicy != nil && *o.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0
}

func (o resolved) customUserData() string {
	if o.CustomUserData == nil {
		return ""
	}
	return *o.CustomUserData
}

// kubelet is the typed view of spec.kubelet that the flag-based families
// (AL2, Windows) and Bottlerocket's settings need.
type kubelet struct {
	instancetype.Kubelet
	ClusterDNS                []string
	EvictionSoftGracePeriod   map[string]string
	EvictionMaxPodGracePeriod *int32
	ImageGCHighThreshold      *int32
	ImageGCLowThreshold       *int32
	CPUCFSQuota               *bool
}

func parseKubelet(kc awsv1.KubeletConfiguration) (kubelet, error) {
	base, err := instancetype.ParseKubelet(kc)
	if err != nil {
		return kubelet{}, err
	}
	out := kubelet{Kubelet: base}
	decode := func(key string, into any) error {
		raw, ok := kc[key]
		if !ok || len(raw.Raw) == 0 || string(raw.Raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw.Raw, into); err != nil {
			return fmt.Errorf("kubelet %s: %s: %w", key, raw.Raw, err)
		}
		return nil
	}
	var grace map[string]string
	for key, into := range map[string]any{
		"clusterDNS":                  &out.ClusterDNS,
		"evictionSoftGracePeriod":     &grace,
		"evictionMaxPodGracePeriod":   &out.EvictionMaxPodGracePeriod,
		"imageGCHighThresholdPercent": &out.ImageGCHighThreshold,
		"imageGCLowThresholdPercent":  &out.ImageGCLowThreshold,
		"cpuCFSQuota":                 &out.CPUCFSQuota,
	} {
		if err := decode(key, into); err != nil {
			return kubelet{}, err
		}
	}
	if grace != nil {
		// Upstream types these as durations and prints them the Go way
		// ("1m" becomes "1m0s"); the kubelet reads either.
		out.EvictionSoftGracePeriod = make(map[string]string, len(grace))
		for signal, v := range grace {
			d, err := time.ParseDuration(v)
			if err != nil {
				return kubelet{}, fmt.Errorf("kubelet evictionSoftGracePeriod[%s]: %w", signal, err)
			}
			out.EvictionSoftGracePeriod[signal] = d.String()
		}
	}
	for _, ip := range out.ClusterDNS {
		if net.ParseIP(ip) == nil {
			return kubelet{}, fmt.Errorf("kubelet clusterDNS: %q is not an IP address", ip)
		}
	}
	return out, nil
}

// ipv6 is upstream's test for an IPv6 cluster: its DNS address is IPv6.
func (k kubelet) ipv6() bool {
	return len(k.ClusterDNS) > 0 && net.ParseIP(k.ClusterDNS[0]).To4() == nil
}

type label struct{ key, value string }

// nodeLabels sorts labels by key and drops those the kubelet may not set
// on itself (it refuses to start on unknown kubernetes.io/k8s.io labels,
// and the NodeRestriction admission rejects node-restriction.kubernetes.io),
// so a NodeClaim label can never keep a node from joining. Non-Custom
// families also get karpenter.sh/do-not-sync-taints: their kubelet
// registers the taints itself, so Karpenter must not race it.
func nodeLabels(in map[string]string) []label {
	out := make([]label, 0, len(in)+1)
	for k, v := range in {
		if !kubeletMaySet(k) {
			continue
		}
		out = append(out, label{k, v})
	}
	if _, ok := in[karpv1.NodeDoNotSyncTaintsLabelKey]; !ok {
		out = append(out, label{karpv1.NodeDoNotSyncTaintsLabelKey, "true"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// kubeletLabels are the kubernetes.io labels the kubelet's --node-labels
// accepts besides the kubelet.kubernetes.io and node.kubernetes.io
// namespaces.
var kubeletLabels = map[string]bool{
	corev1.LabelHostname: true, corev1.LabelInstanceType: true, corev1.LabelInstanceTypeStable: true,
	corev1.LabelOSStable: true, corev1.LabelArchStable: true, "beta.kubernetes.io/os": true, "beta.kubernetes.io/arch": true,
	corev1.LabelTopologyZone: true, corev1.LabelTopologyRegion: true,
	corev1.LabelFailureDomainBetaZone: true, corev1.LabelFailureDomainBetaRegion: true,
}

func kubeletMaySet(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok || kubeletLabels[key] {
		return true
	}
	inDomain := func(d string) bool { return domain == d || strings.HasSuffix(domain, "."+d) }
	if inDomain(corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	if !inDomain("kubernetes.io") && !inDomain("k8s.io") {
		return true
	}
	return inDomain("kubelet.kubernetes.io") || inDomain("node.kubernetes.io")
}

// sortedTaints orders taints by key, value and effect so equal sets render
// equal user data (and so the same launch template).
func sortedTaints(in []corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(in))
	for _, t := range in {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if a.Value != b.Value {
			return a.Value < b.Value
		}
		return a.Effect < b.Effect
	})
	return out
}

// taintFlag renders a taint as --register-with-taints takes it.
func taintFlag(t corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

func (o resolved) nodeLabelArg() string {
	if len(o.labels) == 0 {
		return ""
	}
	parts := make([]string, len(o.labels))
	for i, l := range o.labels {
		parts[i] = l.key + "=" + l.value
	}
	return fmt.Sprintf("--node-labels=%q", strings.Join(parts, ","))
}

func (o resolved) nodeTaintArg() string {
	if len(o.taints) == 0 {
		return ""
	}
	parts := make([]string, len(o.taints))
	for i, t := range o.taints {
		parts[i] = taintFlag(t)
	}
	return fmt.Sprintf("--register-with-taints=%q", strings.Join(parts, ","))
}

// kubeletExtraArgs are the kubelet flags for bootstrap.sh and
// Start-EKSBootstrap.ps1, in upstream's order; map-valued flags list
// their entries sorted by key.
func (o resolved) kubeletExtraArgs() []string {
	k := o.kubelet
	args := []string{o.nodeLabelArg(), o.nodeTaintArg()}
	if k.MaxPods != nil {
		args = append(args, fmt.Sprintf("--max-pods=%d", *k.MaxPods))
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	args = append(args,
		joinArgs("--system-reserved", k.SystemReserved, "="),
		joinArgs("--kube-reserved", k.KubeReserved, "="),
		joinArgs("--eviction-hard", k.EvictionHard, "<"),
		joinArgs("--eviction-soft", k.EvictionSoft, "<"),
		joinArgs("--eviction-soft-grace-period", k.EvictionSoftGracePeriod, "="),
	)
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.ImageGCHighThreshold != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThreshold))
	}
	if k.ImageGCLowThreshold != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThreshold))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	out := args[:0]
	for _, a := range args {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

func joinArgs(name string, m map[string]string, sep string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + sep + m[k]
	}
	return fmt.Sprintf("%s=%q", name, strings.Join(parts, ","))
}
