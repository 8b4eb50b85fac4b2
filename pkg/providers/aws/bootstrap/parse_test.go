package bootstrap_test

import (
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/bootstrap"
)

// The checks below read the output with the standard library and
// independent parsers, not with the package's own MIME code.

type mimePart struct{ contentType, body string }

func readMIME(t *testing.T, doc string) []mimePart {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(doc))
	require.NoError(t, err)
	require.Equal(t, "1.0", msg.Header.Get("MIME-Version"))
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/mixed", mt)
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []mimePart
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			return parts
		}
		require.NoError(t, err, "a document Karpenter writes is well formed, closing delimiter included")
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		parts = append(parts, mimePart{ct, string(b)})
	}
}

// userParts is what the merged document must carry first: the user's
// MIME parts, or the plain user data as one part.
func userParts(t *testing.T, opts bootstrap.Options, plainType string) []mimePart {
	t.Helper()
	ud := userData(opts)
	if ud == "" {
		return nil
	}
	if bootstrap.IsMIME(ud) {
		parts, err := bootstrap.ParseMIME(ud)
		require.NoError(t, err)
		out := make([]mimePart, len(parts))
		for i, p := range parts {
			out[i] = mimePart{p.ContentType(), p.Content}
		}
		return out
	}
	return []mimePart{{plainType, ud}}
}

// shellWords splits a command line as sh does for quotes and backslashes.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			require.GreaterOrEqual(t, j, 0, "unterminated ' in %q", s)
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			require.GreaterOrEqual(t, j, 0, "unterminated \" in %q", s)
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func checkAL2(t *testing.T, opts bootstrap.Options, out string) {
	parts := readMIME(t, out)
	user := userParts(t, opts, "text/x-shellscript")
	require.Len(t, parts, len(user)+1)
	require.Equal(t, user, append([]mimePart(nil), parts[:len(user)]...), "the user's parts come first, unchanged")
	ours := parts[len(parts)-1]
	require.Equal(t, "text/x-shellscript", ours.contentType)
	require.True(t, strings.HasPrefix(ours.body, "#!/bin/bash -xe\n"), ours.body)

	script := strings.ReplaceAll(ours.body, "\\\n", " ")
	var call string
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, "/etc/eks/bootstrap.sh ") {
			require.Empty(t, call, "one bootstrap.sh call")
			call = line
		}
	}
	require.NotEmpty(t, call, ours.body)
	words := shellWords(t, strings.TrimPrefix(call, "/etc/eks/bootstrap.sh "))
	require.Equal(t, clusterName, words[0])
	args := map[string]string{}
	for i := 1; i < len(words); i += 2 {
		require.True(t, strings.HasPrefix(words[i], "--"), "bootstrap.sh takes --flag value, got %q", words[i])
		require.Less(t, i+1, len(words), "flag %s has a value", words[i])
		args[words[i]] = words[i+1]
	}
	want := map[string]string{
		"--apiserver-endpoint": clusterEndpoint,
		"--b64-cluster-ca":     caBundle,
		"--dns-cluster-ip":     clusterDNS,
		"--use-max-pods":       "false",
	}
	if isRAID0(opts) {
		want["--local-disks"] = "raid0"
	}
	require.Equal(t, want, without(args, "--kubelet-extra-args"))
	requireKubeletFlags(t, opts, flagMap(t, shellWords(t, args["--kubelet-extra-args"])))
}

