package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Queue timing, as upstream: a command waits for its replacements at
// least 10 minutes and at most an hour, longer while many commands are
// queued (80 ms each); between checks it backs off from 1 s to 10 s.
const (
	minCommandTimeout   = 10 * time.Minute
	maxCommandTimeout   = time.Hour
	perCommandTimeout   = 80 * time.Millisecond
	minRetryDelay       = time.Second
	maxRetryDelay       = 10 * time.Second
	replacementGrace    = 5 * time.Second // a just-created NodeClaim may not be in the cache yet
	recentlyDoneTimeout = time.Minute
)

// Queue carries commands out. It is safe for concurrent use.
type Queue struct {
	kube     client.Client
	cluster  Cluster
	launcher Launcher
	clock    clock.Clock
	events   *events

	// types prices candidates and replacements for the saving each
	// command predicts and realizes (nil: no saving recorded).
	types InstanceTypes

	mu       sync.Mutex
	commands []*command
	names    map[string]bool      // Node and NodeClaim names of queued candidates
	done     map[string]time.Time // names of recently finished candidates
}

type command struct {
	id                string
	reason            v1.DisruptionReason
	decision          string
	consolidationType string
	class             disruption.Class
	// launchTaint: the replacements carry disruption.LaunchTaint until the
	// command deletes its candidates (Command.LaunchTaint).
	launchTaint  bool
	candidates   []*disruption.Candidate
	replacements []string
	initialized  []bool
	// nodes are the initialized replacements' Node names.
	nodes   []string
	created time.Time
	next    time.Time
	delay   time.Duration
	// pools are the candidates' and replacements' NodePools. priceBefore
	// is the candidates' price and plannedPrice the planned replacements'
	// ($/h), set when every candidate could be priced; launched are the
	// offerings the replacements launched on, by replacement.
	pools        map[string]*v1.NodePool
	priceBefore  float64
	plannedPrice float64
	priced       bool
	launched     []launchedOffering
}

type launchedOffering struct {
	pool string
	key  scheduling.OfferingKey
}

// NewQueue returns an empty queue.
func NewQueue(kube client.Client, cluster Cluster, launcher Launcher, clk clock.Clock, ev *events) *Queue {
	return &Queue{kube: kube, cluster: cluster, launcher: launcher, clock: clk, events: ev,
		names: map[string]bool{}, done: map[string]time.Time{}}
}

// Has reports whether a queued command owns the node (by Node or NodeClaim
// name), or finished with it a moment ago (its deletion may not have
// reached the cache yet).
func (q *Queue) Has(name string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.names[name] {
		return true
	}
	at, ok := q.done[name]
	return ok && q.clock.Since(at) < recentlyDoneTimeout
}

// Launching returns the names of the NodeClaims that commands in flight
// launched (the replacements, until their command leaves the queue).
func (q *Queue) Launching() map[string]bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]bool{}
	for _, c := range q.commands {
		for _, name := range c.replacements {
			out[name] = true
		}
	}
	return out
}

// withTaint copies planned NodeClaims with t added to their taints.
func withTaint(planned []*scheduling.NewNodeClaim, t corev1.Taint) []*scheduling.NewNodeClaim {
	out := make([]*scheduling.NewNodeClaim, len(planned))
	for i, nnc := range planned {
		cp := *nnc
		cp.Taints = append(append([]corev1.Taint(nil), nnc.Taints...), t)
		out[i] = &cp
	}
	return out
}

// Len is the number of commands in flight.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.commands)
}

func candidateNames(c *disruption.Candidate) []string {
	names := []string{c.Name()}
	if nc := c.NodeClaimName(); nc != "" && nc != c.Name() {
		names = append(names, nc)
	}
	return names
}

