package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/recovery"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// controllerName labels logs and metrics of the provisioning loop.
const controllerName = "provisioner"

// Options tune the provisioner; zero values are upstream's defaults.
type Options struct {
	// Informers, when set (the manager's cache), serves each round's pods
	// from the pod informer's store instead of a List that copies every
	// pod (snapshot.Live.Informers): at 10,000 pods those copies were
	// the round's largest garbage.
	Informers         snapshot.Informers
	BatchIdleDuration time.Duration
	BatchMaxDuration  time.Duration
	// PreferencePolicy and MinValuesPolicy are passed to the solver
	// ("Respect"/"Ignore", "Strict"/"BestEffort").
	PreferencePolicy string
	MinValuesPolicy  string
	// AnticipateReplicaSets plans, in the same round, for the pods the
	// ReplicaSets of pending pods are about to create (see expectedPods).
	AnticipateReplicaSets bool
	// Unavailable is the insufficient-capacity cache (optional).
	Unavailable UnavailableOfferings
	// WellKnownLabels are the cloud provider's own well-known label keys
	// (see snapshot.Options).
	WellKnownLabels []string
	// ReservationIDLabel is the key a reserved NodeClaim's spec.requirements
	// name its planned reservation under: the provider's own label, as
	// upstream's cloudprovider.ReservationIDLabel (AWS:
	// karpenter.k8s.aws/capacity-reservation-id). The CRD refuses the
	// solver's karpenter.sh/reservation-id there; empty leaves the
	// reservation out, and the provider picks one of the NodeClaim's
	// reserved offerings.
	ReservationIDLabel string
	// IgnoreTaints are soft taints plans disregard (see snapshot.Options).
	IgnoreTaints []corev1.Taint
	// IgnoreDRARequests leaves pods with ResourceClaims unprovisioned,
	// with a FailedScheduling saying so (see snapshot.Options).
	IgnoreDRARequests bool
	Clock             clock.Clock
	// Buffers are the CapacityBuffers' virtual pods (gate CapacityBuffer;
	// nil without): every round plans for them, records the nodes it
	// placed them on for disruption to hold, and writes each buffer's
	// Provisioning condition (buffers.go).
	Buffers *state.Buffers
}

// Provisioner plans and creates NodeClaims for pending pods.
type Provisioner struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	cluster  Cluster
	recorder Recorder
	batcher  *Batcher
	clock    clock.Clock
	opts     Options
	reserved reservations
	// view and request are what each round's snapshot.Build reads and
	// how it builds; disruption simulates with the same builder.
	view    snapshot.View
	request snapshot.Request
	// solves numbers the simulations for the scheduler gauges' id label.
	solves atomic.Uint64
	// poolWarnings dedupes NoCompatibleInstanceTypes events.
	poolWarnings poolWarnings
}

// NewProvisioner wires the provisioner. kube should read from the manager's
// cache; creates go to the API server either way.
func NewProvisioner(kube client.Client, cloud cloudprovider.CloudProvider, cluster Cluster, recorder Recorder, opts Options) *Provisioner {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Provisioner{
		kube: kube, cloud: cloud, cluster: cluster, recorder: recorder, clock: opts.Clock, opts: opts,
		batcher: NewBatcher(opts.Clock, opts.BatchIdleDuration, opts.BatchMaxDuration),
		// Rounds keep what unchanged nodes derive for the solver.
		view: snapshot.Live{Reader: kube, Cloud: cloud, Cluster: cluster, Informers: opts.Informers,
			Prepared: &scheduling.NodeCache{}},
		request: snapshot.Request{SkipIfNoPods: true, Options: snapshot.Options{
			Solver: scheduling.Options{
				PreferencePolicy: scheduling.PreferencePolicy(opts.PreferencePolicy),
				MinValuesPolicy:  scheduling.MinValuesPolicy(opts.MinValuesPolicy),
				Robust:           true,
				CapGrowth:        true,
			},
			AnticipateReplicaSets: opts.AnticipateReplicaSets,
			Unavailable:           opts.Unavailable,
			WellKnownLabels:       opts.WellKnownLabels,
			IgnoreTaints:          opts.IgnoreTaints,
			IgnoreDRARequests:     opts.IgnoreDRARequests,
			VirtualPods:           opts.Buffers.Pods,
		}},
	}
}

