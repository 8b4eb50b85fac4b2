package benchmark

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// The trace suite is the planner's test set apart from the benchmarks its
// constants were first chosen on (Consolidation, Churn, ScaleIn): clusters
// with the constraints those lack (zone spread, anti-affinity, PDBs,
// do-not-disrupt pods, weighted NodePools, spot and on-demand in one pool,
// capped pools, budgets below 100%), driven through scale-ups, scale-ins
// and slow churn. Traces marked HeldOut are the half no constant may be
// chosen on: their figures are reported, never tuned against.

// Deployment is one workload of a trace.
type Deployment struct {
	Name       string
	CPU        int64 // millicores per pod
	Memory     int64 // MiB per pod
	Pool       string
	ZoneSpread bool // topology spread over zones, maxSkew 1, DoNotSchedule
	// AntiAffinity: at most one of its pods per node (required).
	AntiAffinity bool
	// PDB is the maxUnavailable percentage of its PodDisruptionBudget (0:
	// none).
	PDB int
	// DoNotDisrupt: every DoNotDisrupt-th pod carries
	// karpenter.sh/do-not-disrupt (0: none).
	DoNotDisrupt int
}

// TracePool is one NodePool of a trace.
type TracePool struct {
	Name   string
	Weight int32
	// Budget is the nodes budget ("20%"; "" is 100%).
	Budget       string
	Requirements []v1.NodeSelectorRequirementWithMinValues
}

// Trace is one scenario: pools, workloads, and the replica counts of each
// step. Step 0 is the scale-up from nothing (provisioned, not
// consolidated); after every later step consolidation runs until a pass
// finds nothing.
type Trace struct {
	Name    string
	HeldOut bool
	Catalog string
	Daemon  bool
	Pools   []TracePool
	Deps    []Deployment
	// Replicas[step][deployment].
	Replicas [][]int
	// StepEvery is the time between steps (the first consolidation of a
	// step runs a minute after it).
	StepEvery time.Duration
	Seed      int64
}

// PassEvery is the simulated time a consolidation pass takes: the 15 s
// validation delay and the pass's own work.
const PassEvery = 20 * time.Second

// podStartup is how long a new pod is not Ready: a PDB counts it as
// unavailable meanwhile, so evictions under a PDB are throttled.
const podStartup = 30 * time.Second

// provisionBatch is how many pending pods a provisioning round places.
const provisionBatch = 25

// QuietFor is how long a step's consolidation goes on without a command
// before the step counts as settled: longer than the planner's 5 minute
// cool-down, so that what it holds back and takes later is measured.
const QuietFor = 6 * time.Minute

// maxPassesPerStep bounds a step's consolidation, 40 simulated minutes (a
// trace that has not settled by then is reported as capped).
const maxPassesPerStep = 120

// TraceResult is one algorithm's run of a trace.
type TraceResult struct {
	Trace, Algorithm string
	HeldOut          bool
	Evictions        int
	// Reevictions are evictions of pods an earlier move evicted (their
	// replacements, under new names).
	Reevictions int
	Commands    int
	Fresh       int
	// PriceEnd is the fleet's $/h at the end.
	PriceEnd float64
	// AllocPerRequest is the fleet's allocatable CPU over the application
	// pods' CPU requests at the end, MemPerRequest the same for memory.
	AllocPerRequest, MemPerRequest float64
	// Passes counts consolidation passes, quiet ones included; Busy the
	// passes that issued commands, Settle the simulated time from each
	// step's first pass to the end of its last busy one, summed over
	// steps.
	Passes, Busy int
	Settle       time.Duration
	Capped       bool
	// Steps are the consolidating steps' own figures, in order (step 1
	// first).
	Steps []StepResult
	// Moves logs every command carried out, one line each: when, what it
	// did to which nodes (instance type, pods evicted), the replacements'
	// cheapest types and the $/h saved (BENCH_TRACE_MOVES prints them).
	Moves []string
}

// StepResult is one consolidating step of a trace run: the fleet's nodes
// and $/h when its consolidation started, the evictions of its passes and
// the fleet's $/h when its consolidation stopped.
type StepResult struct {
	NodesStart int
	PriceStart float64
	Evictions  int
	PriceEnd   float64
}

