package bootstrap_test

import (
	"context"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/bootstrap"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const (
	clusterName     = "test-cluster"
	clusterEndpoint = "https://test-cluster"
	clusterCIDR     = "10.100.0.0/16"
	clusterDNS      = "10.0.100.10"
)

var caBundle = base64.StdEncoding.EncodeToString([]byte("ca-bundle\n"))

// baseOptions is a NodeClaim of NodePool "default" on EC2NodeClass
// "default", with labels and taints given out of order (and two labels the
// kubelet would refuse) to prove the output is sorted and filtered.
func baseOptions(family string) bootstrap.Options {
	maxPods := int32(110)
	return bootstrap.Options{
		Family:          family,
		ClusterName:     clusterName,
		ClusterEndpoint: clusterEndpoint,
		CABundle:        caBundle,
		ClusterCIDR:     clusterCIDR,
		Kubelet:         bootstrap.ResolveKubelet(nil, clusterDNS, &maxPods),
		Labels: map[string]string{
			"testing/cluster":                   "unspecified",
			"karpenter.sh/nodepool":             "default",
			"karpenter.sh/capacity-type":        "on-demand",
			"karpenter.k8s.aws/ec2nodeclass":    "default",
			"kubernetes.io/arch":                "amd64",
			"node-restriction.kubernetes.io/np": "refused-by-node-restriction",
			"example.kubernetes.io/team":        "refused-by-kubelet",
		},
		Taints: []corev1.Taint{
			{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
			{Key: "foo", Value: "bar", Effect: corev1.TaintEffectNoExecute},
			{Key: "baz", Value: "bin", Effect: corev1.TaintEffectNoExecute},
		},
	}
}

// kubeletFull sets every kubelet field the flag-based families translate.
func kubeletFull(o *bootstrap.Options) {
	for k, v := range map[string]string{
		"maxPods":                     `29`,
		"podsPerCore":                 `4`,
		"systemReserved":              `{"memory":"100Mi","cpu":"100m"}`,
		"kubeReserved":                `{"cpu":"200m","ephemeral-storage":"3Gi"}`,
		"evictionHard":                `{"memory.available":"5%","nodefs.available":"10%"}`,
		"evictionSoft":                `{"memory.available":"500Mi"}`,
		"evictionSoftGracePeriod":     `{"memory.available":"1m"}`,
		"evictionMaxPodGracePeriod":   `60`,
		"imageGCHighThresholdPercent": `85`,
		"imageGCLowThresholdPercent":  `80`,
		"cpuCFSQuota":                 `false`,
	} {
		o.Kubelet[k] = apiextensionsv1.JSON{Raw: []byte(v)}
	}
}

func raid0(o *bootstrap.Options) {
	p := awsv1.InstanceStorePolicyRAID0
	o.InstanceStorePolicy = &p
}

type goldenCase struct {
	name   string
	family string
	input  string // testdata file with spec.userData, "" for none
	mutate func(*bootstrap.Options)
	check  func(t *testing.T, opts bootstrap.Options, out string)
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{name: "al2_none", family: awsv1.AMIFamilyAL2, check: checkAL2},
		{name: "al2_shell", family: awsv1.AMIFamilyAL2, input: "al2_shell.input", check: checkAL2},
		{name: "al2_mime", family: awsv1.AMIFamilyAL2, input: "al2_mime.input", check: checkAL2},
		{name: "al2_kubelet_raid0", family: awsv1.AMIFamilyAL2, mutate: func(o *bootstrap.Options) { kubeletFull(o); raid0(o) }, check: checkAL2},
		{name: "al2023_none", family: awsv1.AMIFamilyAL2023, check: checkAL2023},
		{name: "al2023_mime", family: awsv1.AMIFamilyAL2023, input: "al2023_mime.input", check: checkAL2023},
		{name: "al2023_yaml", family: awsv1.AMIFamilyAL2023, input: "al2023_yaml.input", check: checkAL2023},
		{name: "al2023_shell", family: awsv1.AMIFamilyAL2023, input: "al2023_shell.input", check: checkAL2023},
		{name: "al2023_kubelet_raid0", family: awsv1.AMIFamilyAL2023, mutate: func(o *bootstrap.Options) { kubeletFull(o); raid0(o) }, check: checkAL2023},
		{name: "bottlerocket_none", family: awsv1.AMIFamilyBottlerocket, check: checkBottlerocket},
		{name: "bottlerocket_toml", family: awsv1.AMIFamilyBottlerocket, input: "bottlerocket_toml.input", check: checkBottlerocket},
		{name: "bottlerocket_kubelet_raid0", family: awsv1.AMIFamilyBottlerocket, mutate: func(o *bootstrap.Options) { kubeletFull(o); raid0(o) }, check: checkBottlerocket},
		{name: "windows_none", family: awsv1.AMIFamilyWindows2022, check: checkWindows},
		{name: "windows_powershell", family: awsv1.AMIFamilyWindows2022, input: "windows_powershell.input", check: checkWindows},
		{name: "windows_kubelet", family: awsv1.AMIFamilyWindows2019, mutate: kubeletFull, check: checkWindows},
		{name: "custom_none", family: awsv1.AMIFamilyCustom, check: checkCustom},
		{name: "custom_shell", family: awsv1.AMIFamilyCustom, input: "custom_shell.input", check: checkCustom},
	}
}

