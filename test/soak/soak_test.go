package soak_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/test/anchors"
	"github.com/karpenter-go/karpenter/test/controlplane"
	"github.com/karpenter-go/karpenter/test/soak"
)

// ours is our controller binary (the kwokonly build), built once per run.
var ours string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "karpenter-soak-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctrllog.SetLogger(logr.Discard())
	ours = filepath.Join(dir, "controller")
	// The kwok-only build, as upstream's kwok controller is a binary
	// without the AWS provider: the comparison weighs the same program.
	build := exec.Command("go", "build", "-tags", "kwokonly", "-o", ours, "./cmd/controller")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building controller: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// oursWith is our controller with the upstream-kwok catalog (upstream's
// kwok controller's types and prices) and a consolidation algorithm.
func oursWith(algorithm string) soak.Controller {
	return soak.Controller{Name: "ours-" + algorithm, Start: func(cp *controlplane.ControlPlane, kubeconfig string) (int, int, error) {
		ports, err := anchors.FreePorts()
		if err != nil {
			return 0, 0, err
		}
		pid, err := cp.Spawn(ours, "ours-"+algorithm,
			"--kubeconfig="+kubeconfig,
			"--metrics-port="+strconv.Itoa(ports.Metrics),
			"--health-probe-port="+strconv.Itoa(ports.Health),
			"--leader-election-namespace="+leaseNamespace,
			"--enable-profiling",
			"--kwok-catalog=upstream-kwok",
			"--consolidation-algorithm="+algorithm)
		return pid, ports.Metrics, err
	}}
}

// leaseNamespace is where both controllers keep their leader-election
// Lease in the soak.
const leaseNamespace = "kube-system"

// upstreamKWOK is upstream's kwok controller (`make tools`), with leader
// election on as ours runs (and as users run both): its renewals are part
// of what the soak compares. Off a cluster it has no namespace of its own
// to put the Lease in, so it is given ours.
func upstreamKWOK(b anchors.Binaries) soak.Controller {
	return soak.Controller{Name: "upstream-kwok", Start: func(cp *controlplane.ControlPlane, kubeconfig string) (int, int, error) {
		ports, err := anchors.FreePorts()
		if err != nil {
			return 0, 0, err
		}
		pid, err := anchors.StartKWOK(cp, b, "upstream-kwok", ports, "LOG_LEVEL=info", "KUBECONFIG="+kubeconfig,
			"DISABLE_LEADER_ELECTION=false", "LEADER_ELECTION_NAMESPACE="+leaseNamespace)
		return pid, ports.Metrics, err
	}}
}

// TestControllersLeadAlike starts each controller the soak compares as the
// soak starts it and waits for it to hold the leader-election Lease: the
// comparison counts each one's renewals, so both must run with leader
// election on.
func TestControllersLeadAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	up, err := anchors.Find("")
	if err != nil {
		t.Skip(err)
	}
	for _, ctrl := range []soak.Controller{oursWith("upstream"), upstreamKWOK(up)} {
		t.Run(ctrl.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cp, err := controlplane.Start(ctx, controlplane.Options{Users: []controlplane.User{{Name: soak.User, Groups: []string{"system:masters"}}}})
			if err != nil {
				t.Fatal(err)
			}
			defer cp.Stop()
			kubeconfig, err := cp.KubeconfigFor(soak.User)
			if err != nil {
				t.Fatal(err)
			}
			pid, _, err := ctrl.Start(cp, kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			defer cp.Kill(pid)
			var holder string
			for ctx.Err() == nil && holder == "" {
				lease, err := cp.Kubernetes.CoordinationV1().Leases(leaseNamespace).Get(ctx, "karpenter-leader-election", metav1.GetOptions{})
				if err == nil && lease.Spec.HolderIdentity != nil {
					holder = *lease.Spec.HolderIdentity
				}
				time.Sleep(time.Second)
			}
			if holder == "" {
				raw, _ := os.ReadFile(cp.LogPath(ctrl.Name))
				t.Fatalf("%s held no Lease %s/karpenter-leader-election in 2 minutes; log:\n%s", ctrl.Name, leaseNamespace, tail(string(raw), 3000))
			}
		})
	}
}

