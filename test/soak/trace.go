package soak

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption/benchmark"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// TraceConfig bounds an end-to-end run of an offline trace.
type TraceConfig struct {
	// Quiet is how long the node set must stay unchanged after the last
	// scale-in for the run to count as converged; Timeout bounds that wait
	// from the first scale-in; BuildTimeout bounds the scale-up.
	Quiet, Timeout, BuildTimeout time.Duration
	Logf                         func(format string, args ...any)
}

// Defaults fills what c leaves zero: the offline suite's quiet
// (benchmark.QuietFor, 6 minutes, longer than the planner's cool-down, so
// that a move it holds back is counted) within 20 minutes, 10 minutes for
// the scale-up.
func (c TraceConfig) Defaults() TraceConfig {
	if c.Quiet == 0 {
		c.Quiet = benchmark.QuietFor
	}
	if c.Timeout == 0 {
		c.Timeout = 20 * time.Minute
	}
	if c.BuildTimeout == 0 {
		c.BuildTimeout = 10 * time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// TraceResult is what an end-to-end run of a trace measured.
type TraceResult struct {
	Trace, Controller string
	// BuildUp is the scale-up to every pod bound (0: not reached),
	// BuildUpNodes the nodes then and BuildUpCost their $/h.
	BuildUp      time.Duration
	BuildUpNodes int
	BuildUpCost  float64
	// Convergence is the time from the first scale-in to the last change
	// of the node set (a Node added or removed); Converged says the node
	// set then stayed unchanged for Quiet within Timeout.
	Convergence time.Duration
	Converged   bool
	// Evictions are the API server's successful evictions from the first
	// scale-in on.
	Evictions float64
	// At the end: $/h of the nodes, their allocatable CPU and the bound
	// application pods' CPU requests (cores), nodes, pods left pending.
	CostEnd                float64
	AllocatableCPU, ReqCPU float64
	NodesAtEnd, Pending    int
	Panics                 []string
	ControllerLog          string
}

// nodeSet records when a Node was last added or removed.
type nodeSet struct {
	mu    sync.Mutex
	armed bool
	last  time.Time
}

func (n *nodeSet) changed(any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.armed {
		n.last = time.Now()
	}
}

// arm starts recording from now.
func (n *nodeSet) arm() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.armed, n.last = true, time.Now()
}

func (n *nodeSet) lastChange() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last
}

// RunTrace plays an offline trace (benchmark.Traces) end to end with one
// controller on a control plane of its own: the trace's NodePools, PDBs,
// DaemonSet and Deployments as objects, step 0 as a scale-up waited on
// until every pod is bound, each later step StepEvery after the previous
// one (the last one waited on until the node set is quiet). Traces on the
// upstream-kwok catalog compare every controller on the same types and
// prices.
func RunTrace(ctx context.Context, tr benchmark.Trace, cfg TraceConfig, ctrl Controller) (*TraceResult, error) {
	cfg = cfg.Defaults()
	logf := cfg.Logf
	res := &TraceResult{Trace: tr.Name, Controller: ctrl.Name}
	price, err := prices()
	if err != nil {
		return nil, err
	}
	// The application pods carry soak=true: boundAll and pendingCount
	// count them.
	objs := tr.Objects(Namespace, nodeClassRef, map[string]string{"soak": "true"})
	var pools []string
	for _, np := range objs.NodePools {
		pools = append(pools, np.Name)
	}
	l, err := launch(ctx, ctrl, pools, auditPolicy, func(ctx context.Context, cp *controlplane.ControlPlane) error {
		if err := controlplane.Apply(ctx, cp.Client, []byte(nodeClass+"\n")); err != nil {
			return err
		}
		var all []client.Object
		for _, np := range objs.NodePools {
			all = append(all, np)
		}
		for _, pdb := range objs.PDBs {
			all = append(all, pdb)
		}
		if objs.DaemonSet != nil {
			all = append(all, objs.DaemonSet)
		}
		for _, d := range objs.Deployments {
			all = append(all, d)
		}
		for _, o := range all {
			if err := cp.Client.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		res.ControllerLog = l.stop()
		res.Panics = Panics(res.ControllerLog)
	}()
	cp := l.cp

	set := &nodeSet{}
	factory := informers.NewSharedInformerFactory(cp.Kubernetes, 0)
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: set.changed, DeleteFunc: set.changed,
	}); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	defer factory.Shutdown()
	defer close(stop)

	// Scale-up.
	start := time.Now()
	if err := scaleAll(ctx, cp, tr.ReplicasAt(0)); err != nil {
		return nil, err
	}
	if waitFor(ctx, cfg.BuildTimeout, func() bool { return boundAll(ctx, cp) }) {
		res.BuildUp = time.Since(start)
	}
	res.BuildUpNodes, res.BuildUpCost, _, err = fleet(ctx, cp, price)
	if err != nil {
		return nil, err
	}
	logf("%s/%s: scale-up %s: %d nodes, $%.2f/h", tr.Name, ctrl.Name, res.BuildUp.Round(time.Second), res.BuildUpNodes, res.BuildUpCost)
	if res.BuildUp == 0 {
		return res, fmt.Errorf("%s/%s: %d pods still pending after %s of scale-up", tr.Name, ctrl.Name, pendingCount(ctx, cp), cfg.BuildTimeout)
	}

	// Scale-ins, right after the scale-up as the offline run plays them.
	evStart := evictions(ctx, cp)
	scaleIn := time.Now()
	set.arm()
	for s := 1; s < len(tr.Replicas); s++ {
		if s > 1 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Until(scaleIn.Add(time.Duration(s-1) * tr.StepEvery))):
			}
		}
		if err := scaleAll(ctx, cp, tr.ReplicasAt(s)); err != nil {
			return nil, err
		}
		// The wall clock lines the step up with the controller's log.
		logf("%s/%s: step %d at %s (%s)", tr.Name, ctrl.Name, s, time.Since(scaleIn).Round(time.Second), time.Now().UTC().Format("15:04:05.000"))
	}
	lastStep := time.Now()
	deadline := scaleIn.Add(cfg.Timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if last := set.lastChange(); time.Since(last) >= cfg.Quiet && time.Since(lastStep) >= cfg.Quiet {
			res.Converged = true
			break
		}
		time.Sleep(2 * time.Second)
	}
	res.Convergence = set.lastChange().Sub(scaleIn)
	res.Evictions = evictions(ctx, cp) - evStart
	var alloc float64
	res.NodesAtEnd, res.CostEnd, alloc, err = fleet(ctx, cp, price)
	if err != nil {
		return nil, err
	}
	res.AllocatableCPU = alloc
	res.ReqCPU, res.Pending, err = requests(ctx, cp)
	if err != nil {
		return nil, err
	}
	logf("%s/%s: %s", tr.Name, ctrl.Name, TraceSummary(res))
	return res, nil
}

