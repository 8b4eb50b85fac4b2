package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// benchNamespace holds the benchmark's Deployments.
const benchNamespace = "default"

// benchManifests is the setup upstream's kwok build was measured on: a
// linux/amd64 pool that may consolidate at once with a 100% budget, a
// NodeClass whose instances register immediately, and two Deployments of
// 500 pods each.
var benchManifests = manifest(defaultKWOKNodeClass(), kwokPool("bench",
	requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
	requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
	consolidation(v1.ConsolidationPolicyWhenEmptyOrUnderutilized, "0s"),
	budgets(nodesBudget("100%", "", 0))))

// benchDeployment is a Deployment of real pause pods (the image the
// kubelet stand-ins report) labelled bench=provisioning in benchNamespace.
func benchDeployment(name, cpu, memory string, replicas int) string {
	return manifest(pauseDeployment(name, int32(replicas), cpu, memory,
		inNamespace(benchNamespace), image("registry.k8s.io/pause:3.10"), podLabel("bench", "provisioning")))
}

// podProgress watches the benchmark's pods and records when all of them
// were first bound and first Running.
type podProgress struct {
	want  int
	start time.Time

	mu             sync.Mutex
	seen           map[string]bool
	bound, running map[string]bool
	// podsAt is when the last of the wanted pods was first seen: from then
	// on every pod exists, and the first round should follow within the
	// provisioning window.
	podsAt         time.Duration
	boundPerSecond [300]int
	boundAt        time.Duration
	firstBoundAt   time.Duration
	halfBoundAt    time.Duration
	runningAt      time.Duration
	done           chan struct{}
}

func (p *podProgress) observe(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels["bench"] != "provisioning" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.seen[pod.Name] {
		p.seen[pod.Name] = true
		if p.podsAt == 0 && len(p.seen) >= p.want {
			p.podsAt = time.Since(p.start)
		}
	}
	if pod.Spec.NodeName != "" && !p.bound[pod.Name] {
		p.bound[pod.Name] = true
		if s := int(time.Since(p.start).Seconds()); s < len(p.boundPerSecond) {
			p.boundPerSecond[s]++
		}
	}
	if pod.Status.Phase == corev1.PodRunning {
		p.running[pod.Name] = true
	}
	if p.firstBoundAt == 0 && len(p.bound) > 0 {
		p.firstBoundAt = time.Since(p.start)
	}
	if p.halfBoundAt == 0 && len(p.bound) >= p.want/2 {
		p.halfBoundAt = time.Since(p.start)
	}
	if p.boundAt == 0 && len(p.bound) >= p.want {
		p.boundAt = time.Since(p.start)
	}
	if p.runningAt == 0 && len(p.running) >= p.want {
		p.runningAt = time.Since(p.start)
		close(p.done)
	}
}

// BenchmarkProvisioning1000 provisions for 1,000 pending pods on the local
// cluster and reports the figures upstream Karpenter's kwok build was
// measured with: time to all pods bound and Running, NodeClaims, rounds,
// $/h and the controller's peak RSS. It runs only with -bench, e.g.
//
//	go test ./test/e2e -run '^$' -bench Provisioning1000 -benchtime=1x
func BenchmarkProvisioning1000(b *testing.B) {
	res := kwokProvisioning(b, "")
	b.Logf("1000 pods: bound in %.1fs, Running in %.1fs; %d NodeClaims in %d round(s) %v; $%.2f/h; controller peak RSS %.0f MiB (upstream: 15.2s, 18.3s, 10 in 2, $55.84/h, 124-150 MiB)",
		res.bound.Seconds(), res.running.Seconds(), len(res.claims), res.rounds, res.types, res.cost, res.peakMiB)
}