func checkAL2023(t *testing.T, opts bootstrap.Options, out string) {
	parts := readMIME(t, out)
	plain := "text/x-shellscript"
	if strings.Contains(userData(opts), "kind: NodeConfig") {
		plain = bootstrap.ContentTypeNodeConfig
	}
	user := userParts(t, opts, plain)
	require.Len(t, parts, len(user)+1)
	require.Equal(t, user, append([]mimePart(nil), parts[:len(user)]...), "the user's parts come first, unchanged")
	ours := parts[len(parts)-1]
	require.Equal(t, bootstrap.ContentTypeNodeConfig, ours.contentType, "Karpenter's NodeConfig is the last part")

	var nc struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Containerd map[string]any `json:"containerd"`
			Cluster    struct {
				Name, APIServerEndpoint, CertificateAuthority, CIDR string
			} `json:"cluster"`
			Instance struct {
				LocalStorage struct{ Strategy string } `json:"localStorage"`
			} `json:"instance"`
			Kubelet struct {
				Config map[string]any `json:"config"`
				Flags  []string       `json:"flags"`
			} `json:"kubelet"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(ours.body), &nc, yaml.DisallowUnknownFields))
	require.Equal(t, "node.eks.aws/v1alpha1", nc.APIVersion)
	require.Equal(t, "NodeConfig", nc.Kind)
	c := nc.Spec.Cluster
	require.Equal(t, clusterName, c.Name)
	require.Equal(t, clusterEndpoint, c.APIServerEndpoint)
	require.Equal(t, clusterCIDR, c.CIDR)
	ca, err := base64.StdEncoding.DecodeString(c.CertificateAuthority)
	require.NoError(t, err)
	require.Equal(t, "ca-bundle\n", string(ca))
	if isRAID0(opts) {
		require.Equal(t, "RAID0", nc.Spec.Instance.LocalStorage.Strategy)
	} else {
		require.Empty(t, nc.Spec.Instance.LocalStorage.Strategy)
	}

	cfg := nc.Spec.Kubelet.Config
	require.Equal(t, []any{clusterDNS}, cfg["clusterDNS"])
	require.Equal(t, []any{
		map[string]any{"key": "baz", "value": "bin", "effect": "NoExecute"},
		map[string]any{"key": "foo", "value": "bar", "effect": "NoExecute"},
		map[string]any{"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
	}, cfg["registerWithTaints"])
	if hasKubelet(opts, "podsPerCore") {
		// The class's map goes in as written, every key.
		require.EqualValues(t, 29, cfg["maxPods"])
		require.Equal(t, map[string]any{"memory.available": "1m"}, cfg["evictionSoftGracePeriod"])
		require.Equal(t, false, cfg["cpuCFSQuota"])
		require.Len(t, cfg, len(opts.Kubelet)+1)
	} else {
		require.EqualValues(t, 110, cfg["maxPods"])
		require.Len(t, cfg, 3)
	}
	require.Len(t, nc.Spec.Kubelet.Flags, 1)
	flag, ok := strings.CutPrefix(nc.Spec.Kubelet.Flags[0], "--node-labels=")
	require.True(t, ok, nc.Spec.Kubelet.Flags[0])
	unquoted, err := strconv.Unquote(flag)
	require.NoError(t, err)
	require.Equal(t, wantLabels, splitLabels(t, unquoted))
}

func checkBottlerocket(t *testing.T, opts bootstrap.Options, out string) {
	var doc struct {
		Settings map[string]any `toml:"settings"`
	}
	require.NoError(t, toml.Unmarshal([]byte(out), &doc))
	k8s := doc.Settings["kubernetes"].(map[string]any)
	require.Equal(t, clusterName, k8s["cluster-name"], "ours overwrite the user's")
	require.Equal(t, clusterEndpoint, k8s["api-server"])
	require.Equal(t, caBundle, k8s["cluster-certificate"])
	require.Equal(t, clusterDNS, k8s["cluster-dns-ip"])
	labels := map[string]string{}
	for k, v := range k8s["node-labels"].(map[string]any) {
		labels[k] = v.(string)
	}
	want := map[string]string{}
	for k, v := range wantLabels {
		want[k] = v
	}
	custom := userData(opts) != ""
	if custom {
		want["custom-node-label"] = "custom" // the user's label is kept, its capacity-type is overwritten
		require.EqualValues(t, 30, k8s["kube-api-qps"], "settings Karpenter does not own stay")
		require.Equal(t, "test.local", doc.Settings["network"].(map[string]any)["hostname"])
		require.Equal(t, []any{"169.254.169.123"}, doc.Settings["ntp"].(map[string]any)["time-servers"])
		require.Equal(t, false, doc.Settings["autoscaling"].(map[string]any)["should-wait"])
		require.Equal(t, map[string]any{"memory.available": "12%"}, k8s["eviction-hard"], "spec.kubelet sets no evictionHard, the user's stays")
	}
	require.Equal(t, want, labels)
	require.Equal(t, map[string]any{
		"baz":                       []any{"bin:NoExecute"},
		"foo":                       []any{"bar:NoExecute"},
		"karpenter.sh/unregistered": []any{":NoExecute"},
	}, k8s["node-taints"], "the NodeClaim's taints replace the user's")

	commands, _ := doc.Settings["bootstrap-commands"].(map[string]any)
	if isRAID0(opts) {
		require.Equal(t, map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				[]any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"mode":      "always",
			"essential": true,
		}, commands[bootstrap.MountInstanceStorageCommand])
	} else {
		require.Nil(t, commands)
	}
	if hasKubelet(opts, "podsPerCore") {
		require.EqualValues(t, 29, k8s["max-pods"])
		require.Equal(t, map[string]any{"cpu": "100m", "memory": "100Mi"}, k8s["system-reserved"])
		require.Equal(t, map[string]any{"cpu": "200m", "ephemeral-storage": "3Gi"}, k8s["kube-reserved"])
		require.Equal(t, map[string]any{"memory.available": "5%", "nodefs.available": "10%"}, k8s["eviction-hard"])
		require.Equal(t, map[string]any{"memory.available": "500Mi"}, k8s["eviction-soft"])
		require.Equal(t, map[string]any{"memory.available": "1m0s"}, k8s["eviction-soft-grace-period"])
		require.EqualValues(t, 60, k8s["eviction-max-pod-grace-period"])
		require.Equal(t, "85", k8s["image-gc-high-threshold-percent"])
		require.Equal(t, "80", k8s["image-gc-low-threshold-percent"])
		require.Equal(t, false, k8s["cpu-cfs-quota-enforced"])
		require.NotContains(t, k8s, "pods-per-core", "Bottlerocket has no podsPerCore")
	} else {
		require.EqualValues(t, 110, k8s["max-pods"], "ours overwrite the user's 7")
	}
}

func checkWindows(t *testing.T, opts bootstrap.Options, out string) {
	require.True(t, strings.HasPrefix(out, "<powershell>\n"), out)
	require.True(t, strings.HasSuffix(out, "\n</powershell>"), out)
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(out, "<powershell>\n"), "\n</powershell>"), "\n")
	custom := strings.Split(strings.TrimRight(userData(opts), "\n"), "\n")
	if userData(opts) == "" {
		custom = nil
	}
	require.Len(t, lines, len(custom)+2)
	require.Equal(t, custom, append([]string(nil), lines[:len(custom)]...), "the user's PowerShell runs first")
	require.Equal(t, `[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"`, lines[len(custom)])
	call, ok := strings.CutPrefix(lines[len(custom)+1], "& $EKSBootstrapScriptFile ")
	require.True(t, ok, lines[len(custom)+1])
	words := shellWords(t, call) // PowerShell's single quotes are literal, like sh's
	args := map[string]string{}
	for i := 0; i < len(words); i += 2 {
		require.True(t, strings.HasPrefix(words[i], "-"), words[i])
		args[words[i]] = words[i+1]
	}
	require.Equal(t, map[string]string{
		"-EKSClusterName":    clusterName,
		"-APIServerEndpoint": clusterEndpoint,
		"-Base64ClusterCA":   caBundle,
		"-DNSClusterIP":      clusterDNS,
	}, without(args, "-KubeletExtraArgs"))
	requireKubeletFlags(t, opts, flagMap(t, shellWords(t, args["-KubeletExtraArgs"])))
}

func yamlBytesToJSON(y []byte) ([]byte, error) { return yaml.YAMLToJSON(y) }