// TestSoakMinute is the soak in a minute: 200 pods, a minute of churn
// moving every 15 s with a drift halfway, ours with upstream's
// consolidation. It fails on a panic in the controller's log, a leaked
// node (a Node without NodeClaim or a NodeClaim without Node after
// settling), a pod left pending, or RSS growing past a bound.
func TestSoakMinute(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := soak.Run(ctx, soak.Config{
		Nodes: 20, Pods: 200, Duration: time.Minute, Step: 15 * time.Second, Sample: 5 * time.Second,
		BuildTimeout: 3 * time.Minute, SettleTimeout: 3 * time.Minute, Logf: t.Logf,
		ProfileDir: os.Getenv("SOAK_PROFILE"),
	}, oursWith("upstream"))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(table([]*soak.Result{res}))
	// The failures are reported after the controller's log tail so that a
	// CI log cut to its last lines still says what failed.
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	if len(res.Panics) > 0 {
		fail("the controller panicked: %v", res.Panics)
	}
	if res.BuildUp == 0 {
		fail("the build-up did not bind every pod within %s", res.Config.BuildTimeout)
	}
	if len(res.NodesWithoutClaim) > 0 || len(res.ClaimsWithoutNode) > 0 {
		fail("leaked: Nodes without NodeClaim %v, NodeClaims without Node %v", res.NodesWithoutClaim, res.ClaimsWithoutNode)
	}
	if res.ControllerAuditedTotal == 0 {
		fail("the audit log holds no request of the controller")
	}
	if res.PendingAtEnd != 0 {
		fail("%d pods left pending after settling", res.PendingAtEnd)
	}
	// RSS: under 400 MiB at its peak, and the last sample of the churn no
	// more than 1.5x (+32 MiB) the first.
	if res.PeakRSSMiB > 400 {
		fail("peak RSS %.0f MiB > 400 MiB", res.PeakRSSMiB)
	}
	if first, last := churnRSS(res); last > 1.5*first+32 {
		fail("RSS grew from %.0f to %.0f MiB during the churn", first, last)
	}
	if len(failures) > 0 {
		t.Logf("controller log (tail):\n%s", tail(res.ControllerLog, 6000))
		for _, f := range failures {
			t.Error(f)
		}
	}
}

// churnRSS is the RSS of the first sample after the build-up and of the
// last sample.
func churnRSS(res *soak.Result) (first, last float64) {
	if len(res.Samples) == 0 {
		return 0, 0
	}
	first = res.Samples[0].RSSMiB
	for _, s := range res.Samples {
		if s.At >= res.BuildUp {
			first = s.RSSMiB
			break
		}
	}
	return first, res.Samples[len(res.Samples)-1].RSSMiB
}

// BenchmarkSoak soaks ours (both consolidation algorithms) and upstream's
// kwok controller, one after the other, on the same trace and prints the
// table and the ratios ours ÷ upstream. Full size is 1,000 nodes, 10,000
// pods and an hour of churn a controller; the environment scales it:
//
//	SOAK_NODES=100 SOAK_PODS=1000 SOAK_DURATION=10m \
//	  go test ./test/soak -run '^$' -bench Soak -benchtime 1x -timeout 3h
//
// SOAK_STEP (2m), SOAK_SEED, SOAK_CONTROLLERS (ours-upstream,ours-planner,
// upstream-kwok), SOAK_OUT (a folder for each run's samples as CSV and
// its controller log) and SOAK_PROFILE (a folder for each controller's heap
// profile at the end of the churn and CPU profile over it; TestSoakMinute
// reads it too) and
// SOAK_AUDIT (a folder for the audit log with the bodies of the
// controller's NodeClaim and Node patches, <controller>-audit.log) are
// read too.
func BenchmarkSoak(b *testing.B) {
	// Settling waits for the drift to be done: the evictions to the end of
	// settling are then the same work for every controller.
	cfg := soak.Config{Logf: b.Logf, SettleDrift: true}
	cfg.Nodes = envInt(b, "SOAK_NODES", 0)
	cfg.Pods = envInt(b, "SOAK_PODS", 0)
	cfg.Seed = int64(envInt(b, "SOAK_SEED", 0))
	cfg.Duration = envDuration(b, "SOAK_DURATION")
	cfg.Step = envDuration(b, "SOAK_STEP")
	cfg.ProfileDir = os.Getenv("SOAK_PROFILE")
	cfg.AuditDir = os.Getenv("SOAK_AUDIT")
	up, err := anchors.Find("")
	if err != nil {
		b.Fatal(err)
	}
	all := map[string]soak.Controller{
		"ours-upstream": oursWith("upstream"),
		"ours-planner":  oursWith("planner"),
		"upstream-kwok": upstreamKWOK(up),
	}
	names := []string{"ours-upstream", "ours-planner", "upstream-kwok"}
	if v := os.Getenv("SOAK_CONTROLLERS"); v != "" {
		names = strings.Split(v, ",")
	}
	var results []*soak.Result
	for i := 0; i < b.N; i++ {
		for _, name := range names {
			ctrl, ok := all[name]
			if !ok {
				b.Fatalf("unknown controller %q", name)
			}
			full := cfg.Defaults()
			ctx, cancel := context.WithTimeout(context.Background(), full.BuildTimeout+full.Duration+full.SettleTimeout+10*time.Minute)
			res, err := soak.Run(ctx, cfg, ctrl)
			cancel()
			if err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			if dir := os.Getenv("SOAK_OUT"); dir != "" {
				keep(b, dir, res)
			}
			b.Logf("%s: %s", name, soak.Summary(res))
			results = append(results, res)
		}
	}
	b.Log("\n" + table(results))
}

