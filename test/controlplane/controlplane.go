// Package controlplane starts a real Kubernetes control plane on loopback for
// tests and for `make run`: etcd and kube-apiserver always, and on request
// kube-controller-manager, kube-scheduler and kwok (which plays every
// kubelet). It installs this project's CRDs, hands back clients and a
// kubeconfig, and tears everything down.
//
// Every child process is started with a parent-death signal, so a test binary
// that panics, times out or is killed takes its control plane with it: no
// process outlives the harness that started it.
package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis"
)

// KwokNodeSelector is the label selector kwok is started with: it manages only
// Nodes carrying this label, which the simulated cloud provider puts on every
// Node it creates (upstream's kwok provider uses the same label).
const KwokNodeSelector = "kwok.x-k8s.io/node=fake"

// Options selects which components run and how they are tuned.
type Options struct {
	// BinDir holds the binaries `make tools` builds. Empty means
	// $KARPENTER_TOOLS_DIR, else bin/tools at the module root.
	BinDir string
	// Dir is the working directory for data, certificates, logs and the
	// kubeconfig. Empty means a fresh temporary directory, removed on Stop.
	Dir string

	ControllerManager bool
	Scheduler         bool
	Kwok              bool

	// SkipCRDs leaves the project's CRDs uninstalled.
	SkipCRDs bool
	// APIQPS and APIBurst tune the client rate limits of the
	// controller-manager and the scheduler; zero keeps their defaults.
	APIQPS   int
	APIBurst int
	// Scheme is used for Client; nil means client-go's types plus every API
	// group of this project.
	Scheme *runtime.Scheme
	// Users are identities, beside the admin, that the API server accepts
	// static bearer tokens for (KubeconfigFor writes a kubeconfig for one):
	// a component run as a ServiceAccount without the token controller.
	// Unlike impersonation by the admin, such a client is the user from
	// the first filter on, so the audit policy can select it.
	Users []User
	// AuditPolicy, when set, is an audit policy (YAML) the API server logs
	// by, as JSON lines in ControlPlane.AuditLogPath.
	AuditPolicy string
	// APIServerArgs are extra kube-apiserver flags (feature gates, say),
	// after the harness's own.
	APIServerArgs []string
}

// User is an identity the API server authenticates by a static token.
type User struct {
	Name   string
	Groups []string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config authenticates as a member of system:masters.
	Config *rest.Config
	// Client is a controller-runtime client over Config.
	Client client.Client
	// Kubernetes is a client-go clientset over Config.
	Kubernetes kubernetes.Interface
	// KubeconfigPath is a kubeconfig file for kubectl and the child processes.
	KubeconfigPath string
	// Dir is the working directory; per-process logs are in Dir/logs.
	Dir string
	// AuditLogPath is the API server's audit log, when Options.AuditPolicy
	// is set. The log backend blocks, so a request's event is written
	// before its response.
	AuditLogPath string

	opts      Options
	host      string
	tokens    map[string]string
	removeDir bool
	procs     []*process
}

