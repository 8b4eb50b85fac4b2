package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cli"
	"github.com/karpenter-go/karpenter/pkg/disruption/benchmark"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// consolidationBenchPool is the pool of issue 9's end-to-end benchmark:
// on-demand only, optionally capped below 32 vCPU (in the upstream-kwok
// catalog the instance-size label is the vCPU count, so Lt 32 leaves at
// most 16 vCPU), consolidating at once with a 100% budget.
func consolidationBenchPool(capped bool) string {
	opts := []poolOpt{
		requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
		requirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, v1.CapacityTypeOnDemand),
	}
	if capped {
		opts = append(opts, requirement("karpenter.kwok.sh/instance-size", corev1.NodeSelectorOpLt, "32"))
	}
	opts = append(opts, consolidation(v1.ConsolidationPolicyWhenEmptyOrUnderutilized, "0s"), budgets(nodesBudget("100%", "", 0)))
	return manifest(defaultKWOKNodeClass(), kwokPool("bench", opts...))
}

// consolidationWatch follows the benchmark's pods after the scale-in: the
// pods the ReplicaSets create then replace evicted ones (a scale-in only
// deletes), and those that were ever Unschedulable needed a fresh node.
type consolidationWatch struct {
	mu            sync.Mutex
	since         time.Time
	created       map[string]bool
	unschedulable map[string]bool
}

func (w *consolidationWatch) observe(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels["bench"] != "provisioning" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() || pod.CreationTimestamp.Time.Before(w.since.Truncate(time.Second)) {
		return
	}
	w.created[pod.Name] = true
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			w.unschedulable[pod.Name] = true
		}
	}
}

// fleetPrice sums the NodeClaims' prices ($/h) the way
// BenchmarkProvisioning1000 does, and counts them by type.
func fleetPrice(ctx context.Context, c client.Client) (float64, int, map[string]int, error) {
	var claims v1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return 0, 0, nil, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return 0, 0, nil, err
	}
	price := map[string]float64{}
	for _, n := range nodes.Items {
		price[n.Spec.ProviderID], _ = strconv.ParseFloat(n.Labels[kwokv1alpha1.NodeViewerPriceLabelKey], 64)
	}
	cost := 0.0
	types := map[string]int{}
	for _, nc := range claims.Items {
		p, ok := price[nc.Status.ProviderID]
		if !ok {
			p, _ = strconv.ParseFloat(nc.Labels[kwokv1alpha1.NodeViewerPriceLabelKey], 64)
		}
		cost += p
		types[nc.Labels[corev1.LabelInstanceTypeStable]]++
	}
	return cost, len(claims.Items), types, nil
}

// BenchmarkConsolidation1000 is issue 9's end-to-end consolidation
// benchmark: the 1,000-pod scale-up of BenchmarkProvisioning1000 on an
// on-demand pool (capped at 16 vCPU, and without a cap), then
// small-resource-app scaled from 500 to 200, for both consolidation
// algorithms. It reports the time of the last node-count change (the
// fleet counts as converged after 60 s without one), disruption commands,
// evictions, evicted pods that needed a fresh node, $/h before and after,
// and the controller's CPU seconds and peak RSS. Run one variant at a
// time, e.g.
//
//	go test ./test/e2e -run '^$' -bench 'Consolidation1000/planner/cap16' -benchtime 1x -timeout 30m
func BenchmarkConsolidation1000(b *testing.B) {
	for _, algo := range []string{"upstream", "planner"} {
		for _, capped := range []bool{true, false} {
			name := algo + "/nocap"
			if capped {
				name = algo + "/cap16"
			}
			b.Run(name, func(b *testing.B) { benchConsolidation(b, algo, capped) })
		}
	}
}

