package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// controllerName labels logs and metrics of the provisioning loop.
const controllerName = "provisioner"

// createParallelism bounds concurrent NodeClaim creates in one round.
const createParallelism = 10

// Options tune the provisioner; zero values are upstream's defaults.
type Options struct {
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
	Clock       clock.Clock
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
func (p *Provisioner) TriggerPod(pod *corev1.Pod) { p.Trigger(p.triggerKey(pod)) }

func (p *Provisioner) triggerKey(pod *corev1.Pod) string {
	if p.opts.AnticipateReplicaSets {
		if uid, ok := anticipatable(pod); ok {
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
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", controllerName))
		for ctx.Err() == nil {
			p.Reconcile(ctx)
		}
		return nil
	}))
}

// Reconcile is one turn of the loop: wait for a batch, then provision.
func (p *Provisioner) Reconcile(ctx context.Context) {
	if !p.batcher.Wait(ctx) {
		return
	}
	if _, err := p.Provision(ctx); err != nil {
		if errors.Is(err, errNotSynced) {
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

var errNotSynced = errors.New("cluster state is not synced")

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
	if !p.cluster.Synced(ctx) {
		return nil, nil, nil, errNotSynced
	}
	start := p.clock.Now()
	// Nodes before pods: a pod that binds in between is then seen on its
	// node or as pending, never as neither, and a node that appears in
	// between is not counted. Either way the round errs on the side of
	// launching nothing extra.
	nodes := p.cluster.SchedulingNodes()
	all := &corev1.PodList{}
	if err := p.kube.List(ctx, all); err != nil {
		return nil, nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	pods := p.pendingPods(ctx, all)
	if p.opts.AnticipateReplicaSets {
		expected, err := p.expectedPods(ctx, all, pods)
		if err != nil {
			return nil, nil, nil, err
		}
		pods = append(pods, expected...)
	}
	moving, leaving, err := p.reschedulablePods(ctx, all)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(leaving) > 0 {
		kept := nodes[:0:0]
		for _, n := range nodes {
			if !leaving[n.Name] {
				kept = append(kept, n)
			}
		}
		nodes = kept
	}
	pods = append(pods, moving...)
	if len(pods) == 0 {
		return nil, nil, nil, nil
	}
	in, pools, err := p.input(ctx, pods, nodes)
	if err != nil {
		return nil, nil, nil, err
	}
	claimOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if n.NodeClaim != "" {
			claimOf[n.Name] = n.NodeClaim
		}
	}
	in.Nominations = p.reserved.nominations(pods, nodes)
	solveStart := p.clock.Now()
	res := scheduling.Solve(in)
	metrics.SchedulingDurationSeconds.WithLabelValues(controllerName).Observe(p.clock.Since(solveStart).Seconds())

	names, expected := podNames(pods)
	logger := log.FromContext(ctx).WithValues("Pods", prettySlice(names, 5), "duration", p.clock.Since(start))
	if expected > 0 {
		logger = logger.WithValues("expected", expected)
	}
	if routine(pods, res) {
		// Only pods the kube-scheduler has yet to place, all fitting
		// existing capacity: nothing for Karpenter to do or to say.
		logger.V(1).Info("found provisionable pod(s)")
	} else {
		logger.Info("found provisionable pod(s)")
	}
	p.record(ctx, res)
	return res, pools, claimOf, nil
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
		if failedToSchedule(pod) {
			return false
		}
	}
	return true
}

// pendingPods lists the provisionable pods that pass validation; the rest
// get a FailedScheduling event (pods that opted out get nothing).
func (p *Provisioner) pendingPods(ctx context.Context, list *corev1.PodList) []*corev1.Pod {
	var out []*corev1.Pod
	ignored := 0
	for i := range list.Items {
		pod := &list.Items[i]
		if !IsProvisionable(pod) {
			continue
		}
		if err := validatePod(pod); err != nil {
			ignored++
			if !errors.Is(err, errNotManaged) {
				failedScheduling(p.recorder, pod, err.Error())
			}
			log.FromContext(ctx).V(1).Info("ignoring pod", "Pod", klog.KObj(pod), "reason", err.Error())
			continue
		}
		out = append(out, pod)
	}
	metrics.IgnoredPodsCount.Set(float64(ignored))
	return out
}

// reschedulablePods returns the pods that must move off Karpenter nodes that
// are being deleted or disrupted, so that their replacement capacity is
// planned before they are evicted, and the names of those nodes. DaemonSet
// and static pods stay with their node, and pods tolerating the disrupted
// taint are not drained.
func (p *Provisioner) reschedulablePods(ctx context.Context, all *corev1.PodList) ([]*corev1.Pod, map[string]bool, error) {
	nodes := &corev1.NodeList{}
	if err := p.kube.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	leaving := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !n.DeletionTimestamp.IsZero() || hasDisruptedTaint(n) {
			leaving[n.Name] = true
		}
	}
	if len(leaving) == 0 {
		return nil, nil, nil
	}
	var out []*corev1.Pod
	for i := range all.Items {
		pod := &all.Items[i]
		if !leaving[pod.Spec.NodeName] {
			continue
		}
		if ownedBy(pod, "DaemonSet") || ownedBy(pod, "Node") || !pod.DeletionTimestamp.IsZero() ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
			toleratesDisrupted(pod) {
			continue
		}
		moved := pod.DeepCopy()
		moved.Spec.NodeName = ""
		out = append(out, moved)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, leaving, nil
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}

func toleratesDisrupted(pod *corev1.Pod) bool {
	for _, tol := range pod.Spec.Tolerations {
		if tol.ToleratesTaint(klog.Background(), &v1.DisruptedNoScheduleTaint, false) {
			return true
		}
	}
	return false
}

// input assembles the solver's snapshot.
func (p *Provisioner) input(ctx context.Context, pods []*corev1.Pod, nodes []*scheduling.ExistingNode) (*scheduling.Input, map[string]*v1.NodePool, error) {
	pools, byName, err := p.nodePools(ctx)
	if err != nil {
		return nil, nil, err
	}
	in := &scheduling.Input{
		Pods:      pods,
		Nodes:     nodes,
		NodePools: pools,
		Options: scheduling.Options{
			PreferencePolicy: scheduling.PreferencePolicy(p.opts.PreferencePolicy),
			MinValuesPolicy:  scheduling.MinValuesPolicy(p.opts.MinValuesPolicy),
			Robust:           true,
		},
	}
	if p.opts.Unavailable != nil {
		in.Unavailable = p.opts.Unavailable.Keys()
	}
	dsList := &appsv1.DaemonSetList{}
	if err := p.kube.List(ctx, dsList); err != nil {
		return nil, nil, fmt.Errorf("listing daemonsets: %w", err)
	}
	for i := range dsList.Items {
		in.DaemonSets = append(in.DaemonSets, &dsList.Items[i])
	}
	nsList := &corev1.NamespaceList{}
	if err := p.kube.List(ctx, nsList); err != nil {
		return nil, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range nsList.Items {
		in.Namespaces = append(in.Namespaces, &nsList.Items[i])
	}
	if usesVolumes(pods) {
		if err := p.addVolumes(ctx, in); err != nil {
			return nil, nil, err
		}
	}
	return in, byName, nil
}

func usesVolumes(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
				return true
			}
		}
	}
	return false
}

