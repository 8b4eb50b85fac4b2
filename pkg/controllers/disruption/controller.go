package disruption

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
	"github.com/karpenter-go/karpenter/pkg/state"
)

const controllerName = "disruption"

// Defaults, as upstream.
const (
	DefaultPollPeriod      = 10 * time.Second
	DefaultValidationDelay = 15 * time.Second
)

// Cluster is what the controller needs of cluster state.
type Cluster interface {
	Synced(ctx context.Context) bool
	Nodes() []*state.StateNode
	MarkForDeletion(names ...string)
	UnmarkForDeletion(names ...string)
}

// Launcher creates NodeClaims the way provisioning does (limits re-checked,
// hash annotations, owner reference); the provisioner implements it.
type Launcher interface {
	CreateNodeClaims(ctx context.Context, planned []*scheduling.NewNodeClaim, pools map[string]*v1.NodePool) ([]*v1.NodeClaim, error)
}

// Simulators make the simulator of a pass: over the cluster as it is, with
// ctx (disruption.SolverSimulator over the controller's snapshot.Live, as
// provisioning builds its snapshots).
type Simulators func(ctx context.Context) disruption.Simulator

// SimulateOver is Simulators over view, every snapshot built with req's
// options. Each simulator reads view once (snapshot.Memo): a pass
// simulates every candidate over one picture of the cluster instead of
// re-reading it per candidate, and validation, which makes its own
// simulator, reads it afresh.
func SimulateOver(view snapshot.View, req snapshot.Request) Simulators {
	return func(ctx context.Context) disruption.Simulator {
		return disruption.SolverSimulator{Context: ctx, View: snapshot.Memo(view), Request: req}
	}
}

// Options tune the controller; zero values are upstream's defaults.
type Options struct {
	Clock    clock.Clock
	Recorder Recorder
	// PollPeriod between passes that did nothing (10 s).
	PollPeriod time.Duration
	// ValidationDelay is how long an emptiness command waits before it is
	// checked again against fresh state (15 s); negative disables the wait.
	ValidationDelay time.Duration
	// Strategy is the consolidation algorithm (upstream's when nil); a pass
	// runs disruption.MethodsOf(Strategy).
	Strategy disruption.Strategy
	// InstanceTypes resolves each NodePool's instance types, which
	// consolidation prices nodes with (the cloud provider); without it no
	// node can be consolidated.
	InstanceTypes InstanceTypes
	// DrainDeletionCost gives the ReplicaSet pods on the nodes the strategy
	// drains disruption.DrainDeletionCost, so that scale-downs remove them
	// first.
	DrainDeletionCost bool
	// Buffers holds the nodes the last provisioning round placed
	// CapacityBuffer virtual pods on (gate CapacityBuffer; nil without):
	// they count as nominated, so no method disrupts them.
	Buffers *state.Buffers
	// IgnoreDRARequests (IGNORE_DRA_REQUESTS, as provisioning's) leaves
	// pending pods with ResourceClaims out of the pods a pass counts as
	// pending: provisioning never plans for them, so they hold no room and
	// keep no nomination alive. The simulators' request should say the
	// same.
	IgnoreDRARequests bool
	// Informers, when set, is where a pass that reads pending pods reads
	// every pod: the pod informer's store itself, not a list of copies
	// (snapshot.Live.Pods); without it the pods are listed through the
	// client.
	Informers snapshot.Informers
}

// Controller is the disruption loop.
type Controller struct {
	kube       client.Client
	cluster    Cluster
	launcher   Launcher
	simulators Simulators
	clock      clock.Clock
	events     *events
	opts       Options
	queue      *Queue
}

// NewController wires the loop and its queue.
func NewController(kube client.Client, cluster Cluster, launcher Launcher, simulators Simulators, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PollPeriod == 0 {
		opts.PollPeriod = DefaultPollPeriod
	}
	if opts.ValidationDelay == 0 {
		opts.ValidationDelay = DefaultValidationDelay
	}
	if opts.Strategy == nil {
		opts.Strategy = disruption.NewUpstream(disruption.ConsolidationOptions{})
	}
	ev := newEvents(opts.Recorder, opts.Clock)
	q := NewQueue(kube, cluster, launcher, opts.Clock, ev)
	q.types = opts.InstanceTypes
	return &Controller{
		kube: kube, cluster: cluster, launcher: launcher, simulators: simulators, clock: opts.Clock, events: ev, opts: opts,
		queue: q,
	}
}

// Queue is the orchestration queue (tests drive it directly).
func (c *Controller) Queue() *Queue { return c.queue }