// Start brings up the control plane and returns once the API server is ready,
// the CRDs are established and every requested component runs. On error,
// whatever was started is stopped again.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	binDir, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{opts: opts, Dir: opts.Dir}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "karpenter-controlplane-"); err != nil {
			return nil, fmt.Errorf("creating work dir: %w", err)
		}
		cp.removeDir = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for _, d := range []string{"logs", "etcd", "certs"} {
		if err := os.MkdirAll(filepath.Join(cp.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s dir: %w", d, err)
		}
	}

	var etcdURL string
	if err := retryPortClash(func() (err error) {
		etcdURL, err = cp.startEtcd(binDir)
		return err
	}); err != nil {
		return nil, err
	}
	if err := retryPortClash(func() error { return cp.startAPIServer(ctx, binDir, etcdURL) }); err != nil {
		return nil, err
	}
	if !opts.SkipCRDs {
		if err := cp.installCRDs(ctx); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		args := []string{
			"--kubeconfig=" + cp.KubeconfigPath,
			"--leader-elect=false",
			"--secure-port=0",
			// The token controllers need a signing key the API server does
			// not share with us; nothing here needs service-account tokens.
			"--controllers=*,-serviceaccount-token,-bootstrapsigner,-tokencleaner",
			"--use-service-account-credentials=false",
		}
		args = append(args, cp.rateLimitArgs()...)
		if _, err := cp.spawn(binDir, "kube-controller-manager", args...); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		args := []string{"--kubeconfig=" + cp.KubeconfigPath, "--leader-elect=false", "--secure-port=0"}
		args = append(args, cp.rateLimitArgs()...)
		if _, err := cp.spawn(binDir, "kube-scheduler", args...); err != nil {
			return nil, err
		}
	}
	if opts.Kwok {
		stages := filepath.Join(binDir, "kwok-stages.yaml")
		if _, err := os.Stat(stages); err != nil {
			return nil, fmt.Errorf("kwok stages missing (run `make tools`): %w", err)
		}
		if _, err := cp.spawn(binDir, "kwok",
			"--kubeconfig="+cp.KubeconfigPath,
			"--manage-all-nodes=false",
			"--manage-nodes-with-label-selector="+KwokNodeSelector,
			"--server-address=127.0.0.1:0",
			"--config="+stages,
		); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// Stop stops every process in reverse start order and removes the working
// directory if Start created it. It is safe to call more than once.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].stop(10 * time.Second)
	}
	cp.procs = nil
	if cp.removeDir {
		_ = os.RemoveAll(cp.Dir)
		cp.removeDir = false
	}
}

// PIDs returns the process IDs of the running components, for tests that
// check nothing is left behind.
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range cp.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}

func (cp *ControlPlane) rateLimitArgs() []string {
	var args []string
	if cp.opts.APIQPS > 0 {
		args = append(args, "--kube-api-qps="+strconv.Itoa(cp.opts.APIQPS))
	}
	if cp.opts.APIBurst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(cp.opts.APIBurst))
	}
	return args
}

func (cp *ControlPlane) startEtcd(binDir string) (string, error) {
	clientPort, err := FreePort()
	if err != nil {
		return "", err
	}
	peerPort, err := FreePort()
	if err != nil {
		return "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := cp.spawn(binDir, "etcd",
		"--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// A throw-away cluster: durability buys nothing and fsync costs
		// seconds on a busy disk.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	if err := waitTCP(p, clientPort, 30*time.Second); err != nil {
		return "", err
	}
	return clientURL, nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, binDir, etcdURL string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	certs := filepath.Join(cp.Dir, "certs")
	saKey := filepath.Join(certs, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	token, err := randomToken()
	if err != nil {
		return err
	}
	// The static token file: token,user,uid,"group,group".
	lines := token + ",admin,admin,system:masters\n"
	cp.tokens = map[string]string{}
	for _, u := range cp.opts.Users {
		t, err := randomToken()
		if err != nil {
			return err
		}
		cp.tokens[u.Name] = t
		lines += fmt.Sprintf("%s,%s,%s,%q\n", t, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	tokens := filepath.Join(certs, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certs,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Without the token controller no ServiceAccount tokens exist; the
		// admission plugin would otherwise reject pods in fresh namespaces.
		"--disable-admission-plugins=ServiceAccount",
		// The endpoint reconciler refuses loopback addresses; nothing in
		// a single-host control plane needs the kubernetes Service endpoints.
		"--endpoint-reconciler-type=none",
	}
	if cp.opts.AuditPolicy != "" {
		policy := filepath.Join(cp.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(cp.opts.AuditPolicy), 0o600); err != nil {
			return fmt.Errorf("writing audit policy: %w", err)
		}
		cp.AuditLogPath = filepath.Join(cp.Dir, "logs", "audit.log")
		// The log is never rotated: an unset --audit-log-maxsize rotates at
		// 100 MB (the log library's default), which an hour of a
		// controller's requests at 1,000 nodes passes, and readers of
		// AuditLogPath would see only what came after.
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+cp.AuditLogPath, "--audit-log-format=json",
			"--audit-log-mode=blocking", "--audit-log-maxsize=1048576")
	}
	args = append(args, cp.opts.APIServerArgs...)
	p, err := cp.spawn(binDir, "kube-apiserver", args...)
	if err != nil {
		return err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	cp.host = host
	cp.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200,
		Burst:           400,
	}
	cp.KubeconfigPath = filepath.Join(cp.Dir, "kubeconfig")
	if err := writeKubeconfig(cp.KubeconfigPath, host, token); err != nil {
		return err
	}
	if cp.Kubernetes, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("building clientset: %w", err)
	}
	if err := waitReady(ctx, p, cp.Kubernetes, 60*time.Second); err != nil {
		return err
	}
	scheme := cp.opts.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return fmt.Errorf("building scheme: %w", err)
		}
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			return fmt.Errorf("building scheme: %w", err)
		}
		if err := apis.AddToScheme(scheme); err != nil {
			return fmt.Errorf("building scheme: %w", err)
		}
	}
	if cp.Client, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	return nil
}