// Trigger asks for a provisioning round soon; uid identifies the pod that
// asked (empty for triggers not tied to a pod).
func (p *Provisioner) Trigger(uid string) { p.batcher.Trigger(typesUID(uid)) }

// TriggerPod asks for a round for a provisionable pod. When its ReplicaSet's
// missing pods are planned for anyway, the pod counts as its ReplicaSet: the
// thousandth pod of a scale-up is then no news, and the batch window closes
// a second after the scale-up began instead of a second after its last pod
// was created.
func (p *Provisioner) TriggerPod(pod *corev1.Pod) {
	if ps, ok := p.cluster.(PodScheduling); ok {
		ps.AckPods(pod)
	}
	p.Trigger(p.triggerKey(pod))
}

func (p *Provisioner) triggerKey(pod *corev1.Pod) string {
	if p.opts.AnticipateReplicaSets {
		if uid, ok := snapshot.Anticipatable(pod); ok {
			return "replicaset/" + string(uid)
		}
	}
	return string(pod.UID)
}

// Register runs the provisioning loop under the manager (leader only).
func (p *Provisioner) Register(ctx context.Context, mgr manager.Manager) error {
	// A round lists these through the cache. Asking for their informers now
	// starts them with the manager, so the first round after start-up or a
	// leader change does not wait for cold lists (half a second on a busy
	// API server). Storage objects stay lazy: clusters without volumes
	// never need them.
	warm := []client.Object{&appsv1.DaemonSet{}, &corev1.Namespace{}, &v1.NodePool{}}
	if p.opts.AnticipateReplicaSets {
		warm = append(warm, &appsv1.ReplicaSet{})
	}
	for _, obj := range warm {
		if _, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("starting the %T informer: %w", obj, err)
		}
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		p.Run(ctx)
		return nil
	}))
}

// Run is the provisioning loop; it returns when ctx ends. A round that
// panics is logged with its stack and the loop carries on after a pause:
// one bad object must not stop all provisioning (or kill the process, as
// a panic outside a reconciler would).
func (p *Provisioner) Run(ctx context.Context) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", controllerName))
	for ctx.Err() == nil {
		if err := recovery.Do(ctx, "provisioning round", func() { p.Reconcile(ctx) }); err != nil {
			select {
			case <-ctx.Done():
			case <-p.clock.After(time.Second):
			}
		}
	}
}

// Reconcile is one turn of the loop: wait for a batch, then provision.
func (p *Provisioner) Reconcile(ctx context.Context) {
	if !p.batcher.Wait(ctx) {
		return
	}
	if _, err := p.Provision(ctx); err != nil {
		if errors.Is(err, snapshot.ErrNotSynced) {
			log.FromContext(ctx).V(1).Info("waiting on cluster sync")
		} else {
			log.FromContext(ctx).Error(err, "provisioning failed")
		}
		// Pending pods are re-triggered by the pod controller; a short pause
		// keeps a persistent error from spinning.
		select {
		case <-ctx.Done():
		case <-p.clock.After(time.Second):
		}
	}
}

// Round is what one provisioning round did.
type Round struct {
	Result     *scheduling.Result
	NodeClaims []*v1.NodeClaim // created, in Result.NewNodeClaims order (nil where creation failed)
}

// Provision runs one round now: schedule the pending pods and create the
// NodeClaims the solver plans. It returns (nil, nil) when nothing is pending.
func (p *Provisioner) Provision(ctx context.Context) (*Round, error) {
	res, pools, claimOf, err := p.schedule(ctx)
	if err != nil || res == nil {
		return nil, err
	}
	round := &Round{Result: res}
	round.NodeClaims, err = p.CreateNodeClaims(ctx, res.NewNodeClaims, pools)
	p.reserved.record(res, claimOf, round.NodeClaims)
	return round, err
}

// Schedule snapshots the cluster and runs the solver, publishing events and
// logs for its verdict. It returns the NodePools used, by name.
func (p *Provisioner) Schedule(ctx context.Context) (*scheduling.Result, map[string]*v1.NodePool, error) {
	res, pools, _, err := p.schedule(ctx)
	return res, pools, err
}