// addVolumes lists storage objects only when some pod needs them, so that a
// cluster without volumes never starts informers for them.
func (p *Provisioner) addVolumes(ctx context.Context, in *scheduling.Input) error {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := p.kube.List(ctx, pvcs); err != nil {
		return fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	for i := range pvcs.Items {
		in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, &pvcs.Items[i])
	}
	pvs := &corev1.PersistentVolumeList{}
	if err := p.kube.List(ctx, pvs); err != nil {
		return fmt.Errorf("listing persistentvolumes: %w", err)
	}
	for i := range pvs.Items {
		in.PersistentVolumes = append(in.PersistentVolumes, &pvs.Items[i])
	}
	scs := &storagev1.StorageClassList{}
	if err := p.kube.List(ctx, scs); err != nil {
		return fmt.Errorf("listing storageclasses: %w", err)
	}
	for i := range scs.Items {
		in.StorageClasses = append(in.StorageClasses, &scs.Items[i])
	}
	return nil
}

// nodePools converts the Ready, non-deleting, dynamic NodePools for the
// solver, heaviest first, each with its instance types and limit headroom.
func (p *Provisioner) nodePools(ctx context.Context) ([]*scheduling.NodePool, map[string]*v1.NodePool, error) {
	list := &v1.NodePoolList{}
	if err := p.kube.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("listing nodepools: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		wi, wj := weight(&list.Items[i]), weight(&list.Items[j])
		if wi != wj {
			return wi > wj
		}
		return list.Items[i].Name < list.Items[j].Name
	})
	var out []*scheduling.NodePool
	byName := map[string]*v1.NodePool{}
	for i := range list.Items {
		np := &list.Items[i]
		if !np.DeletionTimestamp.IsZero() || np.IsStatic() || !nodepool.IsReady(np) {
			continue
		}
		logger := log.FromContext(ctx).WithValues("NodePool", klog.KObj(np))
		reqs, err := toSolverRequirements(np.Spec.Template.Spec.Requirements)
		if err != nil {
			logger.Error(err, "skipping, invalid requirements")
			continue
		}
		its, err := p.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			logger.Error(err, "skipping, unable to resolve instance types")
			continue
		}
		if len(its) == 0 {
			logger.Info("skipping, no resolved instance types found")
			continue
		}
		labels := np.Spec.Template.LabelMap()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1.NodePoolLabelKey] = np.Name
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
			labels[v1.NodeClassLabelKey(ref.GroupKind())] = ref.Name
		}
		out = append(out, &scheduling.NodePool{
			Name:          np.Name,
			Weight:        weight(np),
			Requirements:  reqs,
			Labels:        labels,
			Taints:        np.Spec.Template.Spec.Taints,
			StartupTaints: np.Spec.Template.Spec.StartupTaints,
			Remaining:     remaining(np.Spec.Limits, p.cluster.NodePoolResources(np.Name)),
			InstanceTypes: its,
		})
		byName[np.Name] = np
	}
	return out, byName, nil
}

