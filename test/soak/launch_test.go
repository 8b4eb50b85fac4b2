package soak

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TestExitedSaysWhy: a running controller is not exited; one that died is,
// and the error carries its panic, or its last lines without one.
func TestExitedSaysWhy(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	cp := &controlplane.ControlPlane{Dir: dir}
	spawn := func(name, script string) *launched {
		pid, err := cp.Spawn("/bin/sh", name, "-c", script)
		require.NoError(t, err)
		return &launched{cp: cp, pid: pid, name: name}
	}
	running := spawn("running", "sleep 60")
	defer cp.Kill(running.pid)
	panicked := spawn("panicked", "echo starting; echo 'panic: leader election lost [recovered]'; echo 'goroutine 155 [running]:'; echo 'sync.(*WaitGroup).Go'; exit 2")
	quit := spawn("quit", "echo one; echo two; echo three; echo 'fatal: no kubeconfig'; exit 1")

	assert.NoError(t, running.exited())
	for _, tc := range []struct {
		l    *launched
		want string
	}{
		{panicked, "panicked exited during the soak: panic: leader election lost [recovered] | goroutine 155 [running]:"},
		{quit, "quit exited during the soak: two | three | fatal: no kubeconfig"},
	} {
		require.Eventually(t, func() bool { return !controlplane.Alive(tc.l.pid) }, 10*time.Second, 50*time.Millisecond)
		assert.EqualError(t, tc.l.exited(), tc.want)
	}
}