// run plays the trace with alg.
func (t Trace) run(alg Algorithm) (TraceResult, error) {
	r, _, err := t.playResult(alg)
	return r, err
}

// play plays the trace with alg and returns the cluster it ends with.
func (t Trace) play(alg Algorithm) (*Cluster, error) {
	_, c, err := t.playResult(alg)
	return c, err
}

func (t Trace) playResult(alg Algorithm) (TraceResult, *Cluster, error) {
	c, err := t.cluster()
	if err != nil {
		return TraceResult{}, nil, err
	}
	r, err := t.steps(c, alg)
	return r, c, err
}

// steps plays every step of the trace on c.
func (t Trace) steps(c *Cluster, alg Algorithm) (TraceResult, error) {
	rng := rand.New(rand.NewSource(t.Seed))
	r := TraceResult{Trace: t.Name, Algorithm: alg.Name, HeldOut: t.HeldOut}
	methods := disruption.MethodsOf(alg.Strategy)
	ev0, fr0, cm0, re0 := c.Evictions, c.Fresh, c.Commands, c.Reevictions
	for s := range t.Replicas {
		if err := t.arrive(c, s, rng); err != nil {
			return r, err
		}
		if s == 0 {
			continue
		}
		ev1, start, nodes := c.Evictions, c.Price(), len(c.Snap.Nodes)
		stepAt := c.Snap.Now
		c.Snap.Now = c.Snap.Now.Add(time.Minute)
		settled := c.Snap.Now
		for pass := 0; ; pass++ {
			if pass == maxPassesPerStep {
				r.Capped = true
				break
			}
			t.refresh(c)
			var sim disruption.Simulator
			if alg.Simulator != nil {
				sim = alg.Simulator(c.Snap)
			}
			d, err := disruption.Disrupt(c.Snap, methods, sim)
			if err != nil {
				return r, fmt.Errorf("%s step %d: %w", t.Name, s, err)
			}
			c.applyDrain(alg)
			r.Passes++
			if len(d.Commands) > 0 {
				r.Busy++
				r.Moves = append(r.Moves, moveLines(c, s, c.Snap.Now.Sub(stepAt), d.Commands)...)
				launched, err := c.Execute(d.Commands, c.Snap.Now)
				if err != nil {
					return r, fmt.Errorf("%s step %d: %w", t.Name, s, err)
				}
				alg.executed(c.Snap.Now, d.Commands, launched)
				c.sortNodes()
				settled = c.Snap.Now.Add(PassEvery)
			}
			c.Snap.Now = c.Snap.Now.Add(PassEvery)
			// The controller keeps passing: a quiet pass ends the step only
			// once nothing has moved for QuietFor, so that moves a strategy
			// defers (the planner's cool-down) are counted too.
			if len(d.Commands) == 0 && c.Snap.Now.Sub(settled) >= QuietFor {
				break
			}
			if s+1 < len(t.Replicas) && c.Snap.Now.Sub(stepAt) >= t.StepEvery {
				break
			}
		}
		r.Settle += settled.Sub(stepAt) - time.Minute
		r.Steps = append(r.Steps, StepResult{NodesStart: nodes, PriceStart: start, Evictions: c.Evictions - ev1, PriceEnd: c.Price()})
	}
	r.Evictions, r.Fresh, r.Commands = c.Evictions-ev0, c.Fresh-fr0, c.Commands-cm0
	r.Reevictions = c.Reevictions - re0
	r.PriceEnd = c.Price()
	var alloc, req [2]float64
	for _, n := range c.Snap.Nodes {
		alloc[0] += float64(n.Node.Status.Allocatable.Cpu().MilliValue())
		alloc[1] += float64(n.Node.Status.Allocatable.Memory().Value())
		for _, p := range n.Pods {
			if disruption.Reschedulable(p) {
				q := podReq(p)
				req[0], req[1] = req[0]+q[0], req[1]+q[1]
			}
		}
	}
	if req[0] > 0 && req[1] > 0 {
		r.AllocPerRequest, r.MemPerRequest = alloc[0]/req[0], alloc[1]/req[1]
	}
	return r, nil
}

