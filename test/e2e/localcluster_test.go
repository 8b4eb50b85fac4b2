package e2e_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/karpenter-go/karpenter/pkg/apis"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestLocalClusterRunsAndStopsCleanly is `make run` in miniature: build
// hack/localcluster, start it, wait until it reports ready, check the
// examples are in the cluster, press Ctrl-C, and check that no process it
// started is left.
func TestLocalClusterRunsAndStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "localcluster")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./hack/localcluster")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	dir := filepath.Join(t.TempDir(), "local")
	cmd := exec.CommandContext(ctx, bin, "--examples", filepath.Join(root, "examples"), "--dir", dir)
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill() }()

	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Log(sc.Text())
			if strings.HasPrefix(sc.Text(), "local cluster ready") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatal("localcluster did not become ready")
	}

	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apis.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	np := &v1.NodePool{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "general-purpose"}, np))
	deploy := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "inflate"}, deploy))
	require.EqualValues(t, 0, *deploy.Spec.Replicas)

	children := childPIDs(cmd.Process.Pid)
	require.GreaterOrEqual(t, len(children), 5, "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok")

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "localcluster should exit 0 on Ctrl-C")
	case <-time.After(60 * time.Second):
		t.Fatal("localcluster did not exit after SIGINT")
	}
	for _, pid := range children {
		require.False(t, controlplane.Alive(pid), "child %d outlived localcluster", pid)
	}
}

// childPIDs lists the direct children of pid from /proc.
func childPIDs(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}
