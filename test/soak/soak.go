// Package soak runs a controller for a long time on a local control plane
// with kwok as the kubelets: it builds up a fleet of pods, then churns it
// (Deployments moving up and down around a curve, topology spread,
// anti-affinity, a PDB, a drift halfway through) on a seeded trace that is
// the same for every controller, and records every 10 s what users of a big
// cluster care about: the controller's memory and CPU, API-server requests,
// pending pods and their age, nodes and $/h. Run compares our controller
// (both consolidation algorithms) with upstream's kwok controller on the
// same trace; the one-minute test in soak_test.go checks ours for panics,
// leaked nodes, pods left pending and memory growth. RunTrace plays the
// consolidation benchmark's offline traces (pkg/disruption/benchmark) end to
// end the same way, one controller at a time.
package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// Namespace holds the soak's Deployments.
const Namespace = "default"

// PoolName is the soak's one NodePool.
const PoolName = "soak"

// Config scales a soak.
type Config struct {
	// Nodes is the fleet the build-up aims at; Pods the pods it builds up
	// (about ten a node: the pool offers types of up to 8 cores, the pods
	// ask 500m-1500m).
	Nodes, Pods int
	// Duration is the churn after the build-up; Step how often the
	// Deployments move; Sample how often the recorder samples.
	Duration, Step, Sample time.Duration
	// BuildTimeout bounds the build-up; SettleTimeout the wait after the
	// churn for every pod to be bound and every NodeClaim to have its Node
	// (and, with SettleDrift, for no Node of the template before the drift
	// to be left).
	BuildTimeout, SettleTimeout time.Duration
	SettleDrift                 bool
	// Seed makes the trace (the same for every controller).
	Seed int64
	// ProfileDir, when set, receives the controller's heap profile at the
	// end of the churn (<controller>-heap.pb.gz, from /debug/pprof/heap on
	// its metrics port) and its CPU profile over the churn
	// (<controller>-cpu.pb.gz); controllers that serve none are skipped.
	ProfileDir string
	// AuditDir, when set, has the API server record the request bodies of
	// the controller's NodeClaim and Node patches and receives the audit
	// log at the end (<controller>-audit.log), to say what each write
	// changed.
	AuditDir string
	// Logf reports progress.
	Logf func(format string, args ...any)
}

