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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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

// TestUsersAndAuditLog checks that a listed user authenticates with the
// kubeconfig KubeconfigFor writes, as itself and with its groups (RBAC
// refuses it what nothing grants), and that the audit policy selects its
// requests by user name.
func TestUsersAndAuditLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const user = "system:serviceaccount:harness:reader"
	cp, err := controlplane.Start(ctx, controlplane.Options{
		SkipCRDs: true,
		Users:    []controlplane.User{{Name: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}},
		AuditPolicy: `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["` + user + `"]
  - level: None
`,
	})
	require.NoError(t, err)
	defer cp.Stop()
	_, err = cp.KubeconfigFor("nobody")
	require.Error(t, err)
	path, err := cp.KubeconfigFor(user)
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "audited", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "want forbidden, got %v", err)
	require.Contains(t, err.Error(), `"`+user+`"`)
	// The admin's requests are not logged.
	_, err = cp.Kubernetes.CoreV1().ConfigMaps("default").Get(ctx, "unaudited", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "want not found, got %v", err)

	b, err := os.ReadFile(cp.AuditLogPath)
	require.NoError(t, err)
	require.Contains(t, string(b), `"name":"audited"`)
	require.Contains(t, string(b), `"username":"`+user+`"`)
	require.NotContains(t, string(b), "unaudited")
}

// TestFreePortNeverRepeats asks for many ports, as the e2e suites do for
// every controller they start: the kernel offers recently closed ephemeral
// ports again, and a port handed out twice makes a controller's second
// server fail to bind.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 2000; i++ {
		port, err := controlplane.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice (call %d)", port, i)
		}
		seen[port] = true
	}
}