// arrive moves the cluster to step s's replicas at the step's time: the
// surplus pods removed, the missing ones provisioned. No algorithm acts
// here, so the fleet a step's consolidation starts from is the same for
// every algorithm as long as the earlier steps' consolidations were.
func (t Trace) arrive(c *Cluster, s int, rng *rand.Rand) error {
	c.Snap.Now = Epoch.Add(time.Duration(s) * t.StepEvery)
	pending := t.scale(c, s, rng)
	// Pods arrive in waves (a rollout's surge, an autoscaler's steps),
	// each provisioned on its own: one solve of a whole scale-up would
	// buy a few large nodes that consolidation has nothing to do with.
	for len(pending) > 0 {
		k := min(len(pending), provisionBatch)
		if _, err := c.Provision(pending[:k], c.Snap.Now); err != nil {
			return fmt.Errorf("%s step %d: provisioning: %w", t.Name, s, err)
		}
		pending = pending[k:]
	}
	c.sortNodes()
	return nil
}

// moveLines describes a pass's commands before they are carried out.
func moveLines(c *Cluster, step int, at time.Duration, cmds []*disruption.Command) []string {
	out := make([]string, 0, len(cmds))
	for _, cmd := range cmds {
		var cands []string
		pods := 0
		for _, cand := range cmd.Candidates {
			cands = append(cands, fmt.Sprintf("%s(%s,%s,%d)", cand.Name(), cand.Node.Node.Labels[corev1.LabelInstanceTypeStable],
				cand.Node.Node.Labels[v1.CapacityTypeLabelKey], len(cand.Reschedulable)))
			pods += len(cand.Reschedulable)
		}
		var repl []string
		for _, nc := range cmd.Replacements {
			if len(nc.InstanceTypes) > 0 {
				repl = append(repl, nc.InstanceTypes[0].Name)
			}
		}
		saving, _ := disruption.CommandSaving(c.Snap, cmd)
		out = append(out, fmt.Sprintf("step %d +%s %s %d pods %s -> %v saves $%.4f/h", step, at, cmd.Decision(), pods, strings.Join(cands, " "), repl, saving))
	}
	return out
}

// cluster is the trace's empty cluster: its pools, catalog and PDBs.
func (t Trace) cluster() (*Cluster, error) {
	cat, err := kwok.LoadCatalog(t.Catalog)
	if err != nil {
		return nil, fmt.Errorf("loading the %s catalog: %w", t.Catalog, err)
	}
	c := &Cluster{Catalog: cat, noDaemon: !t.Daemon}
	c.Snap = &disruption.Snapshot{Now: Epoch, NodePools: map[string]*v1.NodePool{}, InstanceTypes: map[string][]*scheduling.InstanceType{}}
	for _, tp := range t.Pools {
		np := tp.NodePool()
		np.Status = readyStatus()
		c.Snap.NodePools[tp.Name] = np
		c.Snap.InstanceTypes[tp.Name] = cat
		c.pools = append(c.pools, tp.Name)
	}
	for _, d := range t.Deps {
		if pdb := d.PodDisruptionBudget("default"); pdb != nil {
			c.Snap.PDBs = append(c.Snap.PDBs, pdb)
		}
	}
	return c, nil
}

// pod is a new pod of d created at the cluster's now.
func (t Trace) pod(c *Cluster, d Deployment, i int) *corev1.Pod {
	p := newPod(c.name(d.Name), d.Pool, shape{d.Name, d.CPU, d.Memory}, "ReplicaSet", d.Name)
	p.CreationTimestamp = metav1.NewTime(c.Snap.Now)
	d.constrain(&p.Spec)
	if d.DoNotDisrupt > 0 && i%d.DoNotDisrupt == 0 {
		p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	}
	return p
}