// Start begins a command: taint and condition the candidates, mark them
// for deletion, launch the replacements, and queue the command to wait
// for them. It returns the names of the NodeClaims it launched. On
// failure the candidates are rolled back.
func (q *Queue) Start(ctx context.Context, cmd *disruption.Command, pools map[string]*v1.NodePool) ([]string, error) {
	c := &command{
		id: uuid.NewString(), reason: cmd.Method.Reason(), decision: cmd.Decision(),
		consolidationType: cmd.Method.ConsolidationType(), class: cmd.Method.Class(), launchTaint: cmd.LaunchTaint,
		candidates: cmd.Candidates, created: q.clock.Now(), delay: minRetryDelay, pools: pools,
	}
	if before, ok := q.candidatesPrice(ctx, c); ok {
		c.priceBefore, c.priced = before, true
		for _, r := range cmd.Replacements {
			c.plannedPrice += r.Price
		}
	}
	var names []string
	for _, cand := range cmd.Candidates {
		names = append(names, candidateNames(cand)...)
	}
	q.mu.Lock()
	for _, n := range names {
		if q.names[n] {
			q.mu.Unlock()
			return nil, fmt.Errorf("candidate %s is already being disrupted", n)
		}
	}
	for _, n := range names {
		q.names[n] = true
	}
	q.mu.Unlock()

	logger := log.FromContext(ctx).WithValues("command-id", c.id, "reason", strings.ToLower(string(c.reason)))
	logger.WithValues(c.logValues(cmd)...).Info("disrupting node(s)")

	// Taint first, so no pod lands on a candidate while its replacement
	// starts; mark in state so provisioning plans for its pods.
	var errs []error
	for _, cand := range cmd.Candidates {
		if err := setDisruptedTaint(ctx, q.kube, cand.Node.Node.Name, true); err != nil {
			errs = append(errs, err)
		}
		if err := setDisruptionReason(ctx, q.kube, cand.NodeClaimName(), string(c.reason)); err != nil {
			errs = append(errs, err)
		}
	}
	q.cluster.MarkForDeletion(names...)
	if err := errors.Join(errs...); err != nil {
		q.rollback(ctx, c, fmt.Errorf("marking disrupted: %w", err))
		return nil, err
	}
	if len(cmd.Replacements) > 0 {
		replacements := cmd.Replacements
		if c.launchTaint {
			replacements = withTaint(replacements, disruption.LaunchTaint)
		}
		created, err := q.launcher.CreateNodeClaims(ctx, replacements, pools)
		for _, nc := range created {
			if nc != nil {
				c.replacements = append(c.replacements, nc.Name)
				q.events.normal(nc, ReasonDisruptionLaunching, "Launching NodeClaim: "+string(c.reason))
			}
		}
		if err == nil && len(c.replacements) != len(cmd.Replacements) {
			err = fmt.Errorf("created %d of %d replacements", len(c.replacements), len(cmd.Replacements))
		}
		if err != nil {
			// Without its replacements the command must not go on: the pods
			// would have nowhere to go. What was launched stays as ordinary
			// capacity.
			err = fmt.Errorf("launching replacement nodeclaim: %w", err)
			q.rollback(ctx, c, err)
			return nil, err
		}
		c.initialized = make([]bool, len(c.replacements))
	}
	metrics.DisruptionDecisionsTotal.WithLabelValues(c.decision, metricReason(c.reason), c.consolidationType).Inc()
	counted := map[string]bool{}
	for _, cand := range c.candidates {
		if cand.NodePool != nil && !counted[cand.NodePool.Name] {
			counted[cand.NodePool.Name] = true
			metrics.DisruptionDecisionsByNodePoolTotal.WithLabelValues(cand.NodePool.Name, c.decision, metricReason(c.reason), c.consolidationType).Inc()
		}
	}
	q.mu.Lock()
	c.next = q.clock.Now()
	q.commands = append(q.commands, c)
	q.mu.Unlock()
	return append([]string(nil), c.replacements...), nil
}

