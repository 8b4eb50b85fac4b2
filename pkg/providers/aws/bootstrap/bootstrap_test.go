package bootstrap_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/bootstrap"
)

func ptr[T any](v T) *T { return &v }

func TestUserDataErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		family  string
		mutate  func(*bootstrap.Options)
		wantErr string
	}{
		{"AL2023 without the cluster CIDR", awsv1.AMIFamilyAL2023, func(o *bootstrap.Options) { o.ClusterCIDR = "" }, "resolving cluster CIDR"},
		{"AL2023 with a CA that is not base64", awsv1.AMIFamilyAL2023, func(o *bootstrap.Options) { o.CABundle = "not base64!" }, "decoding the cluster CA bundle"},
		{"AL2023 with broken MIME", awsv1.AMIFamilyAL2023, func(o *bootstrap.Options) {
			o.CustomUserData = ptr("MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nno boundary")
		}, "no boundary"},
		{"AL2 with non-multipart MIME", awsv1.AMIFamilyAL2, func(o *bootstrap.Options) {
			o.CustomUserData = ptr("Content-Type: text/plain\n\nhello")
		}, "not multipart"},
		{"Bottlerocket with invalid TOML", awsv1.AMIFamilyBottlerocket, func(o *bootstrap.Options) {
			o.CustomUserData = ptr("[settings.kubernetes\nmax-pods = ")
		}, "invalid UserData"},
		{"Bottlerocket whose settings are not a table", awsv1.AMIFamilyBottlerocket, func(o *bootstrap.Options) {
			o.CustomUserData = ptr("settings = 3")
		}, "settings is a int64, not a table"},
		{"kubelet maxPods not an integer", awsv1.AMIFamilyAL2, func(o *bootstrap.Options) {
			o.Kubelet = awsv1.KubeletConfiguration{"maxPods": {Raw: []byte(`"many"`)}}
		}, "kubelet maxPods"},
		{"kubelet clusterDNS not an IP", awsv1.AMIFamilyWindows2022, func(o *bootstrap.Options) {
			o.Kubelet = awsv1.KubeletConfiguration{"clusterDNS": {Raw: []byte(`["dns.local"]`)}}
		}, "not an IP address"},
		{"kubelet grace period not a duration", awsv1.AMIFamilyBottlerocket, func(o *bootstrap.Options) {
			o.Kubelet = awsv1.KubeletConfiguration{"evictionSoftGracePeriod": {Raw: []byte(`{"memory.available":"soon"}`)}}
		}, "evictionSoftGracePeriod[memory.available]"},
		{"unknown family", "Gentoo", nil, `no user data for AMI family "Gentoo"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := baseOptions(c.family)
			if c.mutate != nil {
				c.mutate(&opts)
			}
			_, err := bootstrap.UserData(context.Background(), opts)
			require.ErrorContains(t, err, c.wantErr)
		})
	}
}

func TestResolveKubelet(t *testing.T) {
	n := int32(58)
	user := awsv1.KubeletConfiguration{"clusterDNS": {Raw: []byte(`["10.9.9.9"]`)}, "maxPods": {Raw: []byte(`12`)}}
	got := bootstrap.ResolveKubelet(user, "10.0.0.10", &n)
	require.JSONEq(t, `["10.9.9.9"]`, string(got["clusterDNS"].Raw), "the class's clusterDNS wins over kube-dns")
	require.JSONEq(t, `12`, string(got["maxPods"].Raw), "the class's maxPods wins over the instance type's")

	got = bootstrap.ResolveKubelet(awsv1.KubeletConfiguration{"podsPerCore": {Raw: []byte(`2`)}}, "10.0.0.10", &n)
	require.JSONEq(t, `["10.0.0.10"]`, string(got["clusterDNS"].Raw))
	require.JSONEq(t, `58`, string(got["maxPods"].Raw))
	require.JSONEq(t, `2`, string(got["podsPerCore"].Raw))

	got = bootstrap.ResolveKubelet(nil, "", nil)
	require.Empty(t, got, "nothing known, nothing added")
	require.Len(t, user, 2, "the input is not modified")
}

func TestAL2IPv6AndNoCA(t *testing.T) {
	opts := baseOptions(awsv1.AMIFamilyAL2)
	opts.CABundle = ""
	opts.Kubelet = bootstrap.ResolveKubelet(nil, "fd00::a", nil)
	out, err := bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	require.Contains(t, out, "--ip-family ipv6")
	require.Contains(t, out, "--dns-cluster-ip 'fd00::a'")
	require.NotContains(t, out, "--b64-cluster-ca")
	require.NotContains(t, out, "--use-max-pods", "without maxPods the AMI's ENI-limited default stays")
	require.NotContains(t, out, "--max-pods")
}

func TestBottlerocketOptions(t *testing.T) {
	opts := baseOptions(awsv1.AMIFamilyBottlerocket)
	opts.Kubelet = awsv1.KubeletConfiguration{"clusterDNS": {Raw: []byte(`["10.0.0.10","10.0.0.11"]`)}}
	raid0(&opts)
	opts.BottlerocketDefaultMountPaths = true
	opts.Taints = nil
	out, err := bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	var doc map[string]map[string]map[string]any
	require.NoError(t, toml.Unmarshal([]byte(out), &doc))
	k8s := doc["settings"]["kubernetes"]
	require.Equal(t, []any{"10.0.0.10", "10.0.0.11"}, k8s["cluster-dns-ip"], "several DNS servers become a list")
	require.NotContains(t, k8s, "node-taints")
	require.NotContains(t, k8s, "max-pods")
	cmd := doc["settings"]["bootstrap-commands"][bootstrap.MountInstanceStorageCommand].(map[string]any)
	require.Equal(t, []any{"apiclient", "ephemeral-storage", "bind"}, cmd["commands"].([]any)[1], "1.46+ binds the default paths")
}

func TestLabels(t *testing.T) {
	opts := baseOptions(awsv1.AMIFamilyAL2023)
	opts.Labels = map[string]string{
		"karpenter.sh/do-not-sync-taints":         "false",
		"node.kubernetes.io/instance-type":        "m5.large",
		"topology.kubernetes.io/zone":             "us-east-1a",
		"kubelet.kubernetes.io/role":              "worker",
		"team.node.kubernetes.io/x":               "y",
		"k8s.io/bad":                              "z",
		"sub.k8s.io/bad":                          "z",
		"kubernetes.io/bad":                       "z",
		"node-restriction.kubernetes.io/bad":      "z",
		"sub.node-restriction.kubernetes.io/bad":  "z",
		"topology.k8s.aws/zone-id":                "use1-az1",
		"example.com/kubernetes.io-looking-value": "ok",
	}
	out, err := bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	i := strings.Index(out, "--node-labels=")
	require.Positive(t, i)
	line := out[i : strings.IndexByte(out[i:], '\n')+i]
	require.Equal(t, `--node-labels="example.com/kubernetes.io-looking-value=ok,karpenter.sh/do-not-sync-taints=false,kubelet.kubernetes.io/role=worker,node.kubernetes.io/instance-type=m5.large,team.node.kubernetes.io/x=y,topology.k8s.aws/zone-id=use1-az1,topology.kubernetes.io/zone=us-east-1a"`, line,
		"sorted; kubelet-refused domains dropped; a label the class set is not overridden")
}

func TestCustom(t *testing.T) {
	opts := baseOptions(awsv1.AMIFamilyCustom)
	opts.ClusterCIDR = ""
	out, err := bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	require.Empty(t, out, "Custom without user data has none")
}

func TestParseMIME(t *testing.T) {
	// Upstream's AL2023 example omits the closing delimiter.
	parts, err := bootstrap.ParseMIME("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\necho one\n--B\nContent-Type: text/x-shellscript\nContent-Transfer-Encoding: quoted-printable\n\necho tw=\no\n--B\n")
	require.NoError(t, err)
	require.Len(t, parts, 2)
	require.Equal(t, "echo one", parts[0].Content)
	require.Equal(t, "echo tw=\no", parts[1].Content, "copied raw, not transfer-decoded")
	require.Equal(t, "quoted-printable", parts[1].Header.Get("Content-Transfer-Encoding"))

	out, err := bootstrap.WriteMIME(parts)
	require.NoError(t, err)
	again, err := bootstrap.ParseMIME(out)
	require.NoError(t, err)
	require.Equal(t, parts, again, "write then parse is the identity")
	require.NotContains(t, out, "\r")
}

func TestNodeadmUserDataDetection(t *testing.T) {
	for _, c := range []struct{ userData, wantType string }{
		{"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n", bootstrap.ContentTypeNodeConfig},
		{"#!/bin/bash\necho hi\n", "text/x-shellscript"},
	} {
		opts := baseOptions(awsv1.AMIFamilyAL2023)
		opts.CustomUserData = ptr(c.userData)
		out, err := bootstrap.UserData(context.Background(), opts)
		require.NoError(t, err)
		parts, err := bootstrap.ParseMIME(out)
		require.NoError(t, err)
		require.Len(t, parts, 2)
		require.Equal(t, c.wantType, parts[0].ContentType())
		require.Equal(t, c.userData, parts[0].Content)
	}
}

// TestNodeadmArbitraryKubelet: AL2023 passes kubelet fields Karpenter has
// no flag for.
func TestNodeadmArbitraryKubelet(t *testing.T) {
	opts := baseOptions(awsv1.AMIFamilyAL2023)
	opts.Kubelet["registryPullQPS"] = apiextensionsv1.JSON{Raw: []byte(`10`)}
	opts.Kubelet["featureGates"] = apiextensionsv1.JSON{Raw: []byte(`{"InPlacePodVerticalScaling":true}`)}
	out, err := bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	parts, err := bootstrap.ParseMIME(out)
	require.NoError(t, err)
	var nc bootstrap.NodeConfig
	require.NoError(t, yamlToJSON(parts[0].Content, &nc))
	require.JSONEq(t, `10`, string(nc.Spec.Kubelet.Config["registryPullQPS"]))
	require.JSONEq(t, `{"InPlacePodVerticalScaling":true}`, string(nc.Spec.Kubelet.Config["featureGates"]))
}

func yamlToJSON(y string, into any) error {
	j, err := yamlBytesToJSON([]byte(y))
	if err != nil {
		return err
	}
	return json.Unmarshal(j, into)
}
