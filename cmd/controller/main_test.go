package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func freePort(t *testing.T) string {
	t.Helper()
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	return strconv.Itoa(port)
}

func status(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestRun starts the controller binary's code in-process against a real API
// server, with leader election on and settings from both env and flags, and
// checks probes, the Lease, JSON logs and a clean shutdown that releases the
// Lease.
func TestRun(t *testing.T) {
	metricsPort, probePort := freePort(t), freePort(t)
	logPath := filepath.Join(t.TempDir(), "controller.log")
	env := map[string]string{
		"LEADER_ELECTION_NAMESPACE": "kube-system",
		"HEALTH_PROBE_PORT":         "1", // overridden by the flag below
		"LOG_OUTPUT_PATHS":          logPath,
	}
	args := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-port=" + metricsPort,
		"--health-probe-port=" + probePort,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}()

	probe := "http://127.0.0.1:" + probePort
	require.Eventually(t, func() bool { return status(probe+"/healthz") == http.StatusOK }, 30*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool { return status(probe+"/readyz") == http.StatusOK }, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, http.StatusOK, status("http://127.0.0.1:"+metricsPort+"/metrics"))

	key := types.NamespacedName{Namespace: "kube-system", Name: "karpenter-leader-election"}
	require.Eventually(t, func() bool {
		l := &coordinationv1.Lease{}
		if err := cp.Client.Get(ctx, key, l); err != nil {
			return false
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}, 30*time.Second, 100*time.Millisecond, "lease acquired")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "clean shutdown")
	case <-time.After(45 * time.Second):
		t.Fatal("controller did not stop")
	}
	l := &coordinationv1.Lease{}
	require.NoError(t, cp.Client.Get(context.Background(), key, l))
	assert.True(t, l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "", "lease released on shutdown")

	f, err := os.Open(logPath)
	require.NoError(t, err)
	defer f.Close()
	var messages []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var entry map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &entry), sc.Text())
		for _, k := range []string{"level", "time", "message", "commit"} {
			assert.Contains(t, entry, k)
		}
		messages = append(messages, entry["message"].(string))
	}
	assert.Contains(t, strings.Join(messages, "\n"), "starting controller")
}

// rejection is options Run refuses, with what its error says.
type rejection struct {
	name string
	args []string
	env  map[string]string
	want string
}

func TestRunRejectsBadOptions(t *testing.T) {
	tests := []rejection{
		{"bad flag", []string{"--log-level=loud"}, nil, "log-level"},
		{"bad env", nil, map[string]string{"BATCH_IDLE_DURATION": "soon"}, "BATCH_IDLE_DURATION"},
		{"unknown flag", []string{"--no-such-flag"}, nil, "parsing flags"},
		{"unknown provider", []string{"--cloud-provider=gcp"}, nil, `unknown --cloud-provider "gcp"`},
		{"unknown provider from env", nil, map[string]string{"CLOUD_PROVIDER": "gcp"}, `unknown --cloud-provider "gcp"`},
	}
	tests = append(tests, awsRejections...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), tt.args, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestKWOKOnlyBuildLinksNoAWS: the kwokonly build (the soak's, beside
// upstream's kwok controller) links neither the AWS provider nor the AWS
// SDK, whose init builds its service descriptions on the heap; the default
// build (the image) links both.
func TestKWOKOnlyBuildLinksNoAWS(t *testing.T) {
	for _, tc := range []struct {
		tags     []string
		linksAWS bool
	}{
		{tags: nil, linksAWS: true},
		{tags: []string{"-tags", "kwokonly"}, linksAWS: false},
	} {
		t.Run(strings.Join(append([]string{"build"}, tc.tags...), " "), func(t *testing.T) {
			args := append(append([]string{"list", "-deps"}, tc.tags...), ".")
			out, err := exec.Command("go", args...).Output()
			require.NoError(t, err)
			var aws []string
			for _, pkg := range strings.Fields(string(out)) {
				if strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2") || strings.HasPrefix(pkg, "github.com/karpenter-go/karpenter/pkg/providers/aws") {
					aws = append(aws, pkg)
				}
			}
			assert.Equal(t, tc.linksAWS, len(aws) > 0, "AWS packages linked: %v", aws)
		})
	}
}