// logValues are the fields of upstream's "disrupting node(s)" line: the
// command in one string (reason/id: decision: nodepools=[...]: [nodes] ->
// [n replacements] (savings: $x)), then the decision, counts and the nodes
// taken away and brought in.
func (c *command) logValues(cmd *disruption.Command) []any {
	var pools, sources []string
	seen := map[string]bool{}
	pods := 0
	disrupted := make([]any, 0, len(cmd.Candidates))
	for _, cand := range cmd.Candidates {
		pods += len(cand.Reschedulable)
		sources = append(sources, cand.Name())
		if cand.NodePool != nil && !seen[cand.NodePool.Name] {
			seen[cand.NodePool.Name] = true
			pools = append(pools, cand.NodePool.Name)
		}
		labels := cand.Node.Node.Labels
		disrupted = append(disrupted, map[string]any{
			"Node":          map[string]string{"name": cand.Name()},
			"NodeClaim":     map[string]string{"name": cand.NodeClaimName()},
			"instance-type": labels[corev1.LabelInstanceTypeStable],
			"capacity-type": labels[v1.CapacityTypeLabelKey],
		})
	}
	replacements := make([]any, 0, len(cmd.Replacements))
	for _, r := range cmd.Replacements {
		ct := r.Requirements.Get(v1.CapacityTypeLabelKey)
		m := map[string]any{"capacity-type": v1.CapacityTypeOnDemand}
		switch {
		case ct.Has(v1.CapacityTypeReserved):
			m["capacity-type"] = v1.CapacityTypeReserved
		case ct.Has(v1.CapacityTypeSpot):
			m["capacity-type"] = v1.CapacityTypeSpot
		}
		if len(cmd.Replacements) == 1 {
			var types []string
			for _, it := range r.InstanceTypes {
				types = append(types, it.Name)
			}
			m["instance-types"] = prettyList(types, 5)
		}
		replacements = append(replacements, m)
	}
	command := fmt.Sprintf("%s/%s: %s: nodepools=[%s]: [%s]", c.reason, c.id, c.decision, strings.Join(pools, ","), strings.Join(sources, ", "))
	if n := len(cmd.Replacements); n > 0 {
		plural := "replacements"
		if n == 1 {
			plural = "replacement"
		}
		command += fmt.Sprintf(" -> [%d %s]", n, plural)
	}
	if c.priced {
		command += fmt.Sprintf(" (savings: $%.2f)", c.priceBefore-c.plannedPrice)
	}
	return []any{
		"command", command,
		"decision", c.decision,
		"disrupted-node-count", len(disrupted),
		"replacement-node-count", len(replacements),
		"pod-count", pods,
		"disrupted-nodes", disrupted,
		"replacement-nodes", replacements,
	}
}

// prettyList joins at most max items and counts the rest.
func prettyList(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(items[:max], ", "), len(items)-max)
}

// Reconcile advances every command that is due.
func (q *Queue) Reconcile(ctx context.Context) {
	q.mu.Lock()
	now := q.clock.Now()
	var due []*command
	for _, c := range q.commands {
		if !now.Before(c.next) {
			due = append(due, c)
		}
	}
	length := len(q.commands)
	for name, at := range q.done {
		if now.Sub(at) >= recentlyDoneTimeout {
			delete(q.done, name)
		}
	}
	q.mu.Unlock()
	timeout := min(max(time.Duration(length)*perCommandTimeout, minCommandTimeout), maxCommandTimeout)
	for _, c := range due {
		finished, err := q.step(ctx, c, timeout)
		switch {
		case err != nil && finished:
			q.rollback(ctx, c, err)
		case err != nil:
			log.FromContext(ctx).V(1).Info("waiting on disruption command", "command-id", c.id, "reason", err.Error())
			q.mu.Lock()
			c.next = q.clock.Now().Add(c.delay)
			c.delay = min(2*c.delay, maxRetryDelay)
			q.mu.Unlock()
		case finished:
			q.finish(c)
		}
	}
}