// scale moves every deployment to its count of step s: surplus pods are
// removed as a ReplicaSet removes them (the lowest pod-deletion-cost
// first, then at random), and the missing ones are returned, pending.
func (t Trace) scale(c *Cluster, s int, rng *rand.Rand) []*corev1.Pod {
	have := map[string][]*corev1.Pod{}
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			if disruption.Reschedulable(p) {
				have[p.Labels["app"]] = append(have[p.Labels["app"]], p)
			}
		}
	}
	drop := map[*corev1.Pod]bool{}
	var pending []*corev1.Pod
	var adds [][]*corev1.Pod
	for i, d := range t.Deps {
		want, cur := t.Replicas[s][i], have[d.Name]
		sort.Slice(cur, func(a, b int) bool { return cur[a].Name < cur[b].Name })
		if len(cur) > want {
			perm := rng.Perm(len(cur))
			sort.SliceStable(perm, func(a, b int) bool {
				return disruption.DeletionCost(cur[perm[a]]) < disruption.DeletionCost(cur[perm[b]])
			})
			for _, k := range perm[:len(cur)-want] {
				drop[cur[k]] = true
			}
		}
		var add []*corev1.Pod
		for k := len(cur); k < want; k++ {
			add = append(add, t.pod(c, d, k))
		}
		adds = append(adds, add)
	}
	// The deployments scale together: their new pods interleave.
	for k := 0; ; k++ {
		more := false
		for _, add := range adds {
			if k < len(add) {
				pending = append(pending, add[k])
				more = true
			}
		}
		if !more {
			break
		}
	}
	for _, n := range c.Snap.Nodes {
		kept := n.Pods[:0]
		for _, p := range n.Pods {
			if !drop[p] {
				kept = append(kept, p)
			}
		}
		n.Pods = kept
	}
	return pending
}

// refresh sets what the cluster's controllers would before a pass: a pod
// is Ready once podStartup has passed since its creation, and each PDB
// allows its maxUnavailable (rounded up, as the disruption controller
// does) less its pods that are not Ready.
func (t Trace) refresh(c *Cluster) {
	notReady := map[string]int{}
	count := map[string]int{}
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			ready := c.Snap.Now.Sub(p.CreationTimestamp.Time) >= podStartup
			status := corev1.ConditionTrue
			if !ready {
				status = corev1.ConditionFalse
				notReady[p.Labels["app"]]++
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
			count[p.Labels["app"]]++
		}
	}
	for _, pdb := range c.Snap.PDBs {
		app := pdb.Spec.Selector.MatchLabels["app"]
		allowed, _ := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, count[app], true)
		pdb.Status.DisruptionsAllowed = int32(max(0, allowed-notReady[app]))
		pdb.Status.ExpectedPods = int32(count[app])
	}
}

// Walk is a slow churn: from base, each step moves every count by a
// random ±pct percent of base, for steps steps after the first.
func Walk(base []int, steps int, pct float64, seed int64) [][]int {
	rng := rand.New(rand.NewSource(seed))
	out := [][]int{append([]int(nil), base...)}
	for s := 0; s < steps; s++ {
		prev := out[len(out)-1]
		row := make([]int, len(base))
		for i := range base {
			d := (2*rng.Float64() - 1) * pct / 100 * float64(base[i])
			row[i] = max(1, int(math.Round(float64(prev[i])+d)))
		}
		out = append(out, row)
	}
	return out
}

// Req is a pool requirement In values.
func Req(key string, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// TraceTable renders trace results, one row per trace and algorithm.
func TraceTable(rs []TraceResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %-5s %-10s %9s %7s %8s %6s %8s %7s %7s %6s %5s %8s\n",
		"trace", "half", "algorithm", "evictions", "again", "commands", "fresh", "$/h end", "cpu a/r", "mem a/r", "passes", "busy", "settle")
	for _, r := range rs {
		half := "tune"
		if r.HeldOut {
			half = "held"
		}
		capped := ""
		if r.Capped {
			capped = " (capped)"
		}
		fmt.Fprintf(&b, "%-16s %-5s %-10s %9d %7d %8d %6d %8.3f %7.3f %7.3f %6d %5d %8s%s\n",
			r.Trace, half, r.Algorithm, r.Evictions, r.Reevictions, r.Commands, r.Fresh, r.PriceEnd, r.AllocPerRequest, r.MemPerRequest, r.Passes, r.Busy, r.Settle, capped)
	}
	return b.String()
}
