package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runCLI runs the CLI in-process with exactly args and returns its exit
// code and output.
func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelpAndCompletion: --help is an answer (exit 0, on stdout), a bad
// flag a mistake (exit 2); the completion script is valid bash and
// completes flags and commands.
func TestHelpAndCompletion(t *testing.T) {
	for _, h := range []string{"--help", "-h"} {
		code, out, _ := runCLI(h)
		assert.Equal(t, 0, code, h)
		assert.Contains(t, out, "usage: karpenter", h)
		assert.Contains(t, out, "--namespace", h)
	}
	code, _, errOut := runCLI("--no-such-flag", "status")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "unknown flag")

	code, _, _ = runCLI("completion", "fish")
	assert.Equal(t, 1, code)
	for _, shell := range []string{"bash", "zsh"} {
		code, script, errOut := runCLI("completion", shell)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, script, "complete -F _karpenter kubectl-karpenter")
		if shell == "zsh" {
			continue
		}
		file := filepath.Join(t.TempDir(), "karpenter.bash")
		require.NoError(t, os.WriteFile(file, []byte(script), 0o600))
		for words, want := range map[string]string{
			"karpenter --names": "--namespace",
			"karpenter --as-g":  "--as-group",
			"karpenter sn":      "snapshot",
			"karpenter why n":   "node",
			"karpenter -o ya":   "yaml",
		} {
			cmd := exec.Command("bash", "-c", `source "$1"; COMP_WORDS=($2); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _karpenter; echo "${COMPREPLY[*]}"`, "_", file, words)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			assert.Equal(t, want, strings.TrimSpace(string(out)), words)
		}
	}
}

// TestKubectlFlags: a pod named without a namespace is looked up in the
// kubeconfig context's namespace, or -n's; --as and --as-group
// impersonate; --request-timeout bounds each request.
func TestKubectlFlags(t *testing.T) {
	ctx := context.Background()
	const ns = "team-a"
	require.NoError(t, client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	p := pod("conventions-web", "100m", nil)
	p.Namespace = ns
	require.NoError(t, cp.Client.Create(ctx, p))
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, p, client.GracePeriodSeconds(0)) })

	// A kubeconfig whose context names team-a.
	cfg, err := clientcmd.LoadFromFile(cp.KubeconfigPath)
	require.NoError(t, err)
	cfg.Contexts[cfg.CurrentContext].Namespace = ns
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))

	code, out, errOut := runCLI("--kubeconfig", kubeconfig, "-o", "json", "why", "pod", "conventions-web")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "conventions-web")
	code, _, errOut = runCLI("--kubeconfig", kubeconfig, "-n", "default", "why", "pod", "conventions-web")
	assert.Equal(t, 1, code, "-n default must look in default, not the context's namespace")
	assert.Contains(t, errOut, "default/conventions-web")
	code, _, errOut = runCLI("--kubeconfig", cp.KubeconfigPath, "--namespace", ns, "why", "pod", "conventions-web")
	assert.Equal(t, 0, code, errOut)

	code, _, errOut = runCLI("--kubeconfig", cp.KubeconfigPath, "--as", "jane", "status")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `"jane" cannot list`)
	code, _, errOut = runCLI("--kubeconfig", cp.KubeconfigPath, "--as", "jane", "--as-group", "system:masters", "status")
	assert.Equal(t, 0, code, errOut)

	code, _, errOut = runCLI("--kubeconfig", cp.KubeconfigPath, "--request-timeout", "1ns", "status")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "deadline exceeded")
	code, _, errOut = runCLI("--kubeconfig", cp.KubeconfigPath, "--request-timeout", "30s", "status")
	assert.Equal(t, 0, code, errOut)
}

// TestSnapshotRedaction: by default a snapshot holds no env value, no
// credential-looking annotation and nothing of Secrets or ConfigMaps;
// --redact=false keeps env values and annotations.
func TestSnapshotRedaction(t *testing.T) {
	ctx := context.Background()
	const secretValue, tokenValue, dataValue = "s3cr3t-env-value", "tok-annotation-value", "c29tZS1zZWNyZXQtZGF0YQ"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "conventions-db", Namespace: "default"}, StringData: map[string]string{"password": dataValue}}
	config := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conventions-cfg", Namespace: "default"}, Data: map[string]string{"conf": dataValue}}
	p := pod("conventions-app", "100m", nil)
	p.Annotations = map[string]string{"example.com/api-token": tokenValue, "example.com/owner": "team-a"}
	p.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "DB_PASSWORD", Value: secretValue},
		{Name: "DB_FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "conventions-db"}, Key: "password", Optional: ptr.To(true)}}},
	}
	for _, o := range []client.Object{secret, config, p} {
		require.NoError(t, cp.Client.Create(ctx, o))
		t.Cleanup(func() { _ = cp.Client.Delete(ctx, o, client.GracePeriodSeconds(0)) })
	}

	redacted := string(karpenter(t, "snapshot", "-o", "yaml"))
	require.Contains(t, redacted, "conventions-app")
	for _, leak := range []string{secretValue, tokenValue, dataValue} {
		assert.NotContains(t, redacted, leak)
	}
	assert.Contains(t, redacted, "DB_PASSWORD", "variable names stay")
	assert.Contains(t, redacted, "conventions-db", "valueFrom references stay")
	assert.Contains(t, redacted, "team-a", "other annotations stay")

	kept := string(karpenter(t, "snapshot", "--redact=false"))
	assert.Contains(t, kept, secretValue)
	assert.Contains(t, kept, tokenValue)
	assert.NotContains(t, kept, dataValue, "Secrets and ConfigMaps are never listed")
}