// step checks a command's replacements and, once all are initialized,
// deletes the candidates. finished with an error means the command failed
// for good.
func (q *Queue) step(ctx context.Context, c *command, timeout time.Duration) (finished bool, err error) {
	if age := q.clock.Since(c.created); age > timeout {
		return true, fmt.Errorf("command reached timeout after %s", age.Truncate(time.Second))
	}
	var waiting []string
	for i, name := range c.replacements {
		if c.initialized[i] {
			continue
		}
		nc := &v1.NodeClaim{}
		if err := q.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if apierrors.IsNotFound(err) && q.clock.Since(c.created) > replacementGrace {
				return true, fmt.Errorf("replacement %s was deleted", name)
			}
			waiting = append(waiting, name)
			continue
		}
		if !nc.DeletionTimestamp.IsZero() {
			return true, fmt.Errorf("replacement %s is being deleted", name)
		}
		if cond := meta.FindStatusCondition(nc.GetConditions(), v1.ConditionTypeInitialized); cond == nil || cond.Status != "True" {
			q.events.normal(nc, ReasonDisruptionWaitingReadiness, "Waiting on readiness to continue disruption")
			waiting = append(waiting, name)
			continue
		}
		c.initialized[i] = true
		c.nodes = append(c.nodes, nc.Status.NodeName)
		c.launched = append(c.launched, launchedOffering{pool: nc.Labels[v1.NodePoolLabelKey], key: scheduling.OfferingKeyOf(nc.Labels)})
	}
	if len(waiting) > 0 {
		return false, fmt.Errorf("waiting for replacement(s) %s to initialize", strings.Join(waiting, ", "))
	}
	if c.launchTaint {
		// The launch taint kept the pods other commands evicted off the
		// new nodes while they came up. The candidates' own pods are
		// evicted next, and the new nodes were bought for them: without
		// the taint the kube-scheduler prefers them (the emptiest nodes),
		// with it the pods spread over any other node's room first and
		// the new nodes stay half empty. A failure is only logged: the
		// next pass takes the taint off (Controller.drain).
		for _, node := range c.nodes {
			if node == "" {
				continue
			}
			if err := setTaint(ctx, q.kube, node, disruption.LaunchTaint, false); err != nil {
				log.FromContext(ctx).Error(err, "removing the launch taint before disrupting", "command-id", c.id, "Node", klog.KRef("", node))
			}
		}
	}
	var errs []error
	for _, cand := range c.candidates {
		msg := "Disrupting Node: " + string(c.reason)
		q.events.normal(cand.Node.Node, ReasonDisruptionTerminating, msg)
		q.events.normal(cand.NodeClaim, ReasonDisruptionTerminating, msg)
		if err := q.kube.Delete(ctx, cand.NodeClaim); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting nodeclaim %s: %w", cand.NodeClaimName(), err))
			}
			continue
		}
		labels := []string{metricReason(c.reason), cand.NodePool.Name, cand.NodeClaim.Labels[v1.CapacityTypeLabelKey],
			string(cand.NodePool.Spec.Disruption.ConsolidationPolicy), string(c.class)}
		metrics.NodeClaimsDisruptedTotal.WithLabelValues(labels...).Inc()
		metrics.PodsDisruptionInitiatedTotal.WithLabelValues(labels...).Add(float64(len(cand.Reschedulable)))
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	q.recordSaving(ctx, c)
	return true, nil
}

