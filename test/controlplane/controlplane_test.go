package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestStartInstallsCRDsAndStops checks the minimal control plane serves our
// API groups and that Stop leaves no process behind.
func TestStartInstallsCRDsAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	require.NoError(t, err)
	pids := cp.PIDs()
	require.Contains(t, pids, "etcd")
	require.Contains(t, pids, "kube-apiserver")

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "harness"}}
	require.NoError(t, cp.Client.Create(ctx, ns))
	groups, err := cp.Kubernetes.Discovery().ServerGroups()
	require.NoError(t, err)
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	require.Subset(t, names, []string{"karpenter.sh", "karpenter.k8s.aws", "karpenter.kwok.sh"})

	cp.Stop()
	for name, pid := range pids {
		require.False(t, controlplane.Alive(pid), "%s (pid %d) still running after Stop", name, pid)
	}
}

// TestChildrenDieWithParent runs a child test binary that starts a control
// plane, prints the PIDs, and is then killed with SIGKILL: the parent-death
// signal must take etcd and the API server down with it.
func TestChildrenDieWithParent(t *testing.T) {
	if os.Getenv("CONTROLPLANE_ORPHAN_CHILD") == "1" {
		ctx := context.Background()
		cp, err := controlplane.Start(ctx, controlplane.Options{SkipCRDs: true})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		for _, pid := range cp.PIDs() {
			fmt.Println("PID", pid)
		}
		time.Sleep(time.Hour) // killed by the parent long before this
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithParent$", "-test.v")
	cmd.Env = append(os.Environ(), "CONTROLPLANE_ORPHAN_CHILD=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var pids []int
	buf := make([]byte, 4096)
	var acc strings.Builder
	deadline := time.Now().Add(90 * time.Second)
	for len(pids) < 2 && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		acc.Write(buf[:n])
		pids = pids[:0]
		for _, line := range strings.Split(acc.String(), "\n") {
			if p, ok := strings.CutPrefix(line, "PID "); ok {
				pid, convErr := strconv.Atoi(strings.TrimSpace(p))
				require.NoError(t, convErr)
				pids = append(pids, pid)
			}
		}
		require.NotContains(t, acc.String(), "ERR", acc.String())
		if err != nil {
			break
		}
	}
	require.Len(t, pids, 2, "child output: %s", acc.String())
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if controlplane.Alive(pid) {
				return false
			}
		}
		return true
	}, 15*time.Second, 100*time.Millisecond, "control-plane processes outlived their parent")
}