// kwokProvisioning is the 1,000-pod scale-up on the simulated provider, on
// a control plane of its own that it stops before returning. label names
// its metrics and kept log apart from another run's in the same benchmark
// ("" for none).
func kwokProvisioning(b *testing.B, label string) provisioningResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, Scheduler: true, Kwok: true, APIQPS: 200, APIBurst: 300,
	})
	if err != nil {
		b.Fatalf("starting control plane: %v", err)
	}
	// Stopped on return, so a run that follows has the machine to itself;
	// Stop may run again in cleanup.
	defer cp.Stop()
	b.Cleanup(cp.Stop)
	if err := controlplane.Apply(ctx, cp.Client, []byte(benchManifests)); err != nil {
		b.Fatalf("applying pool: %v", err)
	}

	pid, err := cp.Spawn(controllerBin, "controller",
		"--kubeconfig="+cp.KubeconfigPath,
		"--metrics-port="+strconv.Itoa(freePort(b)), "--health-probe-port="+strconv.Itoa(freePort(b)),
		"--leader-election-namespace=kube-system",
		"--"+kwok.FlagCatalog+"="+kwok.CatalogUpstreamKWOK)
	if err != nil {
		b.Fatalf("starting controller: %v", err)
	}
	return provisioningBench{
		cp: cp, pid: pid, pool: "bench", timeout: 5 * time.Minute, label: label,
		price: func(nc *v1.NodeClaim, node *corev1.Node) float64 {
			label := nc.Labels[kwokv1alpha1.NodeViewerPriceLabelKey]
			if node != nil {
				label = node.Labels[kwokv1alpha1.NodeViewerPriceLabelKey]
			}
			p, _ := strconv.ParseFloat(label, 64)
			return p
		},
	}.run(b, ctx)
}

// provisioningBench is the part of a 1,000-pod scale-up benchmark that
// does not depend on the provider: a control plane whose controller (pid)
// already runs, the NodePool it waits for, and how to price a NodeClaim.
type provisioningBench struct {
	cp   *controlplane.ControlPlane
	pid  int
	pool string
	// timeout bounds the wait for every pod to run.
	timeout time.Duration
	// leaderless is a controller started without leader election
	// (upstream's, as test/anchors starts it): it is ready once its
	// controllers run.
	leaderless bool
	// price is a NodeClaim's $/h; node is its Node, or nil.
	price func(nc *v1.NodeClaim, node *corev1.Node) float64
	// beforeStart runs right before the Deployments are applied (to take
	// a baseline of provider-side counters).
	beforeStart func()
	// label names a run that is not the benchmark's own (its log lines
	// and kept controller log say it), "" for the benchmark's own. A
	// labelled run reports no metrics: the next run's ResetTimer would
	// delete them, so the benchmark reports what it wants of the result.
	label string
}

// report is b.ReportMetric for the benchmark's own run only.
func (pb provisioningBench) report(b *testing.B, v float64, unit string) {
	if pb.label == "" {
		b.ReportMetric(v, unit)
	}
}

// provisioningResult is what a run measured.
type provisioningResult struct {
	start                     time.Time
	bound, running            time.Duration
	claims                    []v1.NodeClaim
	rounds                    int
	cost                      float64
	types                     map[string]int
	peakMiB, cpuSeconds       float64
	firstBoundAt, halfBoundAt time.Duration
	// firstClaimAt is when the first NodeClaim appeared (the first round
	// acted); launchDelays are, per NodeClaim, the time from its
	// appearance to Launched=True, sorted.
	firstClaimAt time.Duration
	launchDelays []time.Duration
	// podsAt is when every pod of the Deployments existed.
	podsAt time.Duration
}

// claimProgress watches NodeClaims created after start and records when
// each appeared and when it was first seen Launched.
type claimProgress struct {
	start time.Time

	mu       sync.Mutex
	seen     map[string]time.Duration
	launched map[string]time.Duration
	// registered and initialized are when each NodeClaim was first seen
	// Registered and Initialized: the phases after the launch.
	registered, initialized map[string]time.Duration
	firstAt                 time.Duration
	preexisted              map[string]bool
}

func newClaimProgress(existing []string) *claimProgress {
	c := &claimProgress{seen: map[string]time.Duration{}, launched: map[string]time.Duration{},
		registered: map[string]time.Duration{}, initialized: map[string]time.Duration{}, preexisted: map[string]bool{}}
	for _, n := range existing {
		c.preexisted[n] = true
	}
	return c
}

func (c *claimProgress) observe(obj interface{}) {
	nc, ok := obj.(*v1.NodeClaim)
	if !ok || c.start.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.preexisted[nc.Name] {
		return
	}
	at := time.Since(c.start)
	if _, ok := c.seen[nc.Name]; !ok {
		c.seen[nc.Name] = at
		if c.firstAt == 0 {
			c.firstAt = at
		}
	}
	for cond, when := range map[string]map[string]time.Duration{
		v1.ConditionTypeLaunched: c.launched, v1.ConditionTypeRegistered: c.registered, v1.ConditionTypeInitialized: c.initialized,
	} {
		if _, ok := when[nc.Name]; !ok && nc.IsTrue(cond) {
			when[nc.Name] = at
		}
	}
}