// Register runs the loop and the queue on the leader.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", controllerName))
		c.loop(ctx, "disruption loop", func(ctx context.Context) time.Duration {
			r, err := c.reconcile(ctx)
			if err != nil && !errors.Is(err, errNotSynced) {
				log.FromContext(ctx).Error(err, "disrupting")
			}
			return c.nextPass(r, err)
		})
		return nil
	})); err != nil {
		return fmt.Errorf("adding disruption loop: %w", err)
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", controllerName+".queue"))
		c.loop(ctx, "disruption queue", func(ctx context.Context) time.Duration {
			c.queue.Reconcile(ctx)
			return time.Second
		})
		return nil
	}))
}

// loop runs pass until ctx ends, sleeping what pass returns; a panic in a
// pass is logged and the loop goes on.
func (c *Controller) loop(ctx context.Context, what string, pass func(context.Context) time.Duration) {
	for ctx.Err() == nil {
		wait := time.Second
		func() {
			defer func() {
				if r := recover(); r != nil {
					log.FromContext(ctx).Error(fmt.Errorf("panic: %v", r), "Observed a panic", "work", what, "stacktrace", string(debug.Stack()))
				}
			}()
			wait = pass(ctx)
		}()
		if wait <= 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(wait):
		}
	}
}

var errNotSynced = errors.New("cluster state is not synced")

// passResult is what a pass did.
type passResult struct {
	// started: a command was started.
	started bool
	// abandoned: validation dropped a command (the cluster changed under
	// it).
	abandoned bool
}

// nextPass is how long the loop waits after a pass: not at all after one
// that started a command or had one abandoned by validation (the cluster
// changed, so a fresh plan may hold where the last did not; each pass with
// commands waits out the validation delay anyway), a second while cluster
// state syncs, and the poll period otherwise.
func (c *Controller) nextPass(r passResult, err error) time.Duration {
	switch {
	case errors.Is(err, errNotSynced):
		return time.Second
	case err != nil:
		return c.opts.PollPeriod
	case r.started || r.abandoned:
		return 0
	}
	return c.opts.PollPeriod
}

// Reconcile is one pass. It reports whether a command was started.
func (c *Controller) Reconcile(ctx context.Context) (bool, error) {
	r, err := c.reconcile(ctx)
	return r.started, err
}