// schedule is Schedule that also returns, for the existing nodes the solver
// saw, the NodeClaim behind each (by node name).
func (p *Provisioner) schedule(ctx context.Context) (*scheduling.Result, map[string]*v1.NodePool, map[string]string, error) {
	start := p.clock.Now()
	snap, err := snapshot.Build(ctx, p.view, p.request)
	if snap != nil {
		p.ignored(ctx, snap.Ignored)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if snap.Input == nil {
		p.opts.Buffers.Hold(nil)
		p.updateBuffers(ctx, nil)
		return nil, nil, nil, nil
	}
	in := snap.Input
	p.warnIncompatiblePools(in, snap.NodePools)
	in.Nominations = p.reserved.nominations(in.Pods, in.Nodes)
	solveStart := p.clock.Now()
	done := p.trackSolve(in.Pods)
	res := scheduling.Solve(in)
	done()
	metrics.SchedulingDurationSeconds.WithLabelValues(controllerName).Observe(p.clock.Since(solveStart).Seconds())

	names, expected := podNames(in.Pods)
	logger := log.FromContext(ctx).WithValues("Pods", prettySlice(names, 5), "duration", p.clock.Since(start))
	if expected > 0 {
		logger = logger.WithValues("expected", expected)
	}
	if routine(in.Pods, res) {
		// Only pods the kube-scheduler has yet to place, all fitting
		// existing capacity: nothing for Karpenter to do or to say.
		logger.V(1).Info("found provisionable pod(s)")
	} else {
		logger.Info("found provisionable pod(s)")
	}
	p.record(ctx, res)
	p.holdBuffers(in, res)
	p.updateBuffers(ctx, res)
	return res, snap.NodePools, snap.ClaimOf, nil
}

// holdBuffers records the existing nodes (and in-flight NodeClaims) the
// round placed CapacityBuffer virtual pods on: disruption leaves them be.
// Room bought for virtual pods in this round is held from the next round
// on, when the new NodeClaims are in flight and the pods placed on them.
func (p *Provisioner) holdBuffers(in *scheduling.Input, res *scheduling.Result) {
	if p.opts.Buffers == nil {
		return
	}
	claimOf := make(map[string]string, len(in.Nodes))
	for _, n := range in.Nodes {
		claimOf[n.Name] = n.NodeClaim
	}
	var held []string
	for _, pl := range res.Placements {
		if pl.Node != "" && snapshot.IsVirtual(pl.Pod) {
			held = append(held, pl.Node)
			if c := claimOf[pl.Node]; c != "" {
				held = append(held, c)
			}
		}
	}
	p.opts.Buffers.Hold(held)
}

// trackSolve publishes the scheduler's in-flight gauges for one
// simulation: its queue depth (the pods it was given) and, every second
// while it runs, its unfinished work; and the pending pods by effective
// zone. The returned function ends the simulation's series.
func (p *Provisioner) trackSolve(pods []*corev1.Pod) func() {
	metrics.SchedulerPendingPodsByEffectiveZone.DeletePartialMatch(map[string]string{metrics.ControllerLabel: controllerName})
	zones := map[string]int{}
	for _, pod := range pods {
		if !IsExpected(pod) && pod.Status.Phase == corev1.PodPending {
			zones[effectiveZone(pod)]++
		}
	}
	for zone, n := range zones {
		metrics.SchedulerPendingPodsByEffectiveZone.WithLabelValues(controllerName, zone).Set(float64(n))
	}
	id := strconv.FormatUint(p.solves.Add(1), 10)
	start := p.clock.Now()
	metrics.SchedulerQueueDepth.WithLabelValues(controllerName, id).Set(float64(len(pods)))
	metrics.SchedulerUnfinishedWorkSeconds.WithLabelValues(controllerName, id).Set(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-p.clock.After(time.Second):
				metrics.SchedulerUnfinishedWorkSeconds.WithLabelValues(controllerName, id).Set(p.clock.Since(start).Seconds())
			}
		}
	}()
	return func() {
		close(stop)
		wg.Wait()
		metrics.SchedulerQueueDepth.DeleteLabelValues(controllerName, id)
		metrics.SchedulerUnfinishedWorkSeconds.DeleteLabelValues(controllerName, id)
	}
}