// scaleAll sets every Deployment's replicas.
func scaleAll(ctx context.Context, cp *controlplane.ControlPlane, replicas map[string]int32) error {
	for name, n := range replicas {
		if err := scale(ctx, cp, name, int(n)); err != nil {
			return err
		}
	}
	return nil
}

// fleet is the Karpenter nodes (a NodePool label), their $/h and their
// allocatable CPU in cores.
func fleet(ctx context.Context, cp *controlplane.ControlPlane, price map[string]float64) (nodes int, cost, cpu float64, err error) {
	var nl corev1.NodeList
	if err := cp.Client.List(ctx, &nl); err != nil {
		return 0, 0, 0, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nl.Items {
		n := &nl.Items[i]
		if _, ok := n.Labels[v1.NodePoolLabelKey]; !ok {
			continue
		}
		nodes++
		cost += nodePrice(price, n)
		cpu += float64(n.Status.Allocatable.Cpu().MilliValue()) / 1000
	}
	return nodes, cost, cpu, nil
}

// requests is the CPU the bound application pods ask (cores) and the
// application pods left unbound.
func requests(ctx context.Context, cp *controlplane.ControlPlane) (cpu float64, pending int, err error) {
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"soak": "true"}); err != nil {
		return 0, 0, fmt.Errorf("listing pods: %w", err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			pending++
			continue
		}
		for _, c := range p.Spec.Containers {
			cpu += float64(c.Resources.Requests.Cpu().MilliValue()) / 1000
		}
	}
	return cpu, pending, nil
}

// TraceSummary is one line about a trace result.
func TraceSummary(r *TraceResult) string {
	conv := "converged"
	if !r.Converged {
		conv = "NOT converged"
	}
	return fmt.Sprintf("scale-up %s to %d nodes ($%.2f/h); %s, last node-set change %s after the scale-in; %.0f evictions; end: %d nodes, $%.2f/h, %.1f allocatable CPU for %.1f requested, %d pending, %d panics",
		r.BuildUp.Round(time.Second), r.BuildUpNodes, r.BuildUpCost, conv, r.Convergence.Round(time.Second), r.Evictions,
		r.NodesAtEnd, r.CostEnd, r.AllocatableCPU, r.ReqCPU, r.Pending, len(r.Panics))
}

// TraceTable prints, for each trace, one column per controller and, for
// each other controller when upstream-kwok ran, the ratio to it.
func TraceTable(results []*TraceResult) string {
	var order []string
	byTrace := map[string][]*TraceResult{}
	for _, r := range results {
		if _, ok := byTrace[r.Trace]; !ok {
			order = append(order, r.Trace)
		}
		byTrace[r.Trace] = append(byTrace[r.Trace], r)
	}
	rows := []tableRow[*TraceResult]{
		{"scale-up to all bound (s)", func(r *TraceResult) float64 { return r.BuildUp.Seconds() }, "%.0f"},
		{"nodes after scale-up", func(r *TraceResult) float64 { return float64(r.BuildUpNodes) }, "%.0f"},
		{"$/h after scale-up", func(r *TraceResult) float64 { return r.BuildUpCost }, "%.2f"},
		{"convergence (s)", func(r *TraceResult) float64 { return r.Convergence.Seconds() }, "%.0f"},
		{"converged (1 yes)", func(r *TraceResult) float64 { return b2f(r.Converged) }, "%.0f"},
		{"evictions", func(r *TraceResult) float64 { return r.Evictions }, "%.0f"},
		{"$/h at the end", func(r *TraceResult) float64 { return r.CostEnd }, "%.2f"},
		{"nodes at the end", func(r *TraceResult) float64 { return float64(r.NodesAtEnd) }, "%.0f"},
		{"allocatable CPU", func(r *TraceResult) float64 { return r.AllocatableCPU }, "%.1f"},
		{"requested CPU", func(r *TraceResult) float64 { return r.ReqCPU }, "%.1f"},
		{"allocatable / requested CPU", func(r *TraceResult) float64 { return ratio(r.AllocatableCPU, r.ReqCPU) }, "%.3f"},
		{"pending at the end", func(r *TraceResult) float64 { return float64(r.Pending) }, "%.0f"},
		{"panics", func(r *TraceResult) float64 { return float64(len(r.Panics)) }, "%.0f"},
	}
	var sb strings.Builder
	for _, name := range order {
		fmt.Fprintf(&sb, "trace %s\n", name)
		writeTable(&sb, byTrace[name], func(r *TraceResult) string { return r.Controller }, rows)
	}
	return sb.String()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