func benchConsolidation(b *testing.B, algo string, capped bool) {
	const replicas = 500
	const quiet = 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, Scheduler: true, Kwok: true, APIQPS: 200, APIBurst: 300,
	})
	if err != nil {
		b.Fatalf("starting control plane: %v", err)
	}
	b.Cleanup(cp.Stop)
	if err := controlplane.Apply(ctx, cp.Client, []byte(consolidationBenchPool(capped))); err != nil {
		b.Fatalf("applying pool: %v", err)
	}
	metricsPort := freePort(b)
	args := []string{"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-port=" + strconv.Itoa(metricsPort), "--health-probe-port=" + strconv.Itoa(freePort(b)),
		"--leader-election-namespace=kube-system",
		"--consolidation-algorithm=" + algo,
		"--" + kwok.FlagCatalog + "=" + kwok.CatalogUpstreamKWOK}
	// BENCH_LOG_LEVEL=debug adds each disruption pass's verdicts by kind
	// to the controller log (BENCH_CONTROLLER_LOG).
	if lvl := os.Getenv("BENCH_LOG_LEVEL"); lvl != "" {
		args = append(args, "--log-level="+lvl)
	}
	pid, err := cp.Spawn(controllerBin, "controller", args...)
	if err != nil {
		b.Fatalf("starting controller: %v", err)
	}
	controllerLog := func() string {
		raw, _ := os.ReadFile(cp.LogPath("controller"))
		return string(raw)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("controller log (tail):\n%s", tail(controllerLog(), 6000))
		}
		if dst := os.Getenv("BENCH_CONTROLLER_LOG"); dst != "" {
			_ = os.WriteFile(dst, []byte(controllerLog()), 0o644)
		}
	})
	if !waitFor(ctx, 90*time.Second, func() bool {
		l := controllerLog()
		return logHas(l, "Successfully acquired lease") && logHas(l, "Starting workers")
	}) {
		b.Fatal("the controller did not become leader")
	}
	if !waitFor(ctx, 60*time.Second, func() bool {
		np := &v1.NodePool{}
		return cp.Client.Get(ctx, client.ObjectKey{Name: "bench"}, np) == nil && np.IsReady()
	}) {
		b.Fatal("the NodePool did not become Ready")
	}

	progress := &podProgress{want: 2 * replicas, seen: map[string]bool{}, bound: map[string]bool{}, running: map[string]bool{}, done: make(chan struct{})}
	watch := &consolidationWatch{created: map[string]bool{}, unschedulable: map[string]bool{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Kubernetes, 0, informers.WithNamespace(benchNamespace))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { progress.observe(obj); watch.observe(obj) },
		UpdateFunc: func(_, obj interface{}) { progress.observe(obj); watch.observe(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	defer factory.Shutdown()
	defer close(stop)

	progress.start = time.Now()
	workload := benchDeployment("small-resource-app", "900m", "3100Mi", replicas) + "---\n" + benchDeployment("large-resource-app", "3500m", "28Gi", replicas)
	if err := controlplane.Apply(ctx, cp.Client, []byte(workload)); err != nil {
		b.Fatalf("applying deployments: %v", err)
	}
	select {
	case <-progress.done:
	case <-time.After(5 * time.Minute):
		progress.mu.Lock()
		b.Fatalf("after 5m: %d/%d pods bound, %d running", len(progress.bound), progress.want, len(progress.running))
	}
	before, nodesBefore, typesBefore, err := fleetPrice(ctx, cp.Client)
	if err != nil {
		b.Fatal(err)
	}
	decisions := func() float64 {
		samples, err := scrapeMetrics(ctx, metricsPort)
		if err != nil {
			b.Logf("scraping metrics: %v", err)
			return 0
		}
		return metricSum(samples, "karpenter_voluntary_disruption_decisions_total", nil)
	}
	decisionsBefore := decisions()
	bound, err := benchmark.LargePodFloor(replicas, capped)
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore, _ := controlplane.ProcessCPUSeconds(pid)

	b.ResetTimer()
	start := time.Now()
	watch.mu.Lock()
	watch.since = start
	watch.mu.Unlock()
	if err := scaleTo(ctx, cp.Client, "small-resource-app", 200); err != nil {
		b.Fatal(err)
	}
	// The fleet as consolidation finds it: every removed pod gone.
	if waitFor(ctx, 60*time.Second, func() bool {
		var pods corev1.PodList
		return cp.Client.List(ctx, &pods, client.InNamespace(benchNamespace)) == nil && len(pods.Items) == replicas+200
	}) {
		if c, err := composition(ctx, cp.Client); err == nil {
			b.Logf("nodes by pods after the scale-in: %s", c)
		}
	}
	// Converged: the NodeClaim count unchanged for quiet (the last change
	// is what is reported), with nothing deleting.
	last, lastChange := nodesBefore, time.Duration(0)
	deadline := start.Add(15 * time.Minute)
	// BENCH_SNAPSHOT_DIR keeps the cluster as `karpenter snapshot` writes
	// it every few seconds, for `karpenter --snapshot FILE why node` or an
	// offline replay of the planner's passes.
	snapDir, snaps := os.Getenv("BENCH_SNAPSHOT_DIR"), 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Second)
		if snapDir != "" && time.Since(start) >= time.Duration(snaps)*3*time.Second {
			saveSnapshot(ctx, b, cp.Client, filepath.Join(snapDir, fmt.Sprintf("snap-%03d.json", int(time.Since(start).Seconds()))))
			snaps++
		}
		var claims v1.NodeClaimList
		if err := cp.Client.List(ctx, &claims); err != nil {
			continue
		}
		deleting := 0
		for _, nc := range claims.Items {
			if !nc.DeletionTimestamp.IsZero() {
				deleting++
			}
		}
		if n := len(claims.Items); n != last {
			last, lastChange = n, time.Since(start)
		}
		if deleting == 0 && time.Since(start)-lastChange >= quiet {
			break
		}
	}
	b.StopTimer()

	peakMiB, err := controlplane.ProcessMemoryMiB(pid, "VmHWM")
	if err != nil {
		b.Fatalf("reading controller RSS: %v", err)
	}
	cpuAfter, err := controlplane.ProcessCPUSeconds(pid)
	if err != nil {
		b.Fatalf("reading controller CPU time: %v", err)
	}
	after, nodesAfter, typesAfter, err := fleetPrice(ctx, cp.Client)
	if err != nil {
		b.Fatal(err)
	}
	commands := decisions() - decisionsBefore
	watch.mu.Lock()
	evictions, fresh := len(watch.created), len(watch.unschedulable)
	watch.mu.Unlock()

	b.ReportMetric(lastChange.Seconds(), "s-converged")
	b.ReportMetric(commands, "commands")
	b.ReportMetric(float64(evictions), "evictions")
	b.ReportMetric(float64(fresh), "fresh-node-pods")
	b.ReportMetric(before, "$/h-before")
	b.ReportMetric(after, "$/h-after")
	b.ReportMetric(cpuAfter-cpuBefore, "cpu-s")
	b.ReportMetric(peakMiB, "MiB-peak-rss")
	b.Logf("fleet before: %d NodeClaims %v; after: %d %v", nodesBefore, sortedCounts(typesBefore), nodesAfter, sortedCounts(typesAfter))
	if c, err := composition(ctx, cp.Client); err == nil {
		b.Logf("nodes by pods after consolidation: %s", c)
	}
	if idle, err := idleNodes(ctx, cp.Client); err == nil && idle != "" {
		b.Logf("nodes without a benchmark pod after consolidation, with their last event:\n%s", idle)
	}
	b.ReportMetric(bound, "$/h-bound")
	b.Logf("no fleet for %d large-resource-app pods costs less than $%.2f/h (the cheapest price per large pod over the pool's types, benchmark.PodFloor); after/bound %.3f", replicas, bound, after/bound)
	b.Logf("%s, capped=%v: last node-count change %.1fs after the scale-in, %.0f commands, %d evictions, %d needed a fresh node, $%.2f/h -> $%.2f/h, controller CPU %.1fs during consolidation (%.1fs in all), peak RSS %.0f MiB",
		algo, capped, lastChange.Seconds(), commands, evictions, fresh, before, after, cpuAfter-cpuBefore, cpuAfter, peakMiB)
	if capped {
		b.Logf("upstream: 474s, 21 commands, 83 evictions, 8 fresh-node pods, $79.06/h -> $67.31/h; targets: <=60s, <=40 evictions, 0 fresh-node pods, <=$63.9/h")
	} else {
		b.Logf("upstream: 25-37s, 43-104 evictions, $55.84/h -> $46.65-49.82/h")
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at the end: %s", strings.TrimSpace(string(load)))
	}
}