// phases is, per NodeClaim in the order they launched, when it appeared,
// was Launched, Registered and Initialized (from start, 0.1s; "-" not
// seen): where a launch's seconds go.
func (c *claimProgress) phases() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.seen))
	for name := range c.seen {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		li, iok := c.launched[names[i]]
		lj, jok := c.launched[names[j]]
		return iok && (!jok || li < lj || li == lj && names[i] < names[j])
	})
	at := func(m map[string]time.Duration, name string) string {
		d, ok := m[name]
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%.1f", d.Seconds())
	}
	out := make([]string, len(names))
	for i, name := range names {
		out[i] = at(c.seen, name) + "/" + at(c.launched, name) + "/" + at(c.registered, name) + "/" + at(c.initialized, name)
	}
	return out
}

// result is the first NodeClaim's time and the sorted launch delays.
func (c *claimProgress) result() (time.Duration, []time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var delays []time.Duration
	for name, at := range c.launched {
		delays = append(delays, at-c.seen[name])
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	return c.firstAt, delays
}

// pollClaims lists NodeClaims every 100ms into progress until stop
// closes (there are a few dozen at most, so a poll is cheap).
func pollClaims(ctx context.Context, cp *controlplane.ControlPlane, progress *claimProgress, stop <-chan struct{}) {
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			var list v1.NodeClaimList
			if err := cp.Client.List(ctx, &list); err == nil {
				for i := range list.Items {
					progress.observe(&list.Items[i])
				}
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// run waits for the controller to lead and the pool to be Ready, applies
// the two Deployments (500 × 900m/3100Mi and 500 × 3500m/28Gi), waits until
// all 1,000 pods run and reports time to bound and Running, NodeClaims,
// rounds, $/h, the controller's peak RSS and CPU.
func (pb provisioningBench) run(b *testing.B, ctx context.Context) provisioningResult {
	const replicas = 500
	cp := pb.cp
	controllerLog := func() string {
		raw, _ := os.ReadFile(cp.LogPath("controller"))
		return string(raw)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("controller log (tail):\n%s", tail(controllerLog(), 6000))
		}
		// BENCH_CONTROLLER_LOG keeps the whole log for a closer look.
		if dst := os.Getenv("BENCH_CONTROLLER_LOG"); dst != "" {
			if pb.label != "" {
				dst += "." + pb.label
			}
			if err := os.WriteFile(dst, []byte(controllerLog()), 0o644); err != nil {
				b.Logf("keeping controller log: %v", err)
			}
		}
	})
	// Measure provisioning, not start-up: wait until the controller leads
	// and its controllers run.
	if !waitFor(ctx, 90*time.Second, func() bool {
		l := controllerLog()
		return (pb.leaderless || logHas(l, "Successfully acquired lease")) && logHas(l, "Starting workers")
	}) {
		b.Fatal("the controller did not become leader")
	}
	// ... and the pool is Ready, or the first round finds no NodePool.
	if !waitFor(ctx, 2*time.Minute, func() bool {
		np := &v1.NodePool{}
		return cp.Client.Get(ctx, client.ObjectKey{Name: pb.pool}, np) == nil && np.IsReady()
	}) {
		b.Fatalf("the NodePool %s did not become Ready", pb.pool)
	}

	progress := &podProgress{want: 2 * replicas, seen: map[string]bool{}, bound: map[string]bool{}, running: map[string]bool{}, done: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(cp.Kubernetes, 0, informers.WithNamespace(benchNamespace))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    progress.observe,
		UpdateFunc: func(_, obj interface{}) { progress.observe(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	// When each node first became schedulable: Ready, with no NoSchedule
	// or NoExecute taint left. The gap between that and the first binding
	// is the kube-scheduler's own delay. Before it, when the Node was first
	// seen, Ready, and without the unregistered taint.
	var nodesMu sync.Mutex
	schedulableAt, registeredAt := map[string]time.Duration{}, map[string]time.Duration{}
	readyAt, syncedAt := map[string]time.Duration{}, map[string]time.Duration{}
	// taintSpans are, per node and NoSchedule or NoExecute taint key, when
	// the taint was first seen on it and when it was first seen gone.
	type span struct{ on, off time.Duration }
	taintSpans := map[string]map[string]*span{}
	nodeFactory := informers.NewSharedInformerFactory(cp.Kubernetes, 0)
	observeNode := func(obj interface{}) {
		n, ok := obj.(*corev1.Node)
		if !ok || progress.start.IsZero() {
			return
		}
		at := time.Since(progress.start)
		first := func(m map[string]time.Duration) {
			if _, seen := m[n.Name]; !seen {
				m[n.Name] = at
			}
		}
		nodesMu.Lock()
		defer nodesMu.Unlock()
		first(registeredAt)
		ready, unregistered, tainted := false, false, false
		spans := taintSpans[n.Name]
		if spans == nil {
			spans = map[string]*span{}
			taintSpans[n.Name] = spans
		}
		on := map[string]bool{}
		for _, t := range n.Spec.Taints {
			unregistered = unregistered || t.MatchTaint(&v1.UnregisteredNoExecuteTaint)
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				tainted = true
				on[t.Key] = true
				if spans[t.Key] == nil {
					spans[t.Key] = &span{on: at, off: -1}
				}
			}
		}
		for key, sp := range spans {
			if !on[key] && sp.off < 0 {
				sp.off = at
			}
		}
		for _, c := range n.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		if ready {
			first(readyAt)
		}
		if !unregistered {
			first(syncedAt)
		}
		if ready && !tainted {
			first(schedulableAt)
		}
	}
	if _, err := nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observeNode,
		UpdateFunc: func(_, obj interface{}) { observeNode(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	nodeFactory.Start(stop)
	defer nodeFactory.Shutdown()
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	// Shutdown waits for the informers, which end only when stop closes.
	defer factory.Shutdown()
	defer close(stop)

	launches := newClaimProgress(nil)
	pollClaims(ctx, cp, launches, stop)

	if pb.beforeStart != nil {
		pb.beforeStart()
	}
	b.ResetTimer()
	progress.start = time.Now()
	launches.mu.Lock()
	launches.start = progress.start
	launches.mu.Unlock()
	workload := benchDeployment("bench-small", "900m", "3100Mi", replicas) + "---\n" + benchDeployment("bench-large", "3500m", "28Gi", replicas)
	if err := controlplane.Apply(ctx, cp.Client, []byte(workload)); err != nil {
		b.Fatalf("applying deployments: %v", err)
	}
	select {
	case <-progress.done:
	case <-time.After(pb.timeout):
		progress.mu.Lock()
		b.Fatalf("after %s: %d/%d pods bound, %d running", pb.timeout, len(progress.bound), progress.want, len(progress.running))
	}
	b.StopTimer()

	res := provisioningResult{start: progress.start}
	// Peak RSS is read while the controller still runs.
	var err error
	if res.peakMiB, err = controlplane.ProcessMemoryMiB(pb.pid, "VmHWM"); err != nil {
		b.Fatalf("reading controller RSS: %v", err)
	}
	if res.cpuSeconds, err = controlplane.ProcessCPUSeconds(pb.pid); err != nil {
		b.Fatalf("reading controller CPU time: %v", err)
	}
	var claims v1.NodeClaimList
	if err := cp.Client.List(ctx, &claims); err != nil {
		b.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := cp.Client.List(ctx, &nodes); err != nil {
		b.Fatal(err)
	}
	nodeOf := map[string]*corev1.Node{}
	for i := range nodes.Items {
		nodeOf[nodes.Items[i].Spec.ProviderID] = &nodes.Items[i]
	}
	res.claims = claims.Items
	res.types = map[string]int{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		res.cost += pb.price(nc, nodeOf[nc.Status.ProviderID])
		res.types[nc.Labels[corev1.LabelInstanceTypeStable]+"/"+nc.Labels[v1.CapacityTypeLabelKey]]++
	}
	b.Logf("deployments applied at %s", progress.start.UTC().Format(time.RFC3339Nano))
	for _, line := range strings.Split(controllerLog(), "\n") {
		if strings.Contains(line, `"message":"computed new nodeclaim(s) to fit pod(s)"`) {
			res.rounds++
			at := ""
			var entry struct{ Time time.Time }
			if json.Unmarshal([]byte(line), &entry) == nil {
				at = fmt.Sprintf(" at %.1fs", entry.Time.Sub(progress.start).Seconds())
			}
			b.Logf("round %d%s: %s", res.rounds, at, line)
		}
	}

	progress.mu.Lock()
	res.bound, res.running = progress.boundAt, progress.runningAt
	res.firstBoundAt, res.halfBoundAt = progress.firstBoundAt, progress.halfBoundAt
	res.podsAt = progress.podsAt
	perSecond := progress.boundPerSecond[:min(int(progress.boundAt.Seconds())+1, len(progress.boundPerSecond))]
	progress.mu.Unlock()
	res.firstClaimAt, res.launchDelays = launches.result()
	pb.report(b, res.bound.Seconds(), "s-bound")
	pb.report(b, res.running.Seconds(), "s-running")
	pb.report(b, float64(len(res.claims)), "nodeclaims")
	pb.report(b, float64(res.rounds), "rounds")
	pb.report(b, res.cost, "$/h")
	pb.report(b, res.peakMiB, "MiB-peak-rss")
	pb.report(b, res.cpuSeconds, "cpu-s")
	pb.report(b, res.firstClaimAt.Seconds(), "s-first-nodeclaim")
	pb.report(b, (res.firstClaimAt - res.podsAt).Seconds(), "s-first-nodeclaim-after-pods")
	if n := len(res.launchDelays); n > 0 {
		pb.report(b, res.launchDelays[n-1].Seconds(), "s-launch-max")
	}
	b.Logf("%sall %d pods existed at %.1fs; first NodeClaim at %.1fs (%.1fs after); NodeClaim creation to Launched: %v", labelPrefix(pb.label), progress.want,
		res.podsAt.Seconds(), res.firstClaimAt.Seconds(), (res.firstClaimAt - res.podsAt).Seconds(), roundDurations(res.launchDelays))
	b.Logf("%sNodeClaims created/Launched/Registered/Initialized at (s): %v", labelPrefix(pb.label), launches.phases())
	nodesMu.Lock()
	var ready, registered []float64
	for _, d := range schedulableAt {
		ready = append(ready, d.Seconds())
	}
	for _, d := range registeredAt {
		registered = append(registered, d.Seconds())
	}
	nodesMu.Unlock()
	names := make([]string, 0, len(registeredAt))
	for name := range registeredAt {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return registeredAt[names[i]] < registeredAt[names[j]] })
	at := func(m map[string]time.Duration, name string) string {
		if d, ok := m[name]; ok {
			return fmt.Sprintf("%.1f", d.Seconds())
		}
		return "-"
	}
	var timeline []string
	for _, name := range names {
		entry := at(registeredAt, name) + "/" + at(readyAt, name) + "/" + at(syncedAt, name) + "/" + at(schedulableAt, name)
		keys := make([]string, 0, len(taintSpans[name]))
		for key := range taintSpans[name] {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			sp := taintSpans[name][key]
			off := "-"
			if sp.off >= 0 {
				off = fmt.Sprintf("%.1f", sp.off.Seconds())
			}
			entry += fmt.Sprintf(" %s:%.1f-%s", key, sp.on.Seconds(), off)
		}
		timeline = append(timeline, "("+entry+")")
	}
	sort.Float64s(ready)
	sort.Float64s(registered)
	b.Logf("nodes registered at %.1f s", registered)
	b.Logf("nodes schedulable at %.1f s", ready)
	b.Logf("%snodes seen/Ready/unregistered taint gone/schedulable at (s): %v", labelPrefix(pb.label), timeline)
	b.Logf("first pod bound at %.1fs, half at %.1fs; bound per second: %v", res.firstBoundAt.Seconds(), res.halfBoundAt.Seconds(), perSecond)
	b.Logf("controller CPU since start (incl. start-up): %.1fs", res.cpuSeconds)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at the end: %s", strings.TrimSpace(string(load)))
	}
	return res
}

// labelPrefix is "label: " or "".
func labelPrefix(label string) string {
	if label == "" {
		return ""
	}
	return label + ": "
}

// roundDurations prints durations to 0.1s.
func roundDurations(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%.1fs", d.Seconds())
	}
	return out
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}