func weight(np *v1.NodePool) int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// record publishes the solver's verdict: Nominated for pods that fit
// existing capacity, FailedScheduling (and an error log) for pods that fit
// nowhere, and the summary log lines.
func (p *Provisioner) record(ctx context.Context, res *scheduling.Result) {
	logger := log.FromContext(ctx)
	nominator, _ := p.cluster.(PodNominator)
	nominated := map[string]bool{}
	unschedulable, existing := 0, 0
	for _, pl := range res.Placements {
		switch {
		case pl.Node != "":
			// A pod the kube-scheduler has not tried yet and that fits what
			// is there will simply be scheduled: announcing it would put an
			// event on every new pod in a cluster with room.
			if failedToSchedule(pl.Pod) && !IsExpected(pl.Pod) {
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
	metrics.UnschedulablePodsCount.WithLabelValues(controllerName).Set(float64(unschedulable))
	newPods := 0
	for _, nc := range res.NewNodeClaims {
		newPods += len(nc.Pods)
	}
	if newPods > 0 {
		logger.WithValues("nodeclaims", len(res.NewNodeClaims), "pods", newPods).Info("computed new nodeclaim(s) to fit pod(s)")
	}
	if existing > 0 {
		logger.Info(fmt.Sprintf("computed %d unready node(s) will fit %d pod(s)", len(nominated), existing))
	}
}

// nodeTarget names an existing placement. In-flight NodeClaims without a
// node are passed to the solver under the NodeClaim's name.
func nodeTarget(name string) string { return "node/" + name }

// CreateNodeClaims creates the planned NodeClaims in parallel, re-checking
// each pool's limits against current usage first (another round or a
// manual NodeClaim may have used the headroom since the plan was made). It
// returns the created objects in plan order, nil where creation was skipped
// or failed, and the joined errors.
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
	sem := make(chan struct{}, createParallelism)
	var wg sync.WaitGroup
	for i, nnc := range planned {
		np := pools[nnc.NodePool]
		if np == nil {
			errs[i] = fmt.Errorf("nodepool %s is no longer available", nnc.NodePool)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			limitsMu.Lock()
			used := usage[np.Name].DeepCopy()
			if used == nil {
				used = corev1.ResourceList{}
			}
			n := used[v1.ResourceNodes]
			n.Add(*resourceInt(extraNodes[np.Name]))
			used[v1.ResourceNodes] = n
			if err := exceededBy(np.Spec.Limits, used); err != nil {
				limitsMu.Unlock()
				errs[i] = fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err)
				return
			}
			extraNodes[np.Name]++
			limitsMu.Unlock()
			nc, err := p.create(ctx, np, nnc)
			if err != nil {
				errs[i] = err
				return
			}
			out[i] = nc
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (p *Provisioner) create(ctx context.Context, np *v1.NodePool, planned *scheduling.NewNodeClaim) (*v1.NodeClaim, error) {
	nc := buildNodeClaim(np, planned)
	if err := p.kube.Create(ctx, nc); err != nil {
		return nil, fmt.Errorf("creating nodeclaim for nodepool %s: %w", np.Name, err)
	}
	if tracker, ok := p.cluster.(NodeClaimTracker); ok {
		tracker.UpdateNodeClaim(nc)
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