func (c *Controller) reconcile(ctx context.Context) (passResult, error) {
	var r passResult
	if !c.cluster.Synced(ctx) {
		return r, errNotSynced
	}
	if err := c.cleanup(ctx); err != nil {
		return r, err
	}
	began := c.clock.Now()
	snap, err := c.snapshot(ctx)
	if err != nil {
		return r, err
	}
	built := c.clock.Now()
	decision, err := c.decide(ctx, snap)
	c.publish(ctx, snap, decision)
	logPass(ctx, decision, built.Sub(began), c.clock.Since(built))
	if err != nil {
		return r, err
	}
	if err := c.drain(ctx, decision.Commands); err != nil {
		// The taint only steers the kube-scheduler; the pass goes on.
		log.FromContext(ctx).Error(err, "updating the drain taints")
	}
	// A pass's commands come from one method, or from Emptiness and the
	// planner that follows it (disruption.Follower). Each method's
	// commands are validated after one shared delay, then started, in
	// order: the planner's are validated once the empty nodes are in the
	// queue, as its plan assumed.
	waited := false
	for _, g := range decision.Groups {
		cmds := g.Commands
		if c.opts.ValidationDelay > 0 && disruption.Validated(g.Method) {
			if !waited {
				began := c.clock.Now()
				if err := c.waitValidation(ctx, decision.Commands); err != nil {
					return r, err
				}
				log.FromContext(ctx).V(1).Info("waited for validation", "seconds", c.clock.Since(began).Seconds())
				waited = true
			}
			began := c.clock.Now()
			kept, abandoned, err := disruption.Validate(c.freshState(ctx), c.opts.Strategy, g.Method, cmds)
			if err != nil {
				return r, err
			}
			for _, a := range abandoned {
				c.abandoned(ctx, a)
			}
			log.FromContext(ctx).V(1).Info("validated disruption commands", "consolidation-type", g.Method.ConsolidationType(),
				"commands", len(cmds), "kept", len(kept), "seconds", c.clock.Since(began).Seconds())
			r.abandoned = r.abandoned || len(kept) < len(cmds)
			cmds = kept
		}
		n, err := c.start(ctx, g.Method, cmds, snap)
		r.started = r.started || n > 0
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// validationPoll is how often the planner's wait for validation looks at
// its commands' candidates.
const validationPoll = time.Second

// waitValidation waits out the validation delay. Under the planner it
// looks at the commands' candidates every validationPoll, and ends the
// wait early once none of the commands has all its candidates still valid:
// validation would abandon every one, and the next pass can plan on the
// changed cluster at once instead of when the delay is over: a command
// planned just before a scale-in would otherwise wait out its 15 s with its
// candidates' pods gone. Upstream's methods wait out the whole delay.
func (c *Controller) waitValidation(ctx context.Context, cmds []*disruption.Command) error {
	deadline := c.clock.Now().Add(c.opts.ValidationDelay)
	early := c.opts.Strategy.ReadsPending()
	for {
		left := deadline.Sub(c.clock.Now())
		if left <= 0 {
			return nil
		}
		if early {
			left = min(left, validationPoll)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock.After(left):
		}
		if early && c.clock.Now().Before(deadline) && c.noneValid(ctx, cmds) {
			log.FromContext(ctx).V(1).Info("ending the validation delay early, no command's candidates are still valid")
			return nil
		}
	}
}

// noneValid reports whether every command has a candidate no longer
// valid on fresh state (a snapshot error counts as still valid: the
// validation proper reports it).
func (c *Controller) noneValid(ctx context.Context, cmds []*disruption.Command) bool {
	snap, err := c.snapshot(ctx)
	if err != nil {
		return false
	}
	return !disruption.AnyStillValid(snap, cmds)
}

// start hands commands to the queue and reports how many started. The
// strategy is told which of its commands started (not which it planned:
// validation may abandon them) and the NodeClaims each launched.
func (c *Controller) start(ctx context.Context, m disruption.Method, cmds []*disruption.Command, snap *disruption.Snapshot) (int, error) {
	var started []*disruption.Command
	var launched [][]string
	defer func() {
		if disruption.IsConsolidation(m) {
			c.opts.Strategy.Started(c.clock.Now(), started, launched)
		}
	}()
	for _, cmd := range cmds {
		names, err := c.queue.Start(ctx, cmd, snap.NodePools)
		if err != nil {
			return len(started), fmt.Errorf("disrupting candidates: %w", err)
		}
		c.publishApproved(cmd)
		started = append(started, cmd)
		launched = append(launched, names)
	}
	return len(started), nil
}

// decide runs the methods, timing each one.
func (c *Controller) decide(ctx context.Context, snap *disruption.Snapshot) (*disruption.Decision, error) {
	var start time.Time
	return disruption.DisruptWith(snap, disruption.MethodsOf(c.opts.Strategy), c.simulatorFor(ctx), disruption.Hooks{
		BeforeMethod: func(disruption.Method) { start = c.clock.Now() },
		AfterMethod: func(m disruption.Method, run disruption.MethodRun) {
			metrics.DisruptionEvaluationDurationSeconds.WithLabelValues(string(run.Reason), run.ConsolidationType).Observe(c.clock.Since(start).Seconds())
			metrics.DisruptionEligibleNodes.WithLabelValues(string(run.Reason)).Set(float64(run.Eligible))
		},
	})
}

// snapshot builds the pure package's input from cluster state and the API.
func (c *Controller) snapshot(ctx context.Context) (*disruption.Snapshot, error) {
	now := c.clock.Now()
	pools := &v1.NodePoolList{}
	if err := c.kube.List(ctx, pools); err != nil {
		return nil, fmt.Errorf("listing nodepools: %w", err)
	}
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := c.kube.List(ctx, pdbs); err != nil {
		return nil, fmt.Errorf("listing poddisruptionbudgets: %w", err)
	}
	snap := &disruption.Snapshot{Now: now, NodePools: map[string]*v1.NodePool{}}
	for i := range pools.Items {
		snap.NodePools[pools.Items[i].Name] = &pools.Items[i]
	}
	for i := range pdbs.Items {
		snap.PDBs = append(snap.PDBs, &pdbs.Items[i])
	}
	snap.InstanceTypes = c.instanceTypes(ctx, snap.NodePools)
	// Nodes before pods (as the snapshot builder): a pod that binds in
	// between is seen on its node, or pending, never as neither.
	nodes := c.cluster.Nodes()
	// A nomination keeps a node for the pending pods the provisioner
	// planned onto it, for a fixed window (upstream's rule). Where the pass
	// reads pending pods (the planner) and none is pending, every pod a
	// nomination stood for is bound or gone, and nothing is headed for the
	// node: the nomination no longer holds it, so that nodes a scale-in
	// emptied right after a scale-up need not wait out the window for a
	// pass of their own.
	staleNominations := false
	if c.opts.Strategy.ReadsPending() {
		// The pass reads every pod; the snapshot only reads them (the
		// planner copies a pod before it changes one), so it reads the
		// cache's objects, neither deep-copied nor copied into a list:
		// at 10,000 pods a list of them was a tenth of what the
		// controller allocated.
		all, err := snapshot.Live{Reader: c.kube, Informers: c.opts.Informers}.Pods(ctx)
		if err != nil {
			return nil, err
		}
		snap.Pending, _ = snapshot.Options{IgnoreDRARequests: c.opts.IgnoreDRARequests}.PendingPods(all)
		staleNominations = len(snap.Pending) == 0
	}
	for _, sn := range nodes {
		n := NodeOf(sn)
		n.Nominated = sn.Nominated(now) && !staleNominations
		if sn.NodeClaim != nil && c.opts.Buffers.Held(sn.Name(), sn.NodeClaim.Name) || c.opts.Buffers.Held(sn.Name()) {
			n.Nominated = true
		}
		n.InQueue = c.queue.Has(sn.Name()) || (sn.NodeClaim != nil && c.queue.Has(sn.NodeClaim.Name))
		snap.Nodes = append(snap.Nodes, n)
	}
	return snap, nil
}

// NodeOf is a state node as the disruption package sees it: its NodeClaim,
// Node and pods (sorted by name), pool, and whether it is initialized,
// deleting or marked. Nominations and the queue are the caller's to add.
func NodeOf(sn *state.StateNode) *disruption.Node {
	n := &disruption.Node{
		NodeClaim:         sn.NodeClaim,
		Node:              sn.Node,
		NodePool:          sn.NodePoolName(),
		Initialized:       sn.Initialized(),
		Deleting:          (sn.Node != nil && !sn.Node.DeletionTimestamp.IsZero()) || (sn.NodeClaim != nil && !sn.NodeClaim.DeletionTimestamp.IsZero()),
		MarkedForDeletion: sn.MarkedForDeletion(),
	}
	names := make([]types.NamespacedName, 0, len(sn.Pods))
	for nn := range sn.Pods {
		names = append(names, nn)
	}
	sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
	for _, nn := range names {
		n.Pods = append(n.Pods, sn.Pods[nn])
	}
	return n
}

// publish turns the decision into events, logs and metrics.
func (c *Controller) publish(ctx context.Context, snap *disruption.Snapshot, d *disruption.Decision) {
	if d == nil {
		return
	}
	logged := map[string]bool{}
	for _, reason := range disruption.Reasons {
		for name, b := range d.Budgets[reason] {
			metrics.NodePoolAllowedDisruptions.WithLabelValues(name, string(reason)).Set(float64(b.Allowed))
			metrics.NodePoolNodesConsumingBudgets.WithLabelValues(name, string(reason)).Set(float64(b.Disrupting))
			if b.Err != nil && !logged[b.Err.Error()] {
				logged[b.Err.Error()] = true
				log.FromContext(ctx).Error(b.Err, "detected disruption budget errors", "NodePool", klog.KRef("", name))
			}
			if b.Allowed == 0 {
				c.events.normal(snap.NodePools[name], ReasonDisruptionBlocked,
					fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", reason))
			}
		}
	}
	c.publishConsolidation(snap, d)
	nodes := map[string]*disruption.Node{}
	pods := map[string]*corev1.Pod{}
	for _, n := range snap.Nodes {
		nodes[n.Name()] = n
	}
	for _, w := range d.Warnings {
		if n := nodes[w.Node]; n != nil {
			for _, p := range n.Pods {
				pods[p.Namespace+"/"+p.Name] = p
			}
		}
		if p := pods[w.Pod]; p != nil {
			c.events.warning(p, ReasonInvalidDoNotDisruptAnnotation, w.Message())
		}
	}
	c.publishGracePeriods(snap)
	for _, e := range d.Explanations {
		n := nodes[e.Node]
		if n == nil {
			continue
		}
		for _, v := range e.Verdicts {
			if !v.Event {
				continue
			}
			if n.Node != nil {
				c.events.normal(n.Node, ReasonDisruptionBlocked, v.Message())
			}
			if n.NodeClaim != nil {
				c.events.normal(n.NodeClaim, ReasonDisruptionBlocked, v.Message())
			}
		}
	}
}

// simulatorFor is the simulator of a pass (nil without Simulators: drift
// of nodes with pods is then reported, not decided).
func (c *Controller) simulatorFor(ctx context.Context) disruption.Simulator {
	if c.simulators == nil {
		return nil
	}
	return c.simulators(ctx)
}

// logPass logs, at debug level, what a pass decided (its commands and the
// consolidation verdicts counted by kind) and how long building its
// snapshot and deciding took, so that a log answers why nodes waited
// between passes without a snapshot.
func logPass(ctx context.Context, d *disruption.Decision, snapshot, decide time.Duration) {
	l := log.FromContext(ctx).V(1)
	if !l.Enabled() || d == nil {
		return
	}
	kinds := map[string]int{}
	for _, e := range d.Explanations {
		for _, v := range e.Verdicts {
			if v.Unconsolidatable {
				kinds[string(v.Kind)]++
			}
		}
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, kinds[k])
	}
	l.Info("disruption pass", "commands", len(d.Commands), "unconsolidatable", strings.Join(parts, ","),
		"snapshot-seconds", snapshot.Seconds(), "decide-seconds", decide.Seconds())
}
