package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one child of the harness. Its output goes to Dir/logs/<name>.log
// so a failing test can show why a component died.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	done    chan struct{}
	mu      sync.Mutex
	err     error
}

func (cp *ControlPlane) spawn(binDir, name string, args ...string) (*process, error) {
	return cp.spawnAs(filepath.Join(binDir, name), name, nil, args...)
}

func (cp *ControlPlane) spawnAs(path, name string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(cp.Dir, "logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log for %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = cp.Dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// The kernel kills the child when its parent dies, whatever the cause:
	// a panic, a `go test` time-out or SIGKILL. That is what keeps a failed
	// run from leaving an API server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, log: f, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	cp.procs = append(cp.procs, p)
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the end of the process log, for error messages.
func (p *process) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// stop asks politely, then insists.
func (p *process) stop(grace time.Duration) {
	defer p.log.Close()
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Alive reports whether pid is a live, non-zombie process; tests use it to
// prove nothing outlived its owner.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state field follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// Spawn starts another program beside the control plane (the controller
// under test, say) with the same guarantees as the components: its output
// goes to Dir/logs/<name>.log, it dies with its parent, and Stop stops it
// first. It returns the PID.
func (cp *ControlPlane) Spawn(path, name string, args ...string) (int, error) {
	return cp.SpawnEnv(path, name, nil, args...)
}

// SpawnEnv is Spawn with env (KEY=VALUE) added to this process's
// environment, as the controller reaches the local AWS through AWS_* .
func (cp *ControlPlane) SpawnEnv(path, name string, env []string, args ...string) (int, error) {
	// Children run in cp.Dir; resolve a relative path against ours first.
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("resolving %s: %w", path, err)
	}
	p, err := cp.spawnAs(abs, name, env, args...)
	if err != nil {
		return 0, err
	}
	return p.cmd.Process.Pid, nil
}

// Kill stops a process started with Spawn at once, as a crash would, and
// waits for it to be gone.
func (cp *ControlPlane) Kill(pid int) {
	for _, p := range cp.procs {
		if p.cmd.Process.Pid == pid {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// LogPath is where the output of the named process goes.
func (cp *ControlPlane) LogPath(name string) string {
	for _, p := range cp.procs {
		if p.name == name {
			return p.logPath
		}
	}
	return ""
}