func (c goldenCase) options(t *testing.T) bootstrap.Options {
	t.Helper()
	opts := baseOptions(c.family)
	if c.input != "" {
		b, err := os.ReadFile(filepath.Join("testdata", c.input))
		require.NoError(t, err)
		s := string(b)
		opts.CustomUserData = &s
	}
	if c.mutate != nil {
		c.mutate(&opts)
	}
	return opts
}

// TestGolden renders every family with and without user data, compares
// with testdata/<case>.golden (go test -run TestGolden -update rewrites
// them) and parses the output back, so a golden cannot bless a wrong
// document.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			opts := c.options(t)
			out, err := bootstrap.UserData(context.Background(), opts)
			require.NoError(t, err)
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "missing golden: run go test -run TestGolden -update")
			require.Equal(t, string(want), out)
			c.check(t, opts, out)

			again, err := bootstrap.UserData(context.Background(), opts)
			require.NoError(t, err)
			require.Equal(t, out, again, "same options, same bytes (launch templates are named by them)")
		})
	}
}

// wantLabels are baseOptions' labels as the kubelet receives them.
var wantLabels = map[string]string{
	"testing/cluster":                 "unspecified",
	"karpenter.sh/nodepool":           "default",
	"karpenter.sh/capacity-type":      "on-demand",
	"karpenter.k8s.aws/ec2nodeclass":  "default",
	"kubernetes.io/arch":              "amd64",
	"karpenter.sh/do-not-sync-taints": "true",
}

const wantLabelArg = "karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,kubernetes.io/arch=amd64,testing/cluster=unspecified"

var wantTaintArg = "baz=bin:NoExecute,foo=bar:NoExecute,karpenter.sh/unregistered:NoExecute"

func userData(opts bootstrap.Options) string {
	if opts.CustomUserData == nil {
		return ""
	}
	return *opts.CustomUserData
}

func isRAID0(opts bootstrap.Options) bool {
	return opts.InstanceStorePolicy != nil && *opts.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0
}

func hasKubelet(opts bootstrap.Options, key string) bool { _, ok := opts.Kubelet[key]; return ok }

func checkCustom(t *testing.T, opts bootstrap.Options, out string) {
	require.Equal(t, userData(opts), out, "Custom passes user data through untouched")
}

// splitLabels reads a --node-labels value.
func splitLabels(t *testing.T, v string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		require.True(t, ok, "label %q", kv)
		out[k] = val
	}
	return out
}

func requireKubeletFlags(t *testing.T, opts bootstrap.Options, flags map[string]string) {
	t.Helper()
	require.Equal(t, wantLabels, splitLabels(t, flags["--node-labels"]))
	require.Equal(t, wantTaintArg, flags["--register-with-taints"])
	if hasKubelet(opts, "podsPerCore") {
		require.Equal(t, "29", flags["--max-pods"])
		require.Equal(t, map[string]string{
			"--pods-per-core":                 "4",
			"--system-reserved":               "cpu=100m,memory=100Mi",
			"--kube-reserved":                 "cpu=200m,ephemeral-storage=3Gi",
			"--eviction-hard":                 "memory.available<5%,nodefs.available<10%",
			"--eviction-soft":                 "memory.available<500Mi",
			"--eviction-soft-grace-period":    "memory.available=1m0s",
			"--eviction-max-pod-grace-period": "60",
			"--image-gc-high-threshold":       "85",
			"--image-gc-low-threshold":        "80",
			"--cpu-cfs-quota":                 "false",
		}, without(flags, "--node-labels", "--register-with-taints", "--max-pods"))
	} else {
		require.Equal(t, "110", flags["--max-pods"])
		require.Len(t, flags, 3)
	}
}

func without(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// flagMap reads --name=value words (as the kubelet's flag parser does).
func flagMap(t *testing.T, words []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		require.True(t, ok, "flag %q", w)
		_, dup := out[k]
		require.False(t, dup, "flag %s twice", k)
		out[k] = v
	}
	return out
}
