package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// driftLabel is the template label the disruption tests change to drift a
// pool: every pool starts at "1", and a value change alters the NodePool's
// hash, so every NodeClaim of the pool becomes Drifted (NodePoolDrifted).
const driftLabel = "e2e.karpenter-go.io/revision"

// startupTaint is the startup taint the held pools put on their nodes; the
// test's taintRemover plays the DaemonSet that takes it off, and so decides
// when a node becomes Initialized.
var startupTaint = corev1.Taint{Key: "e2e.karpenter-go.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}

// disruptionPool describes a NodePool for the disruption tests: amd64
// on-demand nodes of the default KWOKNodeClass labelled
// e2ePoolLabel=name and driftLabel=1.
type disruptionPool struct {
	name string
	// policy and consolidateAfter default to WhenEmpty and Never, so that
	// only the method a test looks at removes nodes.
	policy, consolidateAfter string
	budgets                  []v1.Budget
	// startupTaint puts startupTaint on the pool's nodes.
	startupTaint bool
}

func (p disruptionPool) yaml() string {
	policy, after := v1.ConsolidationPolicy(p.policy), p.consolidateAfter
	if policy == "" {
		policy = v1.ConsolidationPolicyWhenEmpty
	}
	if after == "" {
		after = "Never"
	}
	opts := append(amd64OnDemand(true), poolLabel(driftLabel, "1"), consolidation(policy, after))
	if p.startupTaint {
		opts = append(opts, startupTaints(startupTaint))
	}
	if len(p.budgets) > 0 {
		opts = append(opts, budgets(p.budgets...))
	}
	return manifest(testPool(p.name, opts...))
}

// spreadDeploymentYAML is a pause Deployment on pool whose pods refuse to
// share a host (required hostname anti-affinity), so it needs one node per
// replica and a drifted node's pod needs a replacement node.
func spreadDeploymentYAML(name, pool string, replicas int, annotations map[string]string) string {
	return manifest(pauseDeployment(name, int32(replicas), "300m", "128Mi", onPool(pool), onePerHost, podAnnotations(annotations)))
}

func applyAll(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, manifests ...string) {
	t.Helper()
	for _, m := range manifests {
		require.NoError(t, controlplane.Apply(ctx, cp.Client, []byte(m)), m)
	}
}

// startMetricsController runs the controller binary (through env(1), so
// the PID is the controller's own and cp.Kill crashes it) and returns its
// PID and metrics port.
func startMetricsController(t *testing.T, cp *controlplane.ControlPlane, name string, env []string, extra ...string) (pid, metricsPort int) {
	t.Helper()
	envBin, err := exec.LookPath("env")
	require.NoError(t, err)
	metricsPort = freePort(t)
	args := append(append([]string{mutationDetector}, env...), controllerBin,
		"--kubeconfig="+cp.KubeconfigPath,
		"--metrics-port="+strconv.Itoa(metricsPort),
		"--health-probe-port="+strconv.Itoa(freePort(t)),
		"--leader-election-namespace=kube-system",
	)
	pid, err = cp.Spawn(envBin, name, append(args, extra...)...)
	require.NoError(t, err, "starting %s", name)
	// E2E_LOG_DIR keeps the whole log of a failed test (the cluster's
	// working directory goes with it).
	if dir := os.Getenv("E2E_LOG_DIR"); dir != "" {
		t.Cleanup(func() {
			if t.Failed() {
				if b, err := os.ReadFile(cp.LogPath(name)); err == nil {
					_ = os.WriteFile(filepath.Join(dir, t.Name()+"-"+name+".log"), b, 0o644)
				}
			}
		})
	}
	if name != "controller" {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s log (tail):\n%s", name, tail(replicaLog(t, cp, name), 6000))
			}
		})
	}
	return pid, metricsPort
}

// metricSample is one line of the Prometheus text format.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrapeMetrics reads the controller's /metrics endpoint. The text format
// is simple enough to read here without another dependency.
func scrapeMetrics(ctx context.Context, port int) ([]metricSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var out []metricSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if s, ok := parseMetricLine(sc.Text()); ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// parseMetricLine parses `name{k="v",...} value [timestamp]`.
func parseMetricLine(line string) (metricSample, bool) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return metricSample{}, false
	}
	s := metricSample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return metricSample{}, false
	} else if line[i] == '{' {
		s.name = line[:i]
		rest = line[i+1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return metricSample{}, false
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			for len(rest) > 0 && rest[0] != '"' {
				if rest[0] == '\\' && len(rest) > 1 {
					switch rest[1] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[1])
					}
					rest = rest[2:]
					continue
				}
				val.WriteByte(rest[0])
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return metricSample{}, false
			}
			rest = rest[1:]
			s.labels[key] = val.String()
		}
	} else {
		s.name = line[:i]
		rest = line[i:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return metricSample{}, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return metricSample{}, false
	}
	s.value = v
	return s, true
}