// effectiveZone is the one zone a pod's node selector and required node
// affinity leave it, "flexible" when they leave several or do not
// constrain the zone, and "none" when they leave none.
func effectiveZone(pod *corev1.Pod) string {
	var zones sets.Set[string]
	restrict := func(values sets.Set[string]) {
		if zones == nil {
			zones = values
		} else {
			zones = zones.Intersection(values)
		}
	}
	if z, ok := pod.Spec.NodeSelector[corev1.LabelTopologyZone]; ok {
		restrict(sets.New(z))
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		// Terms are ORed: the pod may use the union of what each allows;
		// a term that says nothing of the zone allows every zone.
		var union sets.Set[string]
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			var termZones sets.Set[string]
			for _, req := range term.MatchExpressions {
				if req.Key != corev1.LabelTopologyZone || req.Operator != corev1.NodeSelectorOpIn {
					continue
				}
				if termZones == nil {
					termZones = sets.New(req.Values...)
				} else {
					termZones = termZones.Intersection(sets.New(req.Values...))
				}
			}
			if termZones == nil {
				union = nil
				break
			}
			union = union.Union(termZones)
		}
		if union != nil {
			restrict(union)
		}
	}
	switch {
	case zones == nil || zones.Len() > 1:
		return "flexible"
	case zones.Len() == 0:
		return "none"
	}
	return sets.List(zones)[0]
}

// routine reports whether a round is the everyday case of new pods that
// fit existing capacity before the kube-scheduler got to them.
func routine(pods []*corev1.Pod, res *scheduling.Result) bool {
	if len(res.NewNodeClaims) > 0 {
		return false
	}
	for _, pl := range res.Placements {
		if pl.Node == "" {
			return false
		}
	}
	for _, pod := range pods {
		if snapshot.FailedToSchedule(pod) {
			return false
		}
	}
	return true
}

// ignored publishes why pending pods were left out of the round: a
// FailedScheduling event, except for pods that opted out.
func (p *Provisioner) ignored(ctx context.Context, pods []snapshot.IgnoredPod) {
	for _, ig := range pods {
		if !errors.Is(ig.Err, snapshot.ErrNotManaged) {
			failedScheduling(p.recorder, ig.Pod, ig.Err.Error())
		}
		log.FromContext(ctx).V(1).Info("ignoring pod", "Pod", klog.KObj(ig.Pod), "reason", ig.Err.Error())
	}
	metrics.IgnoredPodsCount.Set(float64(len(pods)))
}

// record publishes the solver's verdict: Nominated for pods that fit
// existing capacity, FailedScheduling (and an error log) for pods that fit
// nowhere, and the summary log lines.
func (p *Provisioner) record(ctx context.Context, res *scheduling.Result) {
	logger := log.FromContext(ctx)
	nominator, _ := p.cluster.(PodNominator)
	nominated := map[string]bool{}
	unschedulable, existing := 0, 0
	decided := make(map[types.NamespacedName]bool, len(res.Placements))
	for _, pl := range res.Placements {
		if !IsExpected(pl.Pod) {
			decided[types.NamespacedName{Namespace: pl.Pod.Namespace, Name: pl.Pod.Name}] = pl.Node != "" || pl.NodeClaim >= 0
		}
		switch {
		case pl.Node != "":
			// A pod the kube-scheduler has not tried yet and that fits what
			// is there will simply be scheduled: announcing it would put an
			// event on every new pod in a cluster with room.
			if snapshot.FailedToSchedule(pl.Pod) && !IsExpected(pl.Pod) {
				existing++
				nominate(p.recorder, pl.Pod, nodeTarget(pl.Node))
			}
			if nominator != nil && !nominated[pl.Node] {
				nominated[pl.Node] = true
				nominator.NominateNodeForPod(ctx, pl.Node)
			}
		case pl.NodeClaim < 0:
			if IsExpected(pl.Pod) {
				// Its real sibling, pending in this round, gets the event.
				continue
			}
			unschedulable++
			why := pl.Why()
			failedScheduling(p.recorder, pl.Pod, why)
			logger.Error(errors.New(why), "could not schedule pod", "Pod", klog.KObj(pl.Pod))
		}
	}
	if ps, ok := p.cluster.(PodScheduling); ok {
		ps.MarkPodSchedulingDecisions(decided)
	}
	metrics.UnschedulablePodsCount.WithLabelValues(controllerName).Set(float64(unschedulable))
	logNewNodeClaims(logger, res.NewNodeClaims)
	if existing > 0 {
		logger.Info(fmt.Sprintf("computed %d unready node(s) will fit %d pod(s)", len(nominated), existing))
	}
}

// nodeTarget names an existing placement. In-flight NodeClaims without a
// node are passed to the solver under the NodeClaim's name.
func nodeTarget(name string) string { return "node/" + name }