// table prints one column per controller, and ours ÷ upstream when
// upstream ran.
func table(results []*soak.Result) string {
	return soak.Table(results)
}

func keep(b *testing.B, dir string, res *soak.Result) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("keeping samples: %v", err)
		return
	}
	var sb strings.Builder
	sb.WriteString("t_s,rss_mib,cpu_s,pending,oldest_pending_s,nodes,nodeclaims,usd_per_h,controller_req_per_s,api_req_per_s")
	verbs := map[string]bool{}
	for _, s := range res.Samples {
		for v := range s.Requests {
			verbs[v] = true
		}
	}
	var vs []string
	for v := range verbs {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		sb.WriteString(",api_" + strings.ToLower(v) + "_per_s")
	}
	sb.WriteString("\n")
	for _, s := range res.Samples {
		total := 0.0
		for _, v := range s.Requests {
			total += v
		}
		fmt.Fprintf(&sb, "%.0f,%.1f,%.2f,%d,%.0f,%d,%d,%.3f,%.2f,%.2f", s.At.Seconds(), s.RSSMiB, s.CPUSec, s.Pending,
			s.OldestPending.Seconds(), s.Nodes, s.Claims, s.CostPerHour, s.ControllerCallsS, total)
		for _, v := range vs {
			fmt.Fprintf(&sb, ",%.2f", s.Requests[v])
		}
		sb.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(dir, res.Controller+".csv"), []byte(sb.String()), 0o644); err != nil {
		b.Logf("keeping samples: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, res.Controller+".log"), []byte(res.ControllerLog), 0o644); err != nil {
		b.Logf("keeping log: %v", err)
	}
	// The evictions with the pods' nodes, and the churn's wall-clock
	// marks, to be joined with the log's "disrupting node(s)" lines.
	var ev strings.Builder
	ev.WriteString("at,pod,node,pod_created\n")
	for _, mark := range []struct {
		name string
		at   time.Time
	}{{"churn-start", res.ChurnStart}, {"drift", res.DriftAt}, {"churn-end", res.ChurnEnd}} {
		fmt.Fprintf(&ev, "%s,%s,,\n", mark.at.UTC().Format(time.RFC3339Nano), mark.name)
	}
	for _, e := range res.EvictionLog {
		fmt.Fprintf(&ev, "%s,%s,%s,%s\n", e.At.UTC().Format(time.RFC3339Nano), e.Pod, e.Node, e.PodCreated.UTC().Format(time.RFC3339))
	}
	if err := os.WriteFile(filepath.Join(dir, res.Controller+"-events.tsv"), []byte(strings.Join(res.EventMessages, "\n")+"\n"), 0o644); err != nil {
		b.Logf("keeping events: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, res.Controller+"-evictions.csv"), []byte(ev.String()), 0o644); err != nil {
		b.Logf("keeping evictions: %v", err)
	}
}

func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", key, v, err)
	}
	return n
}

func envDuration(b *testing.B, key string) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", key, v, err)
	}
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