// metricValue returns the value of the first sample of name whose labels
// include want.
func metricValue(samples []metricSample, name string, want map[string]string) (float64, bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return s.value, true
		}
	}
	return 0, false
}

const allowedDisruptionsMetric = "karpenter_nodepools_allowed_disruptions"

// eventMessages returns the messages of events with reason on the object of
// kind and name (all namespaces: events of cluster-scoped objects land in
// "default").
func eventMessages(ctx context.Context, cp *controlplane.ControlPlane, kind, name, reason string) []string {
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		return nil
	}
	var out []string
	for _, e := range events.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e.Message)
		}
	}
	return out
}

// blockedEvent returns a DisruptionBlocked message on the Node or NodeClaim
// called name that contains every one of parts, or "".
func blockedEvent(ctx context.Context, cp *controlplane.ControlPlane, name string, parts ...string) string {
	for _, kind := range []string{"Node", "NodeClaim"} {
		for _, m := range eventMessages(ctx, cp, kind, name, "DisruptionBlocked") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(m, p)
			}
			if ok {
				return m
			}
		}
	}
	return ""
}

// scaleDeployment sets a Deployment's replicas, retrying when the write
// races the deployment controller's own.
func scaleDeployment(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, name string, replicas int32) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, d); err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		return cp.Client.Update(ctx, d)
	}), "scaling %s to %d", name, replicas)
}