// recordSaving logs and counts what a command that deleted its candidates
// predicted to save and what it saves with the replacements that actually
// launched ($/h), when both can be priced.
func (q *Queue) recordSaving(ctx context.Context, c *command) {
	if !c.priced || len(c.candidates) == 0 {
		return
	}
	after := 0.0
	for _, l := range c.launched {
		p, ok := q.price(ctx, c.pools[l.pool], l.key)
		if !ok {
			return
		}
		after += p
	}
	predicted, realized := c.priceBefore-c.plannedPrice, c.priceBefore-after
	pool := c.candidates[0].NodePool.Name
	reason := metricReason(c.reason)
	// A counter cannot go down (Add panics on a negative value, and the
	// queue would retry the command's step forever): a command that made
	// the fleet dearer (a drift onto a pricier type, a replacement that
	// launched dearer than planned) counts 0; the log line keeps the sign.
	metrics.DisruptionSavingsPerHourTotal.WithLabelValues(reason, pool, metrics.EstimatePredicted).Add(max(predicted, 0))
	metrics.DisruptionSavingsPerHourTotal.WithLabelValues(reason, pool, metrics.EstimateRealized).Add(max(realized, 0))
	log.FromContext(ctx).Info("disruption command saving", "command-id", c.id, "reason", reason,
		"predicted-saving-per-hour", fmt.Sprintf("%.4f", predicted), "realized-saving-per-hour", fmt.Sprintf("%.4f", realized))
}

// candidatesPrice sums the candidates' offering prices; false when one
// cannot be priced.
func (q *Queue) candidatesPrice(ctx context.Context, c *command) (float64, bool) {
	total := 0.0
	for _, cand := range c.candidates {
		if cand.Node == nil || cand.Node.Node == nil {
			return 0, false
		}
		p, ok := q.price(ctx, cand.NodePool, scheduling.OfferingKeyOf(cand.Node.Node.Labels))
		if !ok {
			return 0, false
		}
		total += p
	}
	return total, true
}

// price is the offering's price among the pool's instance types.
func (q *Queue) price(ctx context.Context, pool *v1.NodePool, key scheduling.OfferingKey) (float64, bool) {
	if q.types == nil || pool == nil {
		return 0, false
	}
	its, err := q.types.GetInstanceTypes(ctx, pool)
	if err != nil {
		return 0, false
	}
	p, ok := scheduling.OfferingPrices(its)[key]
	return p, ok
}

// finish drops a completed command; its candidates stay marked for
// deletion (they are being deleted).
func (q *Queue) finish(c *command) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(c)
	now := q.clock.Now()
	for _, cand := range c.candidates {
		for _, n := range candidateNames(cand) {
			q.done[n] = now
		}
	}
}

// rollback undoes a command: untaint, clear the condition, unmark, and
// forget it. Replacements already launched are left alone.
func (q *Queue) rollback(ctx context.Context, c *command, cause error) {
	log.FromContext(ctx).Error(cause, "failed to disrupt nodes, rolling back", "command-id", c.id, "reason", strings.ToLower(string(c.reason)))
	metrics.DisruptionQueueFailuresTotal.WithLabelValues(c.decision, metricReason(c.reason), c.consolidationType).Inc()
	var names []string
	for _, cand := range c.candidates {
		names = append(names, candidateNames(cand)...)
		if err := setDisruptedTaint(ctx, q.kube, cand.Node.Node.Name, false); err != nil {
			log.FromContext(ctx).Error(err, "rolling back disruption")
		}
		if err := setDisruptionReason(ctx, q.kube, cand.NodeClaimName(), ""); err != nil {
			log.FromContext(ctx).Error(err, "rolling back disruption")
		}
	}
	q.cluster.UnmarkForDeletion(names...)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.removeLocked(c)
}

func (q *Queue) removeLocked(c *command) {
	kept := q.commands[:0]
	for _, have := range q.commands {
		if have != c {
			kept = append(kept, have)
		}
	}
	q.commands = kept
	for _, cand := range c.candidates {
		for _, n := range candidateNames(cand) {
			delete(q.names, n)
		}
	}
}

// metricReason is the reason label of counters: snake_case, as upstream.
func metricReason(r v1.DisruptionReason) string { return strings.ToLower(string(r)) }
