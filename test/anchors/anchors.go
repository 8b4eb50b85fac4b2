// Package anchors finds and starts upstream Karpenter's own controllers,
// which `make tools` builds from hack/anchors at pinned versions: the kwok
// controller of sigs.k8s.io/karpenter and the AWS controller of
// github.com/aws/karpenter-provider-aws. Tests run them beside ours as
// reference points (migration both ways, side-by-side benchmarks); the
// product never links them.
package anchors

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// Binary names in the tools folder (see hack/tools/build.sh).
const (
	KWOKBinary = "karpenter-upstream-kwok"
	AWSBinary  = "karpenter-upstream-aws"
)

// Binaries are the paths of the upstream controllers.
type Binaries struct {
	KWOK string
	AWS  string
}

// Find returns the upstream controllers in binDir (empty: the tools folder
// controlplane.BinDir resolves), or an error naming `make tools` when one
// is missing.
func Find(binDir string) (Binaries, error) {
	dir, err := controlplane.BinDir(binDir)
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{KWOK: filepath.Join(dir, KWOKBinary), AWS: filepath.Join(dir, AWSBinary)}
	for _, p := range []string{b.KWOK, b.AWS} {
		if _, err := os.Stat(p); err != nil {
			return Binaries{}, fmt.Errorf("upstream controller %s not found; run `make tools`: %w", p, err)
		}
	}
	return b, nil
}

// Ports are where a started controller serves /metrics and its probes.
type Ports struct {
	Metrics int
	Health  int
}

// Env is the environment upstream's operator reads its settings from (it
// takes no --kubeconfig flag): the control plane's kubeconfig, the ports,
// leader election off (one replica; no lease to wait for after a switch),
// plus extra (KEY=VALUE), which wins over these.
func Env(cp *controlplane.ControlPlane, ports Ports, extra ...string) []string {
	env := []string{
		"KUBECONFIG=" + cp.KubeconfigPath,
		"METRICS_PORT=" + strconv.Itoa(ports.Metrics),
		"HEALTH_PROBE_PORT=" + strconv.Itoa(ports.Health),
		"DISABLE_LEADER_ELECTION=true",
		"LOG_LEVEL=debug",
	}
	return append(env, extra...)
}

// FreePorts picks free ports for one controller.
func FreePorts() (Ports, error) {
	m, err := controlplane.FreePort()
	if err != nil {
		return Ports{}, err
	}
	h, err := controlplane.FreePort()
	if err != nil {
		return Ports{}, err
	}
	return Ports{Metrics: m, Health: h}, nil
}

// StartKWOK runs upstream's kwok controller against cp under name (its log
// is cp.LogPath(name)); cp must run kwok, which makes the Nodes the
// controller creates Ready. Stop it with cp.Kill(pid).
func StartKWOK(cp *controlplane.ControlPlane, b Binaries, name string, ports Ports, extra ...string) (int, error) {
	return cp.SpawnEnv(b.KWOK, name, Env(cp, ports, extra...))
}

// StartAWS runs upstream's AWS controller against cp. extra must point it
// at an AWS (AWS_ENDPOINT_URL, AWS_REGION, credentials; the local AWS of
// test/awslocal) and a cluster: CLUSTER_NAME, CLUSTER_ENDPOINT and,
// optionally, INTERRUPTION_QUEUE, as the upstream chart's values would.
func StartAWS(cp *controlplane.ControlPlane, b Binaries, name string, ports Ports, extra ...string) (int, error) {
	return cp.SpawnEnv(b.AWS, name, Env(cp, ports, extra...))
}