// Defaults fills what c leaves zero: 1,000 nodes, 10,000 pods, an hour of
// churn moving every 2 minutes, sampled every 10 s.
func (c Config) Defaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 1000
	}
	if c.Pods == 0 {
		c.Pods = 10 * c.Nodes
	}
	if c.Duration == 0 {
		c.Duration = time.Hour
	}
	if c.Step == 0 {
		c.Step = 2 * time.Minute
	}
	if c.Sample == 0 {
		c.Sample = 10 * time.Second
	}
	if c.BuildTimeout == 0 {
		c.BuildTimeout = 10*time.Minute + time.Duration(c.Pods)*60*time.Millisecond
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 5 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = 31
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// workload is one Deployment of the trace: its share of the pods, its
// pods' requests and what constrains them.
type workload struct {
	name     string
	share    float64
	cpu, mem string
	// spread: a zone topology spread (maxSkew 1); antiAffinity: one pod a
	// node (required, by hostname); pdb: a PDB of maxUnavailable 10%.
	spread, antiAffinity, pdb bool
	// phase shifts the workload's curve.
	phase float64
}

// workloads: six Deployments. The anti-affinity one is small (each pod takes
// a node of its own).
var workloads = []workload{
	{name: "web", share: 0.30, cpu: "500m", mem: "1Gi", phase: 0},
	{name: "api", share: 0.20, cpu: "1", mem: "2Gi", spread: true, phase: 1},
	{name: "worker", share: 0.20, cpu: "1500m", mem: "3Gi", phase: 2},
	{name: "cache", share: 0.10, cpu: "750m", mem: "4Gi", pdb: true, phase: 3},
	{name: "batch", share: 0.18, cpu: "1", mem: "1Gi", phase: 4},
	{name: "singleton", share: 0.02, cpu: "500m", mem: "512Mi", antiAffinity: true, phase: 5},
}

// base is a workload's replicas at the build-up.
func (w workload) base(pods int) int {
	return max(1, int(math.Round(w.share*float64(pods))))
}

// Trace is the seeded sequence of replica counts, one row a step, the same
// for every controller: each workload moves by 10-30% a step, up or down,
// following a slow curve around its base (±30%).
func Trace(cfg Config) [][]int {
	rng := rand.New(rand.NewSource(cfg.Seed))
	steps := int(cfg.Duration / cfg.Step)
	out := make([][]int, steps)
	cur := make([]int, len(workloads))
	for i, w := range workloads {
		cur[i] = w.base(cfg.Pods)
	}
	for s := 0; s < steps; s++ {
		row := make([]int, len(workloads))
		for i, w := range workloads {
			base := float64(w.base(cfg.Pods))
			// The curve: one period over the churn.
			target := base * (1 + 0.3*math.Sin(2*math.Pi*float64(s+1)/float64(max(steps, 1))+w.phase))
			move := 0.10 + 0.20*rng.Float64()
			dir := 1.0
			if float64(cur[i]) > target || (float64(cur[i]) == target && rng.Intn(2) == 0) {
				dir = -1
			}
			next := int(math.Round(float64(cur[i]) * (1 + dir*move)))
			if next == cur[i] {
				next += int(dir)
			}
			// Stay within ±50% of the base.
			next = min(max(next, max(1, int(0.5*base))), int(math.Ceil(1.5*base)))
			row[i], cur[i] = next, next
		}
		out[s] = row
	}
	return out
}

// Manifests are the NodeClass, the NodePool (types of up to 8 cores,
// consolidation when empty or underutilized after 30 s, a 10% budget),
// the Deployments at 0 replicas and the PDB.
func Manifests() string {
	docs := []string{nodeClass, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ` + PoolName + `}
spec:
  template:
    metadata:
      labels: {` + revisionLabel + `: "1"}
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: kubernetes.io/os, operator: In, values: [linux]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}
        - {key: karpenter.kwok.sh/instance-cpu, operator: Lt, values: ["9"]}
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{nodes: "10%"}]`}
	for _, w := range workloads {
		var extra string
		if w.spread {
			extra += `
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: ` + w.name + `}}}`
		}
		if w.antiAffinity {
			extra += `
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: ` + w.name + `}}}`
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s, soak: "true"}
    spec:
      terminationGracePeriodSeconds: 0%[5]s
      containers:
        - {name: pause, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: %[3]s, memory: %[4]s}}}`,
			w.name, Namespace, w.cpu, w.mem, extra))
		if w.pdb {
			docs = append(docs, fmt.Sprintf(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  maxUnavailable: 10%%
  selector: {matchLabels: {app: %[1]s}}`, w.name, Namespace))
		}
	}
	return strings.Join(docs, "\n---\n") + "\n"
}

// Controller starts the controller under test on a control plane, with
// kubeconfig (it authenticates as User, whose requests the API server's
// audit log records), and says where its metrics are.
type Controller struct {
	Name  string
	Start func(cp *controlplane.ControlPlane, kubeconfig string) (pid, metricsPort int, err error)
	// Stop, when set, ends a controller Start did not spawn (one running
	// in the test's process), before the control plane stops.
	Stop func()
}

// User is the identity the controller under test authenticates as
// (system:masters): the API server audits its requests and no one else's,
// which counts them whatever metrics the controller exports.
const User = "karpenter-soak"

// auditPolicy records the controller's requests, once each (when the
// response completes), without bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    users: [` + User + `]
  - level: None
`

// auditBodiesPolicy is auditPolicy with the bodies of the controller's
// NodeClaim (metadata and status) and Node patches.
const auditBodiesPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Request
    users: [` + User + `]
    verbs: [patch]
    resources:
      - {group: "", resources: [nodes]}
      - {group: karpenter.sh, resources: [nodeclaims, nodeclaims/status]}
  - level: Metadata
    users: [` + User + `]
  - level: None
`

// Sample is one row of the recording.
type Sample struct {
	At             time.Duration
	RSSMiB, CPUSec float64
	// Requests are the API server's requests since the previous sample,
	// by verb, per second.
	Requests         map[string]float64
	Pending          int
	OldestPending    time.Duration
	Nodes, Claims    int
	CostPerHour      float64
	ControllerCalls  float64
	ControllerCallsS float64
}

// Result is what a soak measured.
type Result struct {
	Controller string
	Config     Config
	// BuildUp is the time from the build-up's scale-up to every pod bound
	// (0: not reached).
	BuildUp time.Duration
	Samples []Sample
	// P50, P99 are pending-to-bound latencies of the pods created during
	// the churn; Bound how many of them were bound.
	P50, P99 time.Duration
	Bound    int
	// Evictions during the churn and per hour of churn; EvictionsSettled
	// from the churn's start to the end of settling.
	Evictions, EvictionsPerHour, EvictionsSettled float64
	// Settled is how long settling took after the churn, -1 when it did
	// not within SettleTimeout; DriftLeft the Nodes still of the template
	// before the drift when settling ended.
	Settled   time.Duration
	DriftLeft int
	// Cost ($/h) at the churn's start, middle and end, and the mean of
	// every sample over the churn: a churn's fleet swings with each step,
	// so three samples say little about what the hour cost.
	CostStart, CostMid, CostEnd, CostMean float64
	PeakRSSMiB, CPUSeconds                float64
	// RSSLastHalf are the min and max RSS over the last half of the churn
	// (the last 30 minutes of an hour).
	RSSMinLate, RSSMaxLate float64
	// RSSMeanMinLate and RSSMeanMaxLate are the least and greatest of the
	// 5-minute means of RSS over the last half of the churn: single
	// samples swing with each collection, the means show a trend.
	RSSMeanMinLate, RSSMeanMaxLate float64
	// APIRequests are all the API server's requests during the soak (every
	// client: the controller, kcm, scheduler, kwok, the driver), by verb;
	// ControllerRequests the controller's own client-go count (-1: it
	// exports none); ControllerAudited its requests by verb and resource
	// (refusals apart, with their status code) as the API
	// server's audit log records them.
	APIRequests            map[string]float64
	APIRequestsTotal       float64
	ControllerRequests     float64
	ControllerAudited      map[string]float64
	ControllerAuditedTotal float64
	// StatusWrites and NodeWrites are the controller's NodeClaim status
	// and Node patches by what they changed (Writes), with AuditDir.
	StatusWrites, NodeWrites map[string]float64
	// ControllerEvents are the Events the controller created during the
	// soak, by reason: one per Event object, that is one CREATE each (a
	// repeat the recorder folds into an existing Event is a PATCH).
	ControllerEvents map[string]float64
	// EventMessages are those Events, one line each: created, reason,
	// kind, name and message, tab-separated.
	EventMessages []string
	// End state after settling.
	// EvictionLog is each of the controller's successful evictions (the
	// audit log's), with the node the pod was bound to and when the pod was
	// created, in order; ChurnStart, DriftAt and ChurnEnd are the wall
	// clock of the churn's start, the drift and the churn's end, so that the
	// evictions can be told apart by what disrupted their node (the
	// controller's "disrupting node(s)" log lines name the nodes).
	EvictionLog                   []Eviction
	ChurnStart, DriftAt, ChurnEnd time.Time
	// EvictionsByReason are the churn's evictions by the method of the
	// command that disrupted each pod's Node (EvictionsByReason).
	EvictionsByReason            map[string]float64
	PendingAtEnd                 int
	NodesWithoutClaim            []string
	ClaimsWithoutNode            []string
	NodesAtEnd, ClaimsAtEnd      int
	Panics                       []string
	ControllerLog                string
	BuildUpPending, BuildUpNodes int
}

// Eviction is one successful eviction of the controller.
type Eviction struct {
	At         time.Time
	Pod, Node  string
	PodCreated time.Time
}

// prices are upstream kwok's catalog prices by type/capacity type/zone.
func prices() (map[string]float64, error) {
	its, err := kwok.LoadCatalog(kwok.CatalogUpstreamKWOK)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, it := range its {
		for _, o := range it.Offerings {
			out[it.Name+"/"+o.CapacityType+"/"+o.Zone] = o.Price
		}
	}
	return out, nil
}

// recorder watches pods and nodes and samples the controller.
type recorder struct {
	start time.Time
	pid   int
	port  int
	cp    *controlplane.ControlPlane
	price map[string]float64

	mu sync.Mutex
	// created is when a pod was first seen unbound; bound when first seen
	// bound.
	created, bound map[types.UID]time.Time
	nodes          map[string]*corev1.Node
	// placed is the node each soak pod (namespace/name) was last seen
	// bound to, and when it was created.
	placed  map[string]placement
	samples []Sample
	lastReq map[string]float64
	lastAt  time.Time
}

// placement is where a pod ran.
type placement struct {
	node    string
	created time.Time
}

func (r *recorder) observePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels["soak"] != "true" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if pod.Spec.NodeName != "" && r.placed != nil {
		r.placed[pod.Namespace+"/"+pod.Name] = placement{node: pod.Spec.NodeName, created: pod.CreationTimestamp.Time}
	}
	if _, seen := r.created[pod.UID]; !seen {
		if pod.Spec.NodeName != "" {
			return // bound before we saw it: not measured
		}
		r.created[pod.UID] = now
	}
	if pod.Spec.NodeName != "" {
		if _, ok := r.bound[pod.UID]; !ok {
			r.bound[pod.UID] = now
		}
	}
}

func (r *recorder) deletePod(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A pod deleted while pending keeps no latency.
	if _, bound := r.bound[pod.UID]; !bound {
		delete(r.created, pod.UID)
	}
}

func (r *recorder) observeNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	r.mu.Lock()
	r.nodes[n.Name] = n
	r.mu.Unlock()
}

func (r *recorder) deleteNode(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		r.mu.Lock()
		delete(r.nodes, n.Name)
		r.mu.Unlock()
	}
}

// nodePrice is a node's $/h from its labels.
func (r *recorder) nodePrice(n *corev1.Node) float64 {
	return nodePrice(r.price, n)
}

// nodePrice is a node's $/h in price from its labels.
func nodePrice(price map[string]float64, n *corev1.Node) float64 {
	return price[n.Labels[corev1.LabelInstanceTypeStable]+"/"+n.Labels[v1.CapacityTypeLabelKey]+"/"+n.Labels[corev1.LabelTopologyZone]]
}

// pendingNow counts pods seen unbound and not yet bound, and the oldest age.
func (r *recorder) pendingNow() (int, time.Duration) {
	now := time.Now()
	n, oldest := 0, time.Duration(0)
	for uid, at := range r.created {
		if _, ok := r.bound[uid]; ok {
			continue
		}
		n++
		oldest = max(oldest, now.Sub(at))
	}
	return n, oldest
}

// sample takes one row.
func (r *recorder) sample(ctx context.Context) {
	s := Sample{At: time.Since(r.start)}
	s.RSSMiB, _ = controlplane.ProcessMemoryMiB(r.pid, "VmRSS")
	s.CPUSec, _ = controlplane.ProcessCPUSeconds(r.pid)
	req, _ := apiRequests(ctx, r.cp)
	var claims v1.NodeClaimList
	if err := r.cp.Client.List(ctx, &claims); err == nil {
		s.Claims = len(claims.Items)
	}
	s.ControllerCalls = controllerRequests(ctx, r.port)
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Pending, s.OldestPending = r.pendingNow()
	s.Nodes = len(r.nodes)
	for _, n := range r.nodes {
		s.CostPerHour += r.nodePrice(n)
	}
	now := time.Now()
	if r.lastReq != nil && req != nil {
		dt := now.Sub(r.lastAt).Seconds()
		s.Requests = map[string]float64{}
		for verb, v := range req {
			s.Requests[verb] = (v - r.lastReq[verb]) / dt
		}
		if n := len(r.samples); n > 0 && r.samples[n-1].ControllerCalls >= 0 && s.ControllerCalls >= 0 {
			s.ControllerCallsS = (s.ControllerCalls - r.samples[n-1].ControllerCalls) / dt
		}
	}
	if req != nil {
		r.lastReq, r.lastAt = req, now
	}
	r.samples = append(r.samples, s)
}

// Run soaks one controller on a control plane of its own, which it stops
// before returning.
func Run(ctx context.Context, cfg Config, ctrl Controller) (*Result, error) {
	cfg = cfg.Defaults()
	logf := cfg.Logf
	res := &Result{Controller: ctrl.Name, Config: cfg}
	price, err := prices()
	if err != nil {
		return nil, err
	}
	policy := auditPolicy
	if cfg.AuditDir != "" {
		policy = auditBodiesPolicy
	}
	l, err := launch(ctx, ctrl, []string{PoolName}, policy, func(ctx context.Context, cp *controlplane.ControlPlane) error {
		return controlplane.Apply(ctx, cp.Client, []byte(Manifests()))
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		res.ControllerLog = l.stop()
		res.Panics = Panics(res.ControllerLog)
		res.EvictionsByReason = EvictionsByReason(res.EvictionLog, DisruptedNodes(res.ControllerLog), res.ChurnStart, res.ChurnEnd)
	}()
	cp, pid, port := l.cp, l.pid, l.port

	rec := &recorder{start: time.Now(), pid: pid, port: port, cp: cp, price: price,
		created: map[types.UID]time.Time{}, bound: map[types.UID]time.Time{}, nodes: map[string]*corev1.Node{},
		placed: map[string]placement{}}
	factory := informers.NewSharedInformerFactory(cp.Kubernetes, 0)
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: rec.observePod, UpdateFunc: func(_, o any) { rec.observePod(o) }, DeleteFunc: rec.deletePod,
	}); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: rec.observeNode, UpdateFunc: func(_, o any) { rec.observeNode(o) }, DeleteFunc: rec.deleteNode,
	}); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	defer factory.Shutdown()
	defer close(stop)

	apiStartAt := time.Now()
	apiStart, err := apiRequests(ctx, cp)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	ctrlStart := controllerRequests(ctx, port)
	sampling := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(cfg.Sample)
		defer t.Stop()
		for {
			rec.sample(ctx)
			select {
			case <-sampling:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	stopSampling := func() {
		select {
		case <-sampling:
		default:
			close(sampling)
			<-samplerDone
		}
	}
	defer stopSampling()

	// Build-up.
	buildStart := time.Now()
	for _, w := range workloads {
		if err := scale(ctx, cp, w.name, w.base(cfg.Pods)); err != nil {
			return nil, err
		}
	}
	logf("%s: building up %d pods", ctrl.Name, cfg.Pods)
	if waitFor(ctx, cfg.BuildTimeout, func() bool { return l.exited() != nil || boundAll(ctx, cp) }) {
		res.BuildUp = time.Since(buildStart)
	}
	if err := l.exited(); err != nil {
		return nil, err
	}
	rec.mu.Lock()
	res.BuildUpPending, _ = rec.pendingNow()
	res.BuildUpNodes = len(rec.nodes)
	rec.mu.Unlock()
	logf("%s: build-up %s (%d pending, %d nodes)", ctrl.Name, res.BuildUp.Round(time.Second), res.BuildUpPending, res.BuildUpNodes)

	// Churn.
	churnStart := time.Now()
	res.ChurnStart = churnStart
	evStart := evictions(ctx, cp)
	churnFrom := len(rec.samplesSnapshot())
	waitCPU := func() error { return nil }
	if cfg.ProfileDir != "" {
		waitCPU = cpuProfile(ctx, port, cfg.Duration, filepath.Join(cfg.ProfileDir, ctrl.Name+"-cpu.pb.gz"))
	}
	trace := Trace(cfg)
	drifted := false
	for s, row := range trace {
		if !drifted && time.Duration(s)*cfg.Step >= cfg.Duration/2 {
			drifted = true
			if err := drift(ctx, cp); err != nil {
				return nil, err
			}
			res.DriftAt = time.Now()
			logf("%s: drift at %s", ctrl.Name, time.Since(churnStart).Round(time.Second))
		}
		for i, w := range workloads {
			if err := scale(ctx, cp, w.name, row[i]); err != nil {
				return nil, err
			}
		}
		if err := l.exited(); err != nil {
			return nil, err
		}
		last := rec.lastSample()
		logf("%s: step %d/%d at %s: replicas %v; %d nodes, %d pending (oldest %s), $%.2f/h, RSS %.0f MiB",
			ctrl.Name, s+1, len(trace), time.Since(churnStart).Round(time.Second), row, last.Nodes, last.Pending,
			last.OldestPending.Round(time.Second), last.CostPerHour, last.RSSMiB)
		next := churnStart.Add(time.Duration(s+1) * cfg.Step)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(next)):
		}
	}
	if !drifted {
		if err := drift(ctx, cp); err != nil {
			return nil, err
		}
	}
	churn := time.Since(churnStart)
	res.ChurnEnd = time.Now()
	if cfg.ProfileDir != "" {
		if err := heapProfile(ctx, port, filepath.Join(cfg.ProfileDir, ctrl.Name+"-heap.pb.gz")); err != nil {
			logf("%s: no heap profile: %v", ctrl.Name, err)
		}
		if err := waitCPU(); err != nil {
			logf("%s: no CPU profile: %v", ctrl.Name, err)
		}
	}
	res.Evictions = evictions(ctx, cp) - evStart
	res.EvictionsPerHour = res.Evictions / churn.Hours()
	churnTo := len(rec.samplesSnapshot())

	// Settle: every pod bound, every NodeClaim with its Node and back, and
	// (SettleDrift) no Node left of the template before the drift. The end
	// state is the one the settling saw last: disruption goes on after the
	// churn (a drifted node replaced later evicts its pods again), so a pod
	// briefly pending after the cluster settled was not left pending.
	// Waiting for the drift to be done makes the evictions to the end of
	// settling the same work for every controller: one that drifts faster
	// than another has evicted more by the churn's end without evicting
	// more in all.
	settleStart := time.Now()
	settled := waitFor(ctx, cfg.SettleTimeout, func() bool {
		if l.exited() != nil {
			return true
		}
		res.PendingAtEnd = pendingCount(ctx, cp)
		var err, oldErr error
		res.NodesWithoutClaim, res.ClaimsWithoutNode, err = leaks(ctx, cp)
		res.DriftLeft, oldErr = preDriftNodes(ctx, cp)
		return err == nil && oldErr == nil && boundAll(ctx, cp) && res.PendingAtEnd == 0 &&
			len(res.NodesWithoutClaim) == 0 && len(res.ClaimsWithoutNode) == 0 && (res.DriftLeft == 0 || !cfg.SettleDrift)
	})
	res.Settled = -1
	if settled {
		res.Settled = time.Since(settleStart)
	}
	if err := l.exited(); err != nil {
		return nil, err
	}
	res.EvictionsSettled = evictions(ctx, cp) - evStart
	stopSampling()
	res.PeakRSSMiB, _ = controlplane.ProcessMemoryMiB(pid, "VmHWM")
	res.CPUSeconds, _ = controlplane.ProcessCPUSeconds(pid)
	if apiEnd, err := apiRequests(ctx, cp); err == nil {
		res.APIRequests = map[string]float64{}
		for verb, v := range apiEnd {
			res.APIRequests[verb] = v - apiStart[verb]
			res.APIRequestsTotal += v - apiStart[verb]
		}
	}
	res.ControllerRequests = -1
	if end := controllerRequests(ctx, port); end >= 0 && ctrlStart >= 0 {
		res.ControllerRequests = end - ctrlStart
	}
	if res.ControllerAudited, err = audited(cp.AuditLogPath, apiStartAt); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	for _, v := range res.ControllerAudited {
		res.ControllerAuditedTotal += v
	}
	if cfg.AuditDir != "" {
		kept := filepath.Join(cfg.AuditDir, ctrl.Name+"-audit.log")
		if err := keepAudit(cp.AuditLogPath, apiStartAt, kept); err != nil {
			logf("%s: audit log not kept: %v", ctrl.Name, err)
		} else if res.StatusWrites, res.NodeWrites, err = Writes(kept); err != nil {
			logf("%s: writes not classified: %v", ctrl.Name, err)
		}
	}
	if res.EvictionLog, err = auditedEvictions(cp.AuditLogPath, apiStartAt); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	rec.mu.Lock()
	for i := range res.EvictionLog {
		if p, ok := rec.placed[res.EvictionLog[i].Pod]; ok {
			res.EvictionLog[i].Node, res.EvictionLog[i].PodCreated = p.node, p.created
		}
	}
	rec.mu.Unlock()
	if res.ControllerEvents, res.EventMessages, err = controllerEvents(ctx, cp, apiStartAt); err != nil {
		return nil, fmt.Errorf("listing the controller's events: %w", err)
	}
	var nodes corev1.NodeList
	if cp.Client.List(ctx, &nodes) == nil {
		res.NodesAtEnd = len(nodes.Items)
	}
	var claims v1.NodeClaimList
	if cp.Client.List(ctx, &claims) == nil {
		res.ClaimsAtEnd = len(claims.Items)
	}

	rec.mu.Lock()
	res.Samples = append([]Sample(nil), rec.samples...)
	var lat []time.Duration
	for uid, created := range rec.created {
		if created.Before(churnStart) {
			continue
		}
		if b, ok := rec.bound[uid]; ok {
			lat = append(lat, b.Sub(created))
		}
	}
	rec.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.Bound = len(lat)
	res.P50, res.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	churnSamples := res.Samples[min(churnFrom, len(res.Samples)):min(churnTo, len(res.Samples))]
	if n := len(churnSamples); n > 0 {
		res.CostStart, res.CostMid, res.CostEnd = churnSamples[0].CostPerHour, churnSamples[n/2].CostPerHour, churnSamples[n-1].CostPerHour
		late := churnSamples[n/2:]
		res.RSSMinLate, res.RSSMaxLate = math.Inf(1), 0
		for _, s := range late {
			res.RSSMinLate, res.RSSMaxLate = math.Min(res.RSSMinLate, s.RSSMiB), math.Max(res.RSSMaxLate, s.RSSMiB)
		}
		res.CostMean = mean(churnSamples, func(s Sample) float64 { return s.CostPerHour })
		res.RSSMeanMinLate, res.RSSMeanMaxLate = math.Inf(1), 0
		for _, m := range windowMeans(late, 5*time.Minute, func(s Sample) float64 { return s.RSSMiB }) {
			res.RSSMeanMinLate, res.RSSMeanMaxLate = math.Min(res.RSSMeanMinLate, m), math.Max(res.RSSMeanMaxLate, m)
		}
	}
	return res, nil
}

func (r *recorder) samplesSnapshot() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.samples
}

func (r *recorder) lastSample() Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return Sample{}
	}
	return r.samples[len(r.samples)-1]
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// scale sets a Deployment's replicas.
func scale(ctx context.Context, cp *controlplane.ControlPlane, name string, replicas int) error {
	d := &appsv1.Deployment{}
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	d.Name, d.Namespace = name, Namespace
	if err := cp.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("scaling %s to %d: %w", name, replicas, err)
	}
	return nil
}

// revisionLabel is the NodePool's template label drift changes from "1"
// to "2".
const revisionLabel = "soak.example.io/revision"

// drift changes the NodePool's template label: every node drifts.
func drift(ctx context.Context, cp *controlplane.ControlPlane) error {
	np := &v1.NodePool{}
	np.Name = PoolName
	patch := []byte(`{"spec":{"template":{"metadata":{"labels":{"` + revisionLabel + `":"2"}}}}}`)
	if err := cp.Client.Patch(ctx, np, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("drifting the pool: %w", err)
	}
	return nil
}

// boundAll: every Deployment has its replicas and no soak pod is unbound.
func boundAll(ctx context.Context, cp *controlplane.ControlPlane) bool {
	var ds appsv1.DeploymentList
	if err := cp.Client.List(ctx, &ds, client.InNamespace(Namespace)); err != nil {
		return false
	}
	want := 0
	for _, d := range ds.Items {
		if d.Spec.Replicas != nil {
			want += int(*d.Spec.Replicas)
		}
	}
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"soak": "true"}); err != nil {
		return false
	}
	bound := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			return false
		}
		bound++
	}
	return bound >= want
}

// pendingCount is the soak pods left unbound.
func pendingCount(ctx context.Context, cp *controlplane.ControlPlane) int {
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"soak": "true"}); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName == "" {
			n++
		}
	}
	return n
}

// leaks are the Nodes of the pool without a NodeClaim and the NodeClaims
// (launched more than a minute ago, not being deleted) without a Node.
func leaks(ctx context.Context, cp *controlplane.ControlPlane) (nodes, claims []string, err error) {
	var nl corev1.NodeList
	if err := cp.Client.List(ctx, &nl); err != nil {
		return nil, nil, err
	}
	var cl v1.NodeClaimList
	if err := cp.Client.List(ctx, &cl); err != nil {
		return nil, nil, err
	}
	byProvider := map[string]bool{}
	for _, n := range nl.Items {
		byProvider[n.Spec.ProviderID] = true
	}
	claimed := map[string]bool{}
	for _, c := range cl.Items {
		if c.Status.ProviderID != "" {
			claimed[c.Status.ProviderID] = true
		}
		if c.DeletionTimestamp == nil && time.Since(c.CreationTimestamp.Time) > time.Minute &&
			(c.Status.ProviderID == "" || !byProvider[c.Status.ProviderID]) {
			claims = append(claims, c.Name)
		}
	}
	for _, n := range nl.Items {
		if _, ours := n.Labels[v1.NodePoolLabelKey]; !ours {
			continue
		}
		if n.DeletionTimestamp == nil && !claimed[n.Spec.ProviderID] {
			nodes = append(nodes, n.Name)
		}
	}
	return nodes, claims, nil
}

// preDriftNodes counts the pool's Nodes still of the template before the
// drift (its revision label is the one drift changes).
func preDriftNodes(ctx context.Context, cp *controlplane.ControlPlane) (int, error) {
	var nl corev1.NodeList
	if err := cp.Client.List(ctx, &nl, client.MatchingLabels{v1.NodePoolLabelKey: PoolName, revisionLabel: "1"}); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	return len(nl.Items), nil
}

// EventComponent is the component the controllers under test (ours and
// upstream's) report their Events as.
const EventComponent = "karpenter"

// controllerEvents counts the Events of EventComponent created from since
// on, by reason.
func controllerEvents(ctx context.Context, cp *controlplane.ControlPlane, since time.Time) (map[string]float64, []string, error) {
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		return nil, nil, err
	}
	var messages []string
	// Creation timestamps have a second's resolution.
	since = since.Truncate(time.Second)
	out := map[string]float64{}
	for _, e := range events.Items {
		if e.Source.Component != EventComponent && e.ReportingController != EventComponent {
			continue
		}
		if e.CreationTimestamp.Time.Before(since) {
			continue
		}
		out[e.Reason]++
		messages = append(messages, fmt.Sprintf("%s\t%s\t%s\t%s\t%s", e.CreationTimestamp.UTC().Format(time.RFC3339), e.Reason,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
	}
	sort.Strings(messages)
	return out, messages, nil
}

// evictions is the API server's count of pod evictions.
func evictions(ctx context.Context, cp *controlplane.ControlPlane) float64 {
	fams, err := apiMetrics(ctx, cp)
	if err != nil {
		return 0
	}
	total := 0.0
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		l := labels(m.GetLabel())
		if l["resource"] == "pods" && l["subresource"] == "eviction" && l["verb"] == "POST" || l["resource"] == "pods" && l["subresource"] == "eviction" && l["verb"] == "CREATE" {
			if c := l["code"]; c == "201" || c == "200" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// apiRequests is the API server's apiserver_request_total by verb.
func apiRequests(ctx context.Context, cp *controlplane.ControlPlane) (map[string]float64, error) {
	fams, err := apiMetrics(ctx, cp)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		out[labels(m.GetLabel())["verb"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

func apiMetrics(ctx context.Context, cp *controlplane.ControlPlane) (map[string]*dto.MetricFamily, error) {
	raw, err := cp.Kubernetes.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseMetrics(string(raw))
}

// controllerRequests is the controller's own client-go request count
// (rest_client_requests_total, which controller-runtime registers), -1
// when it cannot be read.
func controllerRequests(ctx context.Context, port int) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	fams, err := parseMetrics(sb.String())
	if err != nil {
		return -1
	}
	f, ok := fams["rest_client_requests_total"]
	if !ok {
		return -1
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total
}

func parseMetrics(text string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(text))
}

// Panics are the lines of a log that tell of a panic.
func Panics(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "panic:") || strings.Contains(line, "Observed a panic") || strings.Contains(line, "goroutine ") && strings.Contains(line, "[running]") {
			if len(line) > 400 {
				line = line[:400] + "..."
			}
			out = append(out, line)
		}
	}
	return out
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Second)
	}
	return false
}

func labels(ls []*dto.LabelPair) map[string]string {
	out := make(map[string]string, len(ls))
	for _, l := range ls {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// audited counts the audit log's events of User from since on, by verb.
func audited(path string, since time.Time) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string                    `json:"verb"`
			User      struct{ Username string } `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus    struct{ Code int } `json:"responseStatus"`
			RequestReceivedAt time.Time          `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != User || ev.RequestReceivedAt.Before(since) {
			continue
		}
		// By verb and resource, and refusals apart (a 409 is a write that
		// lost a race and will be made again).
		key := strings.ToUpper(ev.Verb) + " " + ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			key += "/" + ev.ObjectRef.Subresource
		}
		if ev.ResponseStatus.Code >= 400 {
			key += fmt.Sprintf(" (%d)", ev.ResponseStatus.Code)
		}
		out[key]++
	}
	return out, sc.Err()
}

// keepAudit copies the audit log's events of User from since on (those
// audited counts) to path.
func keepAudit(path string, since time.Time, to string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			User              struct{ Username string } `json:"user"`
			RequestReceivedAt time.Time                 `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != User || ev.RequestReceivedAt.Before(since) {
			continue
		}
		w.Write(sc.Bytes())
		w.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		out.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// auditedEvictions are User's successful evictions in the audit log from
// since on, in order.
func auditedEvictions(path string, since time.Time) ([]Eviction, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Eviction
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			User      struct{ Username string } `json:"user"`
			ObjectRef struct {
				Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus    struct{ Code int } `json:"responseStatus"`
			RequestReceivedAt time.Time          `json:"requestReceivedTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != User || ev.RequestReceivedAt.Before(since) ||
			ev.ObjectRef.Subresource != "eviction" || ev.ResponseStatus.Code >= 300 {
			continue
		}
		out = append(out, Eviction{At: ev.RequestReceivedAt, Pod: ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, sc.Err()
}
