package bootstrap_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/bootstrap"
)

// TestUserDataRefusesInjection: labels, taints and kubelet values written
// into AL2's bootstrap.sh line and Windows' Start-EKSBootstrap.ps1 line are
// validated at launch; one carrying shell or PowerShell metacharacters
// fails the launch instead of reaching the command line.
func TestUserDataRefusesInjection(t *testing.T) {
	kubelet := func(key, raw string) func(*bootstrap.Options) {
		return func(o *bootstrap.Options) {
			o.Kubelet = awsv1.KubeletConfiguration{key: apiextensionsv1.JSON{Raw: []byte(raw)}}
		}
	}
	label := func(k, v string) func(*bootstrap.Options) {
		return func(o *bootstrap.Options) { o.Labels = map[string]string{k: v} }
	}
	taint := func(tn corev1.Taint) func(*bootstrap.Options) {
		return func(o *bootstrap.Options) { o.Taints = []corev1.Taint{tn} }
	}
	for _, c := range []struct {
		name    string
		mutate  func(*bootstrap.Options)
		wantErr string
	}{
		{"label value closing the shell quote", label("team", `a' ; touch /tmp/pwned ; '`), `node label "team" value`},
		{"label value with a command substitution", label("team", "$(reboot)"), `node label "team" value`},
		{"label value with a PowerShell subexpression", label("team", "a';Invoke-Expression x;'"), `node label "team" value`},
		{"label value with a typographic quote", label("team", "a\u2019;x"), `node label "team" value`},
		{"label value with a comma adding a label", label("team", "a,kubernetes.io/role=master"), `node label "team" value`},
		{"label key with a quote", label("te'am", "a"), `node label key "te'am"`},
		{"label key with a space", label("a b", "a"), `node label key "a b"`},
		{"taint value with a quote", taint(corev1.Taint{Key: "k", Value: "v'; id; '", Effect: corev1.TaintEffectNoSchedule}), `taint "k" value`},
		{"taint key with a backtick", taint(corev1.Taint{Key: "k`id`", Effect: corev1.TaintEffectNoSchedule}), "taint key"},
		{"taint effect not an effect", taint(corev1.Taint{Key: "k", Effect: "NoSchedule' ; id ; '"}), `taint "k" effect`},
		{"systemReserved value with a quote", kubelet("systemReserved", `{"cpu":"100m' ; id ; '"}`), "kubelet systemReserved[cpu]"},
		{"kubeReserved key with a quote", kubelet("kubeReserved", `{"cpu' ; id ; '":"100m"}`), "kubelet kubeReserved key"},
		{"evictionHard value with a dollar", kubelet("evictionHard", `{"imagefs.available":"$(id)"}`), "kubelet evictionHard[imagefs.available]"},
		{"evictionSoft key with a semicolon", kubelet("evictionSoft", `{"memory.available;id":"5%"}`), "kubelet evictionSoft key"},
		{"evictionSoftGracePeriod key with a quote", kubelet("evictionSoftGracePeriod", `{"memory.available'x":"1m"}`), "kubelet evictionSoftGracePeriod key"},
	} {
		for _, family := range []string{awsv1.AMIFamilyAL2, awsv1.AMIFamilyWindows2022} {
			t.Run(family+"/"+c.name, func(t *testing.T) {
				opts := baseOptions(family)
				c.mutate(&opts)
				out, err := bootstrap.UserData(context.Background(), opts)
				require.ErrorContains(t, err, c.wantErr)
				require.Empty(t, out)
			})
		}
	}

	// What the kubelet accepts still renders.
	for _, family := range []string{awsv1.AMIFamilyAL2, awsv1.AMIFamilyWindows2022} {
		opts := baseOptions(family)
		opts.Labels["example.com/team"] = "a-b_c.d"
		opts.Labels["empty"] = ""
		opts.Kubelet = awsv1.KubeletConfiguration{
			"systemReserved":          {Raw: []byte(`{"cpu":"100m","ephemeral-storage":"1Gi","example.com/gpu":"1"}`)},
			"evictionHard":            {Raw: []byte(`{"memory.available":"5%","nodefs.inodesFree":"10.5%","imagefs.available":"1Gi"}`)},
			"evictionSoftGracePeriod": {Raw: []byte(`{"memory.available":"1m"}`)},
		}
		_, err := bootstrap.UserData(context.Background(), opts)
		require.NoError(t, err, family)
	}
}

// TestUserDataQuotesSettings: the operator's settings (cluster name,
// endpoint, CA) are quoted for the shell and for PowerShell, so a quote in
// one of them stays inside its argument.
func TestUserDataQuotesSettings(t *testing.T) {
	name := `my'cluster ; touch PWNED ; '`
	endpoint := "https://example.com/$(touch PWNED)"

	opts := baseOptions(awsv1.AMIFamilyAL2)
	opts.ClusterName, opts.ClusterEndpoint = name, endpoint
	out, err := bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	require.Contains(t, out, `/etc/eks/bootstrap.sh 'my'\''cluster ; touch PWNED ; '\''' --apiserver-endpoint 'https://example.com/$(touch PWNED)'`)

	// Run the bootstrap.sh line with bootstrap.sh replaced by a printer:
	// the arguments arrive whole and nothing else runs.
	bash, err := exec.LookPath("bash")
	if err == nil {
		line := out[strings.Index(out, "/etc/eks/bootstrap.sh"):]
		line = line[:strings.Index(line, "\n--")] // name, endpoint and CA
		dir := t.TempDir()
		cmd := exec.Command(bash, "-c", strings.Replace(line, "/etc/eks/bootstrap.sh", `printf '%s\n'`, 1))
		cmd.Dir = dir
		got, err := cmd.Output()
		require.NoError(t, err)
		args := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		require.Equal(t, name, args[0])
		require.Equal(t, endpoint, args[2])
		_, err = os.Stat(filepath.Join(dir, "PWNED"))
		require.True(t, os.IsNotExist(err), "no command ran")
	}

	opts = baseOptions(awsv1.AMIFamilyWindows2022)
	opts.ClusterName = "my'cluster\u2019;Remove-Item C:\\ -Recurse;\u2018"
	out, err = bootstrap.UserData(context.Background(), opts)
	require.NoError(t, err)
	require.Contains(t, out, "-EKSClusterName 'my''cluster\u2019\u2019;Remove-Item C:\\ -Recurse;\u2018\u2018' -APIServerEndpoint")
}
