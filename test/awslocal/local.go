package awslocal

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

//go:embed launcher.py
var launcherScript string

// Static credentials and region the front expects. moto checks no
// signatures; the SDK signs with these so the credential scope names the
// service the front routes by.
const (
	AccessKeyID     = "AKIDAWSLOCAL"
	SecretAccessKey = "awslocal-secret"
	DefaultRegion   = "us-east-1"
)

// MissingMotoHint is the part of Start's error that says how to get moto.
const MissingMotoHint = "install moto with: pip install 'moto[server]'"

// Options configure Start. The zero value is usable.
type Options struct {
	// MotoServer is the moto_server executable; empty looks it up on PATH.
	MotoServer string
	// Dir receives moto's log (moto.log) and the image list handed to it;
	// empty uses a temporary directory removed by Stop.
	Dir string
	// KubernetesVersions are the minor versions ("1.33") the public SSM
	// parameters exist for; empty means DefaultKubernetesVersions.
	KubernetesVersions []string
	// StartTimeout bounds the wait for moto to answer; zero means 3m
	// (moto imports slowly on a loaded machine).
	StartTimeout time.Duration
	// Throttle, Consistency and Limits are EC2's request throttling and
	// eventual consistency (both for principals' calls) and the quotas
	// (for every call); each is on unless Disabled.
	Throttle    ThrottleOptions
	Consistency ConsistencyOptions
	Limits      LimitOptions
}

// DefaultKubernetesVersions are the versions public AMI parameters are
// published for when Options.KubernetesVersions is empty.
var DefaultKubernetesVersions = []string{"1.32", "1.33", "1.34", "1.35", "1.36", "1.37"}

// Local is a running local AWS: moto plus the front. Stop ends both.
type Local struct {
	front    *front
	server   *http.Server
	listener net.Listener
	endpoint string
	motoURL  string
	sidecar  string

	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
	log     *os.File
	tmpDir  string

	// stopWarm cancels warm, which fills the front's catalog caches.
	warmMu   sync.Mutex
	stopWarm context.CancelFunc
	warmed   chan struct{}

	stopOnce sync.Once
}

// Start launches moto and the front and returns once both answer.
func Start(ctx context.Context, opts Options) (*Local, error) {
	interp, err := motoInterpreter(opts.MotoServer)
	if err != nil {
		return nil, err
	}
	l := &Local{done: make(chan struct{})}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "awslocal-"); err != nil {
			return nil, fmt.Errorf("creating awslocal directory: %w", err)
		}
		l.tmpDir = dir
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	versions := opts.KubernetesVersions
	if len(versions) == 0 {
		versions = DefaultKubernetesVersions
	}
	catalog := newCatalog(versions)
	images, err := json.Marshal(catalog.motoImages())
	if err != nil {
		return nil, fmt.Errorf("encoding images for moto: %w", err)
	}
	imagesPath := filepath.Join(dir, "images.json")
	scriptPath := filepath.Join(dir, "launcher.py")
	if err := os.WriteFile(imagesPath, images, 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", imagesPath, err)
	}
	if err := os.WriteFile(scriptPath, []byte(launcherScript), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", scriptPath, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	motoPort, sidecarPort := ports[0], ports[1]
	l.motoURL = "http://127.0.0.1:" + strconv.Itoa(motoPort)
	l.sidecar = "http://127.0.0.1:" + strconv.Itoa(sidecarPort)

	l.logPath = filepath.Join(dir, "moto.log")
	if l.log, err = os.Create(l.logPath); err != nil {
		return nil, fmt.Errorf("creating moto log: %w", err)
	}
	l.cmd = exec.Command(interp, scriptPath, imagesPath, strconv.Itoa(sidecarPort), strconv.Itoa(motoPort))
	l.cmd.Stdout, l.cmd.Stderr = l.log, l.log
	l.cmd.Dir = dir
	// Never let moto's own environment pick up a real account or region.
	l.cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+AccessKeyID, "AWS_SECRET_ACCESS_KEY="+SecretAccessKey,
		"AWS_DEFAULT_REGION="+DefaultRegion, "PYTHONUNBUFFERED=1")
	// The kernel kills moto when this process dies, however it dies, so a
	// crashed or timed-out test leaves no emulator behind.
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := l.cmd.Start(); err != nil {
		l.log.Close()
		return nil, fmt.Errorf("starting moto (%s): %w; %s", interp, err, MissingMotoHint)
	}
	go func() {
		_ = l.cmd.Wait()
		close(l.done)
	}()

	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	if err := l.waitReady(ctx, timeout); err != nil {
		l.Stop()
		return nil, err
	}

	l.front, err = newFront(l.motoURL, l.sidecar, catalog, opts)
	if err != nil {
		l.Stop()
		return nil, err
	}
	if l.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		l.Stop()
		return nil, fmt.Errorf("listening for the awslocal front: %w", err)
	}
	l.endpoint = "http://" + l.listener.Addr().String()
	l.server = &http.Server{Handler: l.front, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.server.Serve(l.listener) }()
	return l, nil
}