// CreateNodeClaims creates the planned NodeClaims all at once, as upstream
// does, re-checking each pool's limits against current usage first
// (another round or a manual NodeClaim may have used the headroom since the
// plan was made). It returns the created objects in plan order, nil where
// creation was skipped or failed, and the joined errors.
//
// No bound below the round's size: the NodeClaims past it would wait out
// a create's round trip and reach the launch after the others, missing the
// provider's batch window (AWS: one CreateFleet for identical launches).
// The client's rate limiter is what paces the API server.
func (p *Provisioner) CreateNodeClaims(ctx context.Context, planned []*scheduling.NewNodeClaim, pools map[string]*v1.NodePool) ([]*v1.NodeClaim, error) {
	out := make([]*v1.NodeClaim, len(planned))
	errs := make([]error, len(planned))
	// Usage is read once, before anything is created, and this round's
	// creates are added to it under one lock: parallel creates cannot all
	// pass the same last unit of headroom, and a state that already counts
	// a NodeClaim created a moment ago cannot count it twice.
	var limitsMu sync.Mutex
	usage := map[string]corev1.ResourceList{}
	for _, nnc := range planned {
		if _, ok := usage[nnc.NodePool]; !ok {
			usage[nnc.NodePool] = p.cluster.NodePoolResources(nnc.NodePool).DeepCopy()
		}
	}
	extraNodes := map[string]int64{}
	// reserve takes one node of np's headroom, or says which limit is in
	// the way. The lock is released by defer so that a panic cannot leave
	// it held.
	reserve := func(np *v1.NodePool) error {
		limitsMu.Lock()
		defer limitsMu.Unlock()
		used := usage[np.Name].DeepCopy()
		if used == nil {
			used = corev1.ResourceList{}
		}
		n := used[v1.ResourceNodes]
		n.Add(*resourceInt(extraNodes[np.Name]))
		used[v1.ResourceNodes] = n
		if err := exceededBy(np.Spec.Limits, used); err != nil {
			return err
		}
		extraNodes[np.Name]++
		return nil
	}
	var wg sync.WaitGroup
	for i, nnc := range planned {
		np := pools[nnc.NodePool]
		if np == nil {
			errs[i] = fmt.Errorf("nodepool %s is no longer available", nnc.NodePool)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A panic (in the provider's client, a webhook's decoder, ...)
			// fails this NodeClaim only; the round and the process go on.
			if err := recovery.Do(ctx, "creating nodeclaim", func() {
				if err := reserve(np); err != nil {
					errs[i] = fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err)
					return
				}
				out[i], errs[i] = p.create(ctx, np, nnc)
			}); err != nil {
				errs[i] = fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, planned *scheduling.NewNodeClaim) (*v1.NodeClaim, error) {
	nc := buildNodeClaim(np, planned, p.opts.ReservationIDLabel)
	if err := p.kube.Create(ctx, nc); err != nil {
		return nil, fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err)
	}
	if tracker, ok := p.cluster.(NodeClaimTracker); ok {
		tracker.UpdateNodeClaim(nc)
	}
	for _, pod := range planned.Pods {
		if snapshot.IsVirtual(pod) {
			// Held from now: the next round would place the virtual
			// pods here, but a disruption pass may come first.
			p.opts.Buffers.Add(nc.Name)
			break
		}
	}
	metrics.NodeClaimsCreatedTotal.WithLabelValues(metrics.ProvisionedReason, np.Name, fmt.Sprint(planned.MinValuesRelaxed)).Inc()
	names := make([]string, 0, len(planned.InstanceTypes))
	for _, it := range planned.InstanceTypes {
		names = append(names, it.Name)
	}
	log.FromContext(ctx).WithValues(
		"NodePool", klog.KObj(np),
		"NodeClaim", klog.KObj(nc),
		"requests", nc.Spec.Resources.Requests,
		"instance-types", prettySlice(names, 5),
	).Info("created nodeclaim")
	return nc, nil
}

// podNames names the pods that exist and counts the expected ones.
func podNames(pods []*corev1.Pod) (names []string, expected int) {
	names = make([]string, 0, len(pods))
	for _, pod := range pods {
		if IsExpected(pod) {
			expected++
			continue
		}
		names = append(names, pod.Namespace+"/"+pod.Name)
	}
	return names, expected
}

// prettySlice joins at most max items and summarises the rest, as in
// "a, b, c and 55 other(s)".
func prettySlice(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d other(s)", strings.Join(items[:max], ", "), len(items)-max)
}
