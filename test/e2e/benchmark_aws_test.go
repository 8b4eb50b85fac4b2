package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// benchAWSPool is the AWS benchmark's NodePool: c, m and r families of
// generation 5 and later, linux/amd64, on the examples' EC2NodeClass, with
// the kwok benchmark's disruption settings.
const benchAWSPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: bench
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: kubernetes.io/os, operator: In, values: ["linux"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets:
      - nodes: "100%"
`

// BenchmarkProvisioningAWS1000 is BenchmarkProvisioning1000 on the AWS
// provider: the controller binary with --cloud-provider=aws against the
// local AWS (moto behind our front), the examples' EC2NodeClass, and the
// instances CreateFleet launches booted into Nodes from their user data.
// Besides the kwok benchmark's figures it reports the CreateFleet and
// CreateTags calls (batching) and prices each NodeClaim at the local AWS's
// on-demand or spot price. Our controller on kwok runs the same burst
// first, on a control plane of its own, so the AWS figures print beside it
// (first NodeClaim, bound, the ratio), and upstream Karpenter's own AWS
// controller (test/anchors) runs it on the local AWS too, so ours prints
// beside upstream's on the same provider (bound ratio, $/h, CreateFleet
// calls, RSS). After the run the controller is
// restarted and a 200-pod burst timed (restartBurst), then an ARC zonal
// shift takes the busiest zone away (zonalShiftPhase): the next round and
// consolidation launch nothing there, and once it is cancelled the zone is
// used again. It runs only with -bench, e.g.
//
//	go test ./test/e2e -run '^$' -bench ProvisioningAWS1000 -benchtime 1x -timeout 50m
//
// While iterating, BENCH_SKIP_UPSTREAM=1 leaves upstream's run out and
// BENCH_AWS_BURST_ONLY=1 ends the benchmark after the burst's figures.
func BenchmarkProvisioningAWS1000(b *testing.B) {
	// Our controller on the simulated provider first, on a control plane
	// of its own that is gone before the AWS run starts: the bound-time
	// target is a ratio to it, measured on the same machine at the same
	// load.
	kwokRes := kwokProvisioning(b, "kwok")
	// Upstream's AWS controller on the same burst, also on a control
	// plane and local AWS of its own, when `make tools` built it.
	upRes, upRan := upstreamAWSProvisioning(b)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, Scheduler: true, Kwok: true, APIQPS: 200, APIBurst: 300,
	})
	if err != nil {
		b.Fatalf("starting control plane: %v", err)
	}
	b.Cleanup(cp.Stop)
	local, err := awslocal.Start(ctx, awsOptions(b.TempDir()))
	if err != nil {
		b.Fatalf("starting the local AWS: %v", err)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("moto log (tail):\n%s", local.LogTail())
		}
		local.Stop()
	})
	// Three /20 subnets (4,091 addresses each) hold far more instances
	// than the benchmark launches.
	if _, err := local.SeedCluster(ctx, awslocal.ClusterOptions{Name: awsClusterName, ServiceCIDR: "10.0.0.0/24"}); err != nil {
		b.Fatalf("seeding the local AWS: %v", err)
	}
	// The cluster is registered with ARC zonal shift and the controller
	// runs with ENABLE_ZONAL_SHIFT, for the shift that follows the run.
	arn, err := local.EnableZonalShift(ctx, awsClusterName, false)
	if err != nil {
		b.Fatalf("registering the cluster with ARC: %v", err)
	}
	booter := local.Boot(context.Background(), cp.Client, awslocal.BootOptions{ClusterName: awsClusterName})
	b.Cleanup(booter.Stop)
	class, err := os.ReadFile(filepath.Join("../../examples", "00-ec2nodeclass.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if err := controlplane.Apply(ctx, cp.Client, append(append(class, "\n---\n"...), benchAWSPool...)); err != nil {
		b.Fatalf("applying the EC2NodeClass and NodePool: %v", err)
	}
	// The controller runs as its IAM principal under upstream's policy
	// (the shipped one in its shadow), throttled at EC2's figures.
	e := &awsEnv{cp: cp, local: local, policy: underUpstream}
	env := append(local.EnvWith(e.controllerCredentials(b)), "CLUSTER_NAME="+awsClusterName, "CLUSTER_ENDPOINT="+cp.Config.Host, "ENABLE_ZONAL_SHIFT=true")
	metricsPort := map[string]int{}
	spawn := func(name string) (int, error) {
		metricsPort[name] = freePort(b)
		return cp.SpawnEnv(controllerBin, name, env,
			"--cloud-provider=aws",
			"--kubeconfig="+cp.KubeconfigPath,
			"--metrics-port="+strconv.Itoa(metricsPort[name]), "--health-probe-port="+strconv.Itoa(freePort(b)),
			"--leader-election-namespace=kube-system")
	}
	pid, err := spawn("controller")
	if err != nil {
		b.Fatalf("starting controller: %v", err)
	}

	calls := func() map[string]int { return local.CallsBy(controllerPrincipal) }
	var before map[string]int
	res := provisioningBench{
		cp: cp, pid: pid, pool: "bench", timeout: 20 * time.Minute,
		beforeStart: func() { before = calls() },
		price:       localAWSPrice(local),
	}.run(b, ctx)
	after := calls()
	fleets := after["ec2:CreateFleet"] - before["ec2:CreateFleet"]
	b.ReportMetric(float64(fleets), "createfleet-calls")
	b.ReportMetric(float64(after["ec2:CreateTags"]-before["ec2:CreateTags"]), "createtags-calls")
	b.Logf("1000 pods on AWS: bound in %.1fs, Running in %.1fs; %d NodeClaims through %d CreateFleet call(s) in %d round(s) %v; $%.2f/h; controller peak RSS %.0f MiB, CPU %.1fs",
		res.bound.Seconds(), res.running.Seconds(), len(res.claims), fleets, res.rounds, res.types, res.cost, res.peakMiB, res.cpuSeconds)

	// One instance per NodeClaim: none leaked, none launched twice.
	byID := map[string]string{}
	for _, nc := range res.claims {
		_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
		if !ok {
			b.Fatalf("NodeClaim %s has providerID %q", nc.Name, nc.Status.ProviderID)
		}
		if other, dup := byID[id]; dup {
			b.Fatalf("instance %s belongs to NodeClaims %s and %s", id, other, nc.Name)
		}
		byID[id] = nc.Name
	}
	e.ec2 = ec2.NewFromConfig(local.Config(ctx))
	live := clusterInstances(b, ctx, e)
	for id := range live {
		if _, ok := byID[id]; !ok {
			b.Fatalf("instance %s belongs to no NodeClaim (leaked)", id)
		}
	}
	if len(live) != len(byID) {
		b.Fatalf("%d live instances for %d NodeClaims", len(live), len(byID))
	}
	launched := len(byID)
	b.Logf("EC2 calls per launched node during the scale-up (%d nodes): %s", launched, perNode(before, after, launched))
	b.Logf("throttled: %s", local.ThrottleSummary())
	// How much of NodeClaim creation to Launched is the local AWS
	// answering CreateFleet, from the controller's own SDK metrics.
	if n, sum, err := sdkCallSeconds(metricsPort["controller"], "EC2", "CreateFleet"); err != nil {
		b.Logf("reading the controller's CreateFleet durations: %v", err)
	} else if n > 0 {
		b.Logf("CreateFleet on the local AWS: %d call(s), %.1fs on average", n, sum/float64(n))
		b.ReportMetric(sum/float64(n), "s-createfleet-mean")
	}
	// Requeues and errors are retries: a Node write refused (a taint
	// changed since the read) waits out the rate limiter.
	if results, err := reconcileResults(metricsPort["controller"], "nodeclaim.lifecycle"); err != nil {
		b.Logf("reading the lifecycle controller's reconciles: %v", err)
	} else {
		b.Logf("lifecycle reconciles by result: %v", results)
	}
	ratio := res.bound.Seconds() / kwokRes.bound.Seconds()
	b.ReportMetric(ratio, "bound-ratio-aws/kwok")
	b.ReportMetric(kwokRes.bound.Seconds(), "kwok-s-bound")
	b.ReportMetric(kwokRes.running.Seconds(), "kwok-s-running")
	b.ReportMetric(kwokRes.firstClaimAt.Seconds(), "kwok-s-first-nodeclaim")
	b.Logf("ours on AWS vs ours on kwok (same run): first NodeClaim %.1fs vs %.1fs, bound %.1fs vs %.1fs (%.2f×), Running %.1fs vs %.1fs",
		res.firstClaimAt.Seconds(), kwokRes.firstClaimAt.Seconds(), res.bound.Seconds(), kwokRes.bound.Seconds(), ratio,
		res.running.Seconds(), kwokRes.running.Seconds())

	if upRan {
		upRatio := res.bound.Seconds() / upRes.bound.Seconds()
		b.ReportMetric(upRatio, "bound-ratio-ours/upstream-aws")
		b.ReportMetric(upRes.bound.Seconds(), "upstream-aws-s-bound")
		b.ReportMetric(upRes.running.Seconds(), "upstream-aws-s-running")
		b.ReportMetric(upRes.firstClaimAt.Seconds(), "upstream-aws-s-first-nodeclaim")
		b.ReportMetric(upRes.cost, "upstream-aws-$/h")
		b.ReportMetric(float64(upRes.calls["ec2:CreateFleet"]), "upstream-aws-createfleet-calls")
		b.Logf("ours vs upstream's AWS controller on the local AWS (same run): first NodeClaim %.1fs vs %.1fs, bound %.1fs vs %.1fs (%.2f×), Running %.1fs vs %.1fs, %d vs %d NodeClaims, $%.2f/h vs $%.2f/h, %d vs %d CreateFleet calls, peak RSS %.0f vs %.0f MiB",
			res.firstClaimAt.Seconds(), upRes.firstClaimAt.Seconds(), res.bound.Seconds(), upRes.bound.Seconds(), upRatio,
			res.running.Seconds(), upRes.running.Seconds(), len(res.claims), len(upRes.claims), res.cost, upRes.cost,
			fleets, upRes.calls["ec2:CreateFleet"], res.peakMiB, upRes.peakMiB)
	}

	// BENCH_AWS_BURST_ONLY=1 ends the run here, for iterating on the
	// burst.
	if os.Getenv("BENCH_AWS_BURST_ONLY") != "" {
		return
	}

	// A restart, as a rolling update does it, then a burst the running
	// nodes cannot hold: the new controller's first round must not wait
	// for instance types either.
	restartBurst(b, ctx, cp, pid, spawn)
	zonalShiftPhase(b, ctx, cp, local, arn)

	// Scale to zero: every instance goes, with at most one
	// TerminateInstances per node removed.
	removed := len(clusterInstances(b, ctx, e))
	before = calls()
	if err := cp.Client.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(benchNamespace)); err != nil {
		b.Fatalf("deleting the Deployments: %v", err)
	}
	// The pods go before the NodeClaims: a node drained while its
	// ReplicaSet still exists would have its pods recreated and launch
	// nodes into the count of the scale-in.
	if !waitFor(ctx, 5*time.Minute, func() bool {
		var pods corev1.PodList
		return cp.Client.List(ctx, &pods, client.InNamespace(benchNamespace)) == nil && len(pods.Items) == 0
	}) {
		b.Fatal("the benchmark's pods were not gone 5m after their Deployments were deleted")
	}
	if err := cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}); err != nil {
		b.Fatalf("deleting the NodeClaims: %v", err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for len(clusterInstances(b, ctx, e)) > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d instances still live 10m after the NodeClaims were deleted", len(clusterInstances(b, ctx, e)))
		}
		time.Sleep(2 * time.Second)
	}
	after = calls()
	b.Logf("EC2 calls per removed node during the scale-in (%d nodes): %s", removed, perNode(before, after, removed))
	b.ReportMetric(float64(after["ec2:TerminateInstances"]-before["ec2:TerminateInstances"])/float64(max(removed, 1)), "terminate-calls/node")
}

// perNode is the calls made between two CallsBy readings per node, by API,
// largest first.
func perNode(before, after map[string]int, nodes int) string {
	type kv struct {
		api string
		n   int
	}
	var list []kv
	for api, n := range after {
		if d := n - before[api]; d > 0 {
			list = append(list, kv{api, d})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].n > list[j].n || list[i].n == list[j].n && list[i].api < list[j].api
	})
	parts := make([]string, len(list))
	for i, e := range list {
		parts[i] = fmt.Sprintf("%s %d (%.2f/node)", e.api, e.n, float64(e.n)/float64(max(nodes, 1)))
	}
	return strings.Join(parts, ", ")
}

// restartBurst stops the controller pid as a rolling update does (SIGTERM,
// so it releases the lease), starts another with spawn, and once that one
// leads applies a Deployment of 200 pods of 3500m/28Gi, more than the
// running nodes hold. It reports when the new controller led (from its
// start), and when the first new NodeClaim appeared and all 200 pods were
// bound (from the Deployment's creation).
func restartBurst(b *testing.B, ctx context.Context, cp *controlplane.ControlPlane, pid int, spawn func(name string) (int, error)) {
	b.Helper()
	const replicas, name = 200, "controller-restarted"
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		b.Fatalf("stopping the controller: %v", err)
	}
	if !waitFor(ctx, time.Minute, func() bool { return syscall.Kill(pid, 0) != nil }) {
		b.Fatalf("the controller (pid %d) did not stop within a minute of SIGTERM", pid)
	}
	restarted := time.Now()
	if _, err := spawn(name); err != nil {
		b.Fatalf("restarting the controller: %v", err)
	}
	newLog := func() string {
		raw, _ := os.ReadFile(cp.LogPath(name))
		return string(raw)
	}
	b.Cleanup(func() {
		if dst := os.Getenv("BENCH_CONTROLLER_LOG"); dst != "" {
			if err := os.WriteFile(dst+".restarted", []byte(newLog()), 0o644); err != nil {
				b.Logf("keeping the restarted controller's log: %v", err)
			}
		}
	})
	if !waitFor(ctx, 2*time.Minute, func() bool {
		l := newLog()
		return logHas(l, "Successfully acquired lease") && logHas(l, "Starting workers")
	}) {
		b.Fatalf("the restarted controller did not lead:\n%s", tail(newLog(), 4000))
	}
	led := time.Since(restarted)
	loaded := ""
	for _, line := range strings.Split(newLog(), "\n") {
		if strings.Contains(line, `"message":"loaded instance types and offerings"`) {
			loaded = line
		}
	}
	b.Logf("restarted controller led %.1fs after its start; %s", led.Seconds(), loaded)

	var existing v1.NodeClaimList
	if err := cp.Client.List(ctx, &existing); err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, nc := range existing.Items {
		names = append(names, nc.Name)
	}
	claims := newClaimProgress(names)
	stop := make(chan struct{})
	defer close(stop)
	pollClaims(ctx, cp, claims, stop)
	start := time.Now()
	claims.mu.Lock()
	claims.start = start
	claims.mu.Unlock()
	if err := controlplane.Apply(ctx, cp.Client, []byte(benchDeployment("bench-restart", "3500m", "28Gi", replicas))); err != nil {
		b.Fatalf("applying the post-restart Deployment: %v", err)
	}
	// When all 200 pods exist (listed every 100ms): the first round should
	// follow within the provisioning window.
	podsAt := make(chan time.Duration, 1)
	go func() {
		for ctx.Err() == nil {
			var pods corev1.PodList
			if cp.Client.List(ctx, &pods, client.InNamespace(benchNamespace), client.MatchingLabels{"app": "bench-restart"}) == nil && len(pods.Items) >= replicas {
				podsAt <- time.Since(start)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	var bound time.Duration
	if !waitFor(ctx, 10*time.Minute, func() bool {
		var pods corev1.PodList
		if err := cp.Client.List(ctx, &pods, client.InNamespace(benchNamespace), client.MatchingLabels{"app": "bench-restart"}); err != nil {
			return false
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n >= replicas
	}) {
		b.Fatalf("the %d pods applied after the restart were not all bound within 10m", replicas)
	}
	bound = time.Since(start)
	first, delays := claims.result()
	allPods := <-podsAt
	b.ReportMetric(first.Seconds(), "s-first-nodeclaim-after-restart")
	b.ReportMetric((first - allPods).Seconds(), "s-first-nodeclaim-after-pods-after-restart")
	b.ReportMetric(bound.Seconds(), "s-bound-after-restart")
	b.ReportMetric(led.Seconds(), "s-lead-after-restart")
	b.Logf("after the restart: all %d pods existed %.1fs after the Deployment, first NodeClaim %.1fs after it (%.1fs after the pods), bound in %.1fs; NodeClaim creation to Launched: %v",
		replicas, allPods.Seconds(), first.Seconds(), (first - allPods).Seconds(), bound.Seconds(), roundDurations(delays))
}

// sdkCallSeconds reads the controller's aws_sdk_go_request_duration_seconds
// for one service and action: how many calls answered 200 and their total
// seconds.
func sdkCallSeconds(port int, service, action string) (int, float64, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("scraping the controller's metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	labels := `{action="` + action + `",code="200",service="` + service + `"}`
	var n int
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "aws_sdk_go_request_duration_seconds_sum"+labels+" "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "aws_sdk_go_request_duration_seconds_count"+labels+" "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	return n, sum, nil
}

// reconcileResults reads the controller's controller_runtime_reconcile_total
// for one controller: the reconciles by result (success, requeue,
// requeue_after, error).
func reconcileResults(port int, controller string) (map[string]int, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping the controller's metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	out := map[string]int{}
	prefix := `controller_runtime_reconcile_total{controller="` + controller + `",result="`
	for _, line := range strings.Split(string(raw), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		result, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		n, _ := strconv.ParseFloat(value, 64)
		out[result] = int(n)
	}
	return out, nil
}
