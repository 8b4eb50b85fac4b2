package charts_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// sandboxEnv carries a sandboxSpec to the test binary re-executed as the
// sandbox's first process.
const sandboxEnv = "KARPENTER_TEST_SANDBOX"

// sandboxSpec is what a container runtime would take from the image's
// config and the pod's securityContext.
type sandboxSpec struct {
	Rootfs   string
	UID, GID int
	ReadOnly bool
	Args     []string
	Env      []string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(sandboxEnv); spec != "" {
		sandbox(spec)
	}
	code := m.Run()
	if builtImage.tmp != "" {
		_ = os.RemoveAll(builtImage.tmp)
	}
	os.Exit(code)
}

// sandbox turns this process, which runs in a mount namespace of its own
// (sandboxCommand asks for it, and Go makes the namespace's mounts
// private), into the image's entrypoint the way a container runtime
// would: the unpacked image bind-mounted onto itself (read-only when the
// securityContext says so) with /proc inside, chroot into it, the
// securityContext's user and group, then exec. It never returns.
func sandbox(specJSON string) {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "sandbox: %s: %v\n", what, err)
		os.Exit(125)
	}
	var s sandboxSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		fail("spec", err)
	}
	if err := syscall.Mount(s.Rootfs, s.Rootfs, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		fail("bind-mounting the root", err)
	}
	// A bind mount takes the read-only flag only on a remount; /proc is
	// mounted after it, onto the directory the image already has.
	if s.ReadOnly {
		if err := syscall.Mount("", s.Rootfs, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			fail("remounting the root read-only", err)
		}
	}
	if err := syscall.Mount("proc", filepath.Join(s.Rootfs, "proc"), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		fail("mounting /proc", err)
	}
	if err := syscall.Chroot(s.Rootfs); err != nil {
		fail("chroot", err)
	}
	if err := syscall.Chdir("/"); err != nil {
		fail("chdir", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		fail("setgroups", err)
	}
	if err := syscall.Setgid(s.GID); err != nil {
		fail("setgid", err)
	}
	if err := syscall.Setuid(s.UID); err != nil {
		fail("setuid", err)
	}
	// Changing the user cleared the parent-death signal.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fail("prctl", errno)
	}
	// The runtime's promise, checked before the controller relies on it:
	// nothing on the root filesystem is writable, not even /tmp.
	if s.ReadOnly {
		f, err := os.Create("/tmp/.sandbox-probe")
		if err == nil {
			f.Close()
			fail("the root filesystem", errors.New("writable"))
		}
		if !errors.Is(err, syscall.EROFS) {
			fail("probing /tmp", err)
		}
	}
	fail("exec", syscall.Exec(s.Args[0], s.Args, s.Env))
}

// imageRun runs the controller from an unpacked image.
type imageRun struct {
	rootfs string
	image  ociImage
}

// command is the controller of the image started as c's securityContext
// says, with env on top of the image's own, authenticated by kubeconfig
// (copied into the image's filesystem, as a pod gets its token mounted).
// As root it runs in a sandbox (chroot, the user, a read-only root);
// otherwise the binary runs from the unpacked image as the test's user,
// every file of it made read-only.
func (r *imageRun) command(t *testing.T, c corev1.Container, env map[string]string, kubeconfig string) *exec.Cmd {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || *sc.RunAsUser == 0 {
		t.Fatalf("the chart's securityContext %+v does not run the controller as a non-root user", sc)
	}
	readOnly := sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	kc, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const kubeconfigIn = "/var/run/karpenter/kubeconfig"
	if err := os.MkdirAll(filepath.Join(r.rootfs, "var", "run", "karpenter"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.rootfs, kubeconfigIn), kc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.rootfs, "proc"), 0o555); err != nil {
		t.Fatal(err)
	}
	cfg := r.image.config.Config
	spec := sandboxSpec{
		Rootfs:   r.rootfs,
		UID:      int(*sc.RunAsUser),
		GID:      int(*sc.RunAsGroup),
		ReadOnly: readOnly,
		Args:     append(append([]string{}, cfg.Entrypoint...), "--kubeconfig="+kubeconfigIn),
		Env:      append([]string{}, cfg.Env...),
	}
	for k, v := range env {
		spec.Env = append(spec.Env, k+"="+v)
	}
	if os.Geteuid() != 0 {
		t.Logf("not root: the image's controller runs unconfined as uid %d from a read-only copy", os.Geteuid())
		if readOnly {
			readOnlyTree(t, r.rootfs)
		}
		spec.Args[0] = filepath.Join(r.rootfs, spec.Args[0])
		spec.Args[len(spec.Args)-1] = "--kubeconfig=" + filepath.Join(r.rootfs, kubeconfigIn)
		cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
		cmd.Env = spec.Env
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{sandboxEnv + "=" + string(b)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Unshareflags: syscall.CLONE_NEWNS}
	return cmd
}

// readOnlyTree takes the write bits off every file and directory under
// root, and gives them back when the test ends (so that its temporary
// directory can be removed).
func readOnlyTree(t *testing.T, root string) {
	t.Helper()
	modes := map[string]os.FileMode{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		modes[p] = info.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, m := range modes {
		if err := os.Chmod(p, m&^0o222); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for p, m := range modes {
			_ = os.Chmod(p, m)
		}
	})
}

// processUser is the real and effective user of a running process, from
// /proc.
func processUser(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			return strings.Join(strings.Fields(v), " "), nil
		}
	}
	return "", errors.New("no Uid line")
}