// waitReady polls /readyz; it gives up early when the API server exits, so a
// bad flag shows its log instead of a time-out.
func waitReady(ctx context.Context, p *process, cs kubernetes.Interface, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("kube-apiserver exited: %s", p.tail())
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-apiserver: %w (log: %s)", err, p.tail())
	}
	return nil
}

func (cp *ControlPlane) installCRDs(ctx context.Context) error {
	crds, err := apis.CRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := cp.Client.Create(ctx, crd.DeepCopy()); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		name := crd.Name
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	// Established comes a moment before discovery serves the resource, and
	// clients resolve kinds through discovery: wait for that too.
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			gv, plural := crd.Spec.Group+"/"+v.Name, crd.Spec.Names.Plural
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				list, err := cp.Kubernetes.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil
				}
				for _, r := range list.APIResources {
					if r.Name == plural {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				return fmt.Errorf("waiting for %s %s in discovery: %w", gv, plural, err)
			}
		}
	}
	return nil
}

// retryPortClash retries start when the port it picked was taken between
// picking and binding: test packages run in parallel and each picks ports
// the same way.
func retryPortClash(start func() error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = start(); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return err
		}
	}
	return err
}

// handedOut holds every port FreePort has returned in this process. The
// kernel may give the same ephemeral port to two listens in a row once the
// first is closed, so two FreePort calls for one controller (its metrics and
// its probe port) could otherwise name the same port, and the second server
// would fail to bind.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback port that was free a moment ago, for a process
// the caller is about to start (a controller's metrics or probe port), and
// never one it returned before in this process.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for attempt := 0; attempt < 100; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a free port: every port offered was handed out before")
}

func waitTCP(p *process, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited: %s", p.name, p.tail())
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen on port %d within %s: %s", p.name, port, timeout, p.tail())
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// KubeconfigFor writes a kubeconfig that authenticates as one of
// Options.Users and returns its path.
func (cp *ControlPlane) KubeconfigFor(user string) (string, error) {
	token, ok := cp.tokens[user]
	if !ok {
		return "", fmt.Errorf("no token for user %q: list it in Options.Users", user)
	}
	path := filepath.Join(cp.Dir, "kubeconfig-"+hex.EncodeToString([]byte(user)))
	if err := writeKubeconfig(path, cp.host, token); err != nil {
		return "", err
	}
	return path, nil
}

func writeKubeconfig(path, host, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
`, host, token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// findBinDir resolves where the tool binaries live and checks the essential
// ones are there, so a missing `make tools` fails with a clear message.
func findBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("KARPENTER_TOOLS_DIR")
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "tools")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control-plane binary %s not found in %s; run `make tools`: %w", b, dir, err)
		}
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod; `go test` runs each package in its own directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "tools")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("module root (go.mod beside hack/tools) not found above the working directory")
		}
		dir = parent
	}
}

// BinDir is where the tool binaries live (dir, else $KARPENTER_TOOLS_DIR,
// else bin/tools at the module root), for callers that run other tools
// from there, such as upstream Karpenter's controllers (test/anchors).
func BinDir(dir string) (string, error) {
	return findBinDir(dir)
}