// saveSnapshot writes the cluster's objects to path as `karpenter
// snapshot` does.
func saveSnapshot(ctx context.Context, b *testing.B, c client.Reader, path string) {
	o, err := cli.Load(ctx, c, time.Now())
	if err != nil {
		b.Logf("snapshot: %v", err)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Logf("snapshot: %v", err)
		return
	}
	defer f.Close()
	if err := o.Write(f, false); err != nil {
		b.Logf("snapshot %s: %v", path, err)
	}
}

// composition counts the nodes by the (large, small) benchmark pods they
// run, e.g. "4L+1S:120".
func composition(ctx context.Context, c client.Client) (string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(benchNamespace)); err != nil {
		return "", err
	}
	per := map[string][2]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		k := per[p.Spec.NodeName]
		if p.Labels["app"] == "large-resource-app" {
			k[0]++
		} else {
			k[1]++
		}
		per[p.Spec.NodeName] = k
	}
	counts := map[string]int{}
	for _, k := range per {
		counts[fmt.Sprintf("%dL+%dS", k[0], k[1])]++
	}
	return sortedCounts(counts), nil
}

// idleNodes lists the NodeClaims whose node runs no benchmark pod, each
// with its age and its node's last event: such a node costs money for
// nothing, and the event says why consolidation left it.
func idleNodes(ctx context.Context, c client.Client) (string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(benchNamespace)); err != nil {
		return "", err
	}
	busy := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp.IsZero() {
			busy[p.Spec.NodeName] = true
		}
	}
	var claims v1.NodeClaimList
	if err := c.List(ctx, &claims); err != nil {
		return "", err
	}
	var events corev1.EventList
	if err := c.List(ctx, &events); err != nil {
		return "", err
	}
	last := map[string]corev1.Event{}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind != "Node" {
			continue
		}
		if prev, ok := last[e.InvolvedObject.Name]; !ok || e.LastTimestamp.After(prev.LastTimestamp.Time) {
			last[e.InvolvedObject.Name] = e
		}
	}
	var lines []string
	for _, nc := range claims.Items {
		if nc.Status.NodeName != "" && busy[nc.Status.NodeName] {
			continue
		}
		e := last[nc.Status.NodeName]
		lines = append(lines, fmt.Sprintf("  %s (%s, %s old, deleting=%v): %s %s", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable],
			time.Since(nc.CreationTimestamp.Time).Round(time.Second), !nc.DeletionTimestamp.IsZero(), e.Reason, e.Message))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// scaleTo sets a benchmark Deployment's replicas.
func scaleTo(ctx context.Context, c client.Client, name string, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: benchNamespace, Name: name}, d); err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		return c.Update(ctx, d)
	})
}