// warm (once, from SeedCluster: a cluster that will launch) fills, in the
// background, what the front's first CreateFleet would
// otherwise ask moto for while every other launch waits behind it: moto's
// instance types and the default region's zones and offerings, seconds of
// Python on a loaded machine. A launch that comes first waits for the same
// load (the caches load once) rather than starting another.
func (l *Local) warm() {
	l.warmMu.Lock()
	defer l.warmMu.Unlock()
	if l.warmed != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stopWarm, l.warmed = cancel, make(chan struct{})
	go func() {
		defer close(l.warmed)
		_, _ = l.front.instanceTypes(ctx)
		_, _ = l.front.regionZones(ctx, DefaultRegion)
		_, _ = l.front.offeredIn(ctx, DefaultRegion, "", "")
	}()
}

// motoInterpreter finds the Python that runs moto_server, because the front
// starts moto through its own launcher (launcher.py) in that interpreter.
func motoInterpreter(motoServer string) (string, error) {
	path := motoServer
	if path == "" {
		var err error
		if path, err = exec.LookPath("moto_server"); err != nil {
			return "", fmt.Errorf("moto_server (the moto AWS emulator) is not on PATH; %s", MissingMotoHint)
		}
	}
	interp, err := shebang(path)
	if err != nil {
		return "", fmt.Errorf("reading moto_server %s: %w; %s", path, err, MissingMotoHint)
	}
	if strings.Contains(interp, "python") {
		return interp, nil
	}
	// A pyenv shim is a shell script; ask pyenv for the real entry point.
	if out, err := exec.Command("pyenv", "which", "moto_server").Output(); err == nil {
		real := strings.TrimSpace(string(out))
		if interp, err := shebang(real); err == nil && strings.Contains(interp, "python") {
			return interp, nil
		}
	}
	return "", fmt.Errorf("cannot tell which Python runs moto_server %s; %s", path, MissingMotoHint)
}

func shebang(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	if !strings.HasPrefix(line, "#!") {
		return "", errors.New("not a script")
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return "", errors.New("empty interpreter line")
	}
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 {
		return exec.LookPath(fields[1])
	}
	return fields[0], nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (l *Local) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for _, url := range []string{l.motoURL + "/moto-api/", l.sidecar + "/"} {
		for {
			select {
			case <-l.done:
				return fmt.Errorf("moto exited while starting (is moto installed? %s):\n%s", MissingMotoHint, l.LogTail())
			case <-ctx.Done():
				return fmt.Errorf("waiting for moto: %w", ctx.Err())
			default:
			}
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("moto did not answer on %s within %s:\n%s", url, timeout, l.LogTail())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// Endpoint is the front's URL, for BaseEndpoint or AWS_ENDPOINT_URL.
func (l *Local) Endpoint() string { return l.endpoint }

// MotoEndpoint is moto's own URL, for tests that must bypass the front.
func (l *Local) MotoEndpoint() string { return l.motoURL }

// MotoPID is moto's process id, to prove it is gone after Stop.
func (l *Local) MotoPID() int { return l.cmd.Process.Pid }

// Config is an SDK configuration for region us-east-1 pointed at the front,
// with the static credentials. It reads nothing from the environment or
// ~/.aws, so a developer's real account can never be reached.
func (l *Local) Config(ctx context.Context) aws.Config {
	return l.ConfigFor(ctx, DefaultRegion)
}

// ConfigFor is Config for another region.
func (l *Local) ConfigFor(_ context.Context, region string) aws.Config {
	return aws.Config{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(l.endpoint),
	}
}

// Env is the environment a child process (the controller under `make run`)
// needs to reach the front through the SDK's default configuration.
func (l *Local) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + l.endpoint,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_REGION=" + DefaultRegion,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// LogTail is the end of moto's log, for error messages.
func (l *Local) LogTail() string {
	b, err := os.ReadFile(l.logPath)
	if err != nil {
		return ""
	}
	const max = 3000
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Stop shuts the front down and kills moto. It is safe to call twice.
func (l *Local) Stop() {
	l.stopOnce.Do(func() {
		l.warmMu.Lock()
		if l.stopWarm != nil {
			l.stopWarm()
			<-l.warmed
		}
		l.warmMu.Unlock()
		if l.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = l.server.Shutdown(ctx)
			cancel()
		}
		if l.cmd != nil && l.cmd.Process != nil {
			_ = l.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-l.done:
			case <-time.After(3 * time.Second):
				_ = l.cmd.Process.Kill()
				<-l.done
			}
		}
		if l.log != nil {
			l.log.Close()
		}
		if l.tmpDir != "" {
			_ = os.RemoveAll(l.tmpDir)
		}
	})
}