// setDriftLabel changes the pool's driftLabel, which drifts its nodes.
func setDriftLabel(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, pool, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}`, driftLabel, value)
	require.NoError(t, cp.Client.Patch(ctx, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}, client.RawPatch(types.MergePatchType, []byte(patch))), "drifting %s", pool)
}

// poolClaims lists the NodeClaims of pool.
func poolClaims(ctx context.Context, cp *controlplane.ControlPlane, pool string) ([]v1.NodeClaim, error) {
	var list v1.NodeClaimList
	if err := cp.Client.List(ctx, &list, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func claimNames(claims []v1.NodeClaim) map[string]bool {
	out := map[string]bool{}
	for _, nc := range claims {
		out[nc.Name] = true
	}
	return out
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	c := readyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

// readyCondition is the node's Ready condition, nil when it has none.
func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// taintRemover plays the agent DaemonSet of the held pools: it removes
// startupTaint from a node once the node has carried it for hold, unless
// paused. Holding replacements uninitialized opens a window in which a
// disruption that does not wait for its replacement would delete its
// candidate, and lets the crash test kill the controller inside it.
type taintRemover struct {
	hold   time.Duration
	mu     sync.Mutex
	paused bool
	first  map[string]time.Time // node name -> first seen with the taint
}

func (r *taintRemover) setPaused(p bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = p
}

// run removes startup taints until ctx ends; it returns when done is closed
// by the caller's cleanup.
func (r *taintRemover) run(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane) {
	r.first = map[string]time.Time{}
	done := make(chan struct{})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("taint remover panicked: %v", p)
			}
		}()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r.mu.Lock()
			paused := r.paused
			r.mu.Unlock()
			var nodes corev1.NodeList
			if err := cp.Client.List(ctx, &nodes); err != nil {
				continue
			}
			for i := range nodes.Items {
				n := &nodes.Items[i]
				if !hasTaint(n, startupTaint.Key) {
					continue
				}
				if _, ok := r.first[n.Name]; !ok {
					r.first[n.Name] = time.Now()
				}
				if paused || time.Since(r.first[n.Name]) < r.hold {
					continue
				}
				_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur := &corev1.Node{}
					if err := cp.Client.Get(ctx, client.ObjectKey{Name: n.Name}, cur); err != nil {
						return err
					}
					kept := cur.Spec.Taints[:0]
					for _, tt := range cur.Spec.Taints {
						if tt.Key != startupTaint.Key {
							kept = append(kept, tt)
						}
					}
					cur.Spec.Taints = kept
					return cp.Client.Update(ctx, cur) // optimistic: never drops a taint someone else added
				})
			}
		}
	}()
}

// poolWatch is what the sampler records about one NodePool (and the
// Deployment app on it) from the moment it is armed.
type poolWatch struct {
	pool, app string
	replicas  int
	originals map[string]bool // NodeClaims before the drift

	maxDisrupted, maxUnavailable int
	maxDisruptedNodes            []string
	// disrupted holds every node ever seen tainted karpenter.sh/disrupted
	// or deleting (Node or NodeClaim).
	disrupted map[string]time.Time
	seen      map[string]bool // every NodeClaim name seen in the pool
	// violations lists samples where more originals were deleting or gone
	// than replacements were Initialized and Ready.
	violations []string
	// allowed counts the karpenter_nodepools_allowed_disruptions values seen,
	// by reason.
	allowed map[string]map[float64]int
}

// sampler lists Nodes, NodeClaims and pods every 200 ms (and scrapes the
// metrics every second) and folds them into the watches.
type sampler struct {
	mu      sync.Mutex
	watches map[string]*poolWatch
	stop    chan struct{}
	done    chan struct{}
	samples int
	errs    []string
	// live is set once a disruption has been seen; metric values are
	// recorded from then on.
	live bool
}

func (w *poolWatch) String() string {
	return fmt.Sprintf("%s: max %d disrupted at once %v, max %d pods unavailable, %d nodeclaims seen, %d disrupted, allowed-disruptions values %v",
		w.pool, w.maxDisrupted, w.maxDisruptedNodes, w.maxUnavailable, len(w.seen), len(w.disrupted), w.allowed)
}

// startSampler arms a watch for each pool (originals are its current
// NodeClaims) and samples until stopped.
func startSampler(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, metricsPort func() int, watches ...*poolWatch) *sampler {
	t.Helper()
	s := &sampler{watches: map[string]*poolWatch{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, w := range watches {
		claims, err := poolClaims(ctx, cp, w.pool)
		require.NoError(t, err)
		w.originals = claimNames(claims)
		w.disrupted = map[string]time.Time{}
		w.seen = map[string]bool{}
		w.allowed = map[string]map[float64]int{}
		s.watches[w.pool] = w
	}
	go func() {
		defer close(s.done)
		defer func() {
			if p := recover(); p != nil {
				s.mu.Lock()
				s.errs = append(s.errs, fmt.Sprintf("sampler panicked: %v", p))
				s.mu.Unlock()
			}
		}()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var metrics []metricSample
			if metricsPort != nil && i%5 == 0 {
				metrics, _ = scrapeMetrics(ctx, metricsPort())
			}
			s.sample(ctx, cp, metrics)
		}
	}()
	t.Cleanup(func() {
		s.halt()
		for _, e := range s.errs {
			t.Error(e)
		}
	})
	return s
}

func (s *sampler) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *sampler) sample(ctx context.Context, cp *controlplane.ControlPlane, metrics []metricSample) {
	var nodes corev1.NodeList
	var claims v1.NodeClaimList
	var pods corev1.PodList
	if cp.Client.List(ctx, &nodes) != nil || cp.Client.List(ctx, &claims) != nil || cp.Client.List(ctx, &pods, client.InNamespace("default")) != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, w := range s.watches {
		disrupted := map[string]bool{}
		present := map[string]bool{}
		initialized := map[string]bool{} // non-original NodeClaims, Initialized, not deleting
		for i := range claims.Items {
			nc := &claims.Items[i]
			if nc.Labels[v1.NodePoolLabelKey] != w.pool {
				continue
			}
			w.seen[nc.Name] = true
			present[nc.Name] = true
			if nc.DeletionTimestamp != nil {
				disrupted[nc.Name] = true
			} else if !w.originals[nc.Name] && conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				initialized[nc.Name] = true
			}
		}
		readyReplacements := 0
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if n.Labels[v1.NodePoolLabelKey] != w.pool {
				continue
			}
			if n.DeletionTimestamp != nil || hasTaint(n, v1.DisruptedTaintKey) {
				disrupted[n.Name] = true
			} else if initialized[n.Name] && nodeReady(n) {
				readyReplacements++
			}
		}
		for name := range disrupted {
			if _, ok := w.disrupted[name]; !ok {
				w.disrupted[name] = now
			}
		}
		if len(disrupted) > w.maxDisrupted {
			w.maxDisrupted = len(disrupted)
			w.maxDisruptedNodes = sortedKeys(disrupted)
		}
		// An original is "deleting" from the moment its NodeClaim or Node is
		// marked for deletion; tainting alone is the start of the command,
		// before its replacement exists.
		deleting := 0
		for name := range w.originals {
			if !present[name] {
				deleting++
				continue
			}
			for i := range claims.Items {
				if claims.Items[i].Name == name && claims.Items[i].DeletionTimestamp != nil {
					deleting++
				}
			}
		}
		if deleting > readyReplacements && len(w.violations) < 20 {
			w.violations = append(w.violations, fmt.Sprintf("%s: %d original(s) deleting or gone but %d replacement(s) Initialized and Ready",
				now.Format("15:04:05.000"), deleting, readyReplacements))
		}
		if w.app != "" {
			ready := 0
			for i := range pods.Items {
				if pods.Items[i].Labels["app"] == w.app && podReady(&pods.Items[i]) {
					ready++
				}
			}
			w.maxUnavailable = max(w.maxUnavailable, w.replicas-ready)
		}
		s.live = s.live || len(w.disrupted) > 0
	}
	// The budget gauges are set once per disruption pass, so until a pass
	// has run since the pools' nodes initialized they may still count the
	// nodes as they were then. Any disruption seen proves such a pass (every
	// pool was initialized before the sampler was armed).
	if !s.live {
		return
	}
	for _, w := range s.watches {
		for _, reason := range []v1.DisruptionReason{v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted, v1.DisruptionReasonUnderutilized} {
			if v, ok := metricValue(metrics, allowedDisruptionsMetric, map[string]string{"nodepool": w.pool, "reason": string(reason)}); ok {
				if w.allowed[string(reason)] == nil {
					w.allowed[string(reason)] = map[float64]int{}
				}
				w.allowed[string(reason)][v]++
			}
		}
	}
}

// snapshot runs f under the sampler's lock, for reading watches while it
// runs.
func (s *sampler) snapshot(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// driftDone reports whether every NodeClaim of pool carries the new drift
// label value, none is deleting, there are want of them, and none of the
// originals is left.
func driftDone(ctx context.Context, cp *controlplane.ControlPlane, pool, value string, want int, originals map[string]bool) bool {
	claims, err := poolClaims(ctx, cp, pool)
	if err != nil || len(claims) < want {
		return false
	}
	for _, nc := range claims {
		if originals[nc.Name] || nc.DeletionTimestamp != nil || nc.Labels[driftLabel] != value {
			return false
		}
		node := &corev1.Node{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil || node.Labels[driftLabel] != value {
			return false
		}
	}
	return true
}

// requireInstancesMatchClaims checks that the kwok provider's instances
// (Nodes with a kwok provider ID) and the NodeClaims correspond one to one:
// no instance leaked and none is missing.
func requireInstancesMatchClaims(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane) {
	t.Helper()
	var nodes corev1.NodeList
	var claims v1.NodeClaimList
	require.NoError(t, cp.Client.List(ctx, &nodes))
	require.NoError(t, cp.Client.List(ctx, &claims))
	instances := map[string]bool{}
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Spec.ProviderID, kwok.ProviderIDPrefix) {
			require.Falsef(t, instances[n.Spec.ProviderID], "two Nodes share provider ID %s", n.Spec.ProviderID)
			instances[n.Spec.ProviderID] = true
		}
	}
	claimed := map[string]bool{}
	for _, nc := range claims.Items {
		require.NotEmptyf(t, nc.Status.ProviderID, "NodeClaim %s has no instance", nc.Name)
		require.Truef(t, instances[nc.Status.ProviderID], "NodeClaim %s: instance %s has no Node", nc.Name, nc.Status.ProviderID)
		claimed[nc.Status.ProviderID] = true
	}
	for id := range instances {
		require.Truef(t, claimed[id], "instance %s has no NodeClaim (leaked)", id)
	}
}

// TestDisruptionMetricParsing checks the scrape helper's reading of the
// Prometheus text format, which the budget assertions rely on.
func TestDisruptionMetricParsing(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ok     bool
		name   string
		labels map[string]string
		value  float64
	}{
		{line: `karpenter_nodepools_allowed_disruptions{nodepool="drift-one",reason="Drifted"} 1`, ok: true,
			name: allowedDisruptionsMetric, labels: map[string]string{"nodepool": "drift-one", "reason": "Drifted"}, value: 1},
		{line: `x{a="q\"uo,te}",b=""} 2.147483647e+09 1700000000`, ok: true,
			name: "x", labels: map[string]string{"a": `q"uo,te}`, "b": ""}, value: 2147483647},
		{line: `go_goroutines 42`, ok: true, name: "go_goroutines", labels: map[string]string{}, value: 42},
		{line: `# TYPE x gauge`},
		{line: ``},
		{line: `x{a="1"} NaNish`},
	} {
		s, ok := parseMetricLine(tc.line)
		require.Equal(t, tc.ok, ok, tc.line)
		if ok {
			require.Equal(t, tc.name, s.name, tc.line)
			require.Equal(t, tc.labels, s.labels, tc.line)
			require.Equal(t, tc.value, s.value, tc.line)
		}
	}
	v, ok := metricValue([]metricSample{{name: "m", labels: map[string]string{"a": "1", "b": "2"}, value: 3}}, "m", map[string]string{"b": "2"})
	require.True(t, ok)
	require.Equal(t, 3.0, v)
	_, ok = metricValue([]metricSample{{name: "m", labels: map[string]string{"a": "1"}, value: 3}}, "m", map[string]string{"a": "2"})
	require.False(t, ok)
}
