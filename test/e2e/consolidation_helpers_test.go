package e2e_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// consolidationPool is a NodePool for the consolidation tests: amd64 Linux
// nodes of the default KWOKNodeClass labelled e2ePoolLabel=name, a budget
// of 100% so that only the consolidation rules decide, and consolidateAfter
// 0s so that nodes are candidates as soon as their pods settle.
type consolidationPool struct {
	name string
	// policy defaults to WhenEmptyOrUnderutilized.
	policy string
	// capacityType defaults to on-demand.
	capacityType string
	// instanceTypes, families and categories restrict the catalog
	// (node.kubernetes.io/instance-type, karpenter.k8s.aws/instance-family,
	// karpenter.k8s.aws/instance-category) when set.
	instanceTypes, families, categories []string
	// zones restrict topology.kubernetes.io/zone when set.
	zones []string
	// underutilizedBudget, when set, is a budget of nodes for the
	// Underutilized reason beside the pool's 100% one.
	underutilizedBudget string
}

func (p consolidationPool) yaml() string {
	policy, ct := v1.ConsolidationPolicy(p.policy), p.capacityType
	if policy == "" {
		policy = v1.ConsolidationPolicyWhenEmptyOrUnderutilized
	}
	if ct == "" {
		ct = v1.CapacityTypeOnDemand
	}
	opts := []poolOpt{
		requirement(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		requirement(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
		requirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, ct),
	}
	for _, r := range []struct {
		key    string
		values []string
	}{
		{corev1.LabelInstanceTypeStable, p.instanceTypes},
		{"karpenter.k8s.aws/instance-family", p.families},
		{"karpenter.k8s.aws/instance-category", p.categories},
		{corev1.LabelTopologyZone, p.zones},
	} {
		if len(r.values) > 0 {
			opts = append(opts, requirement(r.key, corev1.NodeSelectorOpIn, r.values...))
		}
	}
	bs := []v1.Budget{nodesBudget("100%", "", 0)}
	if p.underutilizedBudget != "" {
		bs = append(bs, nodesBudget(p.underutilizedBudget, "", 0, v1.DisruptionReasonUnderutilized))
	}
	opts = append(opts, consolidation(policy, "0s"), budgets(bs...))
	return manifest(testPool(p.name, opts...))
}

// consolidationWorkload is a pause Deployment pinned to a pool (nodeSelector
// on e2ePoolLabel) with the given requests; app=name labels its pods.
type consolidationWorkload struct {
	name, pool  string
	replicas    int
	cpu, memory string
	// annotations go on the pod template.
	annotations map[string]string
}

func (w consolidationWorkload) yaml() string {
	memory := w.memory
	if memory == "" {
		memory = "128Mi"
	}
	return manifest(pauseDeployment(w.name, int32(w.replicas), w.cpu, memory, onPool(w.pool), podAnnotations(w.annotations)))
}

// readyPods returns app's pods that are Ready and not deleting, by node.
func readyPods(ctx context.Context, cp *controlplane.ControlPlane, app string) map[string][]corev1.Pod {
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return nil
	}
	out := map[string][]corev1.Pod{}
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			out[pods.Items[i].Spec.NodeName] = append(out[pods.Items[i].Spec.NodeName], pods.Items[i])
		}
	}
	return out
}

func countPods(byNode map[string][]corev1.Pod) int {
	n := 0
	for _, ps := range byNode {
		n += len(ps)
	}
	return n
}

// settled reports whether pool has exactly nodes live NodeClaims, all
// Initialized, and app has want Ready pods, all on those NodeClaims' nodes.
func settled(ctx context.Context, cp *controlplane.ControlPlane, pool string, nodes int, app string, want int) bool {
	claims, err := poolClaims(ctx, cp, pool)
	if err != nil {
		return false
	}
	live := map[string]bool{}
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil {
			return false
		}
		if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			return false
		}
		live[nc.Status.NodeName] = true
	}
	if len(live) != nodes {
		return false
	}
	pods := readyPods(ctx, cp, app)
	for node := range pods {
		if !live[node] {
			return false
		}
	}
	return countPods(pods) == want
}

// keepOnePodPerNode gives one Ready pod of app on each node a high
// controller.kubernetes.io/pod-deletion-cost, so that scaling the
// Deployment down to the number of nodes leaves exactly one pod on each.
func keepOnePodPerNode(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, app string) {
	t.Helper()
	for _, pods := range readyPods(ctx, cp, app) {
		setDeletionCost(t, ctx, cp, pods[0], 1000)
	}
}

// setDeletionCost sets p's controller.kubernetes.io/pod-deletion-cost, as
// a user would: the ReplicaSet controller removes the lowest first.
func setDeletionCost(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, p corev1.Pod, cost int) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, v1.PodDeletionCostAnnotationKey, cost)
	require.NoErrorf(t, cp.Client.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}},
		client.RawPatch(types.MergePatchType, []byte(patch))), "setting the deletion cost of %s on %s", p.Name, p.Spec.NodeName)
}

// claimRecord is what the ledger saw of one NodeClaim.
type claimRecord struct {
	name, pool, instanceType, capacityType string
	// typeOptions are the values of the NodeClaim's instance-type
	// requirement (the types it may launch as).
	typeOptions []string
	firstSeen   time.Time
	// disrupted is when the Node was first seen tainted
	// karpenter.sh/disrupted or the NodeClaim deleting; gone when the
	// NodeClaim was first missing.
	disrupted, gone time.Time
}

// claimLedger lists NodeClaims and Nodes every 200 ms and remembers every
// NodeClaim it saw, so a test can tell replacements from originals and see
// what was disrupted, however briefly.
type claimLedger struct {
	mu     sync.Mutex
	claims map[string]*claimRecord
	errs   []string
	stop   chan struct{}
	done   chan struct{}
}

func watchClaims(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane) *claimLedger {
	t.Helper()
	l := &claimLedger{claims: map[string]*claimRecord{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer func() {
			if p := recover(); p != nil {
				l.mu.Lock()
				l.errs = append(l.errs, fmt.Sprintf("claim ledger panicked: %v", p))
				l.mu.Unlock()
			}
		}()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			l.sample(ctx, cp)
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		l.halt()
		for _, e := range l.errs {
			t.Error(e)
		}
	})
	return l
}

func (l *claimLedger) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

func (l *claimLedger) sample(ctx context.Context, cp *controlplane.ControlPlane) {
	var claims v1.NodeClaimList
	var nodes corev1.NodeList
	if cp.Client.List(ctx, &claims) != nil || cp.Client.List(ctx, &nodes) != nil {
		return
	}
	now := time.Now()
	tainted := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.DeletionTimestamp != nil || hasTaint(n, v1.DisruptedTaintKey) {
			tainted[n.Name] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	present := map[string]bool{}
	for i := range claims.Items {
		nc := &claims.Items[i]
		present[nc.Name] = true
		r := l.claims[nc.Name]
		if r == nil {
			r = &claimRecord{name: nc.Name, pool: nc.Labels[v1.NodePoolLabelKey], firstSeen: now}
			for _, req := range nc.Spec.Requirements {
				if req.Key == corev1.LabelInstanceTypeStable && req.Operator == corev1.NodeSelectorOpIn {
					r.typeOptions = append([]string(nil), req.Values...)
				}
			}
			l.claims[nc.Name] = r
		}
		if it := nc.Labels[corev1.LabelInstanceTypeStable]; it != "" {
			r.instanceType = it
		}
		if ct := nc.Labels[v1.CapacityTypeLabelKey]; ct != "" {
			r.capacityType = ct
		}
		if r.disrupted.IsZero() && (nc.DeletionTimestamp != nil || (nc.Status.NodeName != "" && tainted[nc.Status.NodeName])) {
			r.disrupted = now
		}
	}
	for name, r := range l.claims {
		if !present[name] && r.gone.IsZero() {
			r.gone = now
			if r.disrupted.IsZero() {
				r.disrupted = now
			}
		}
	}
}

// log prints the pools' histories.
func (l *claimLedger) log(t *testing.T, pools ...string) {
	t.Helper()
	for _, p := range pools {
		for _, r := range l.pool(p) {
			t.Logf("%s: %s (may launch as %d types)", p, r, len(r.typeOptions))
		}
	}
}

// logOnFailure prints the pools' histories if the test fails.
func (l *claimLedger) logOnFailure(t *testing.T, pools ...string) {
	t.Cleanup(func() {
		if t.Failed() {
			l.log(t, pools...)
		}
	})
}

// pool returns copies of the pool's records, oldest first.
func (l *claimLedger) pool(pool string) []claimRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []claimRecord
	for _, r := range l.claims {
		if r.pool == pool {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].firstSeen.Equal(out[j].firstSeen) {
			return out[i].firstSeen.Before(out[j].firstSeen)
		}
		return out[i].name < out[j].name
	})
	return out
}

// record returns a copy of the named record.
func (l *claimLedger) record(name string) (claimRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.claims[name]
	if !ok {
		return claimRecord{}, false
	}
	return *r, true
}

// disruptedAny reports whether any of names was seen disrupted.
func (l *claimLedger) disruptedAny(names ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		if r := l.claims[n]; r != nil && !r.disrupted.IsZero() {
			return n
		}
	}
	return ""
}

func (r claimRecord) String() string {
	s := fmt.Sprintf("%s %s/%s", r.name, r.instanceType, r.capacityType)
	if !r.disrupted.IsZero() {
		s += " disrupted " + r.disrupted.Format("15:04:05.0")
	}
	if !r.gone.IsZero() {
		s += " gone " + r.gone.Format("15:04:05.0")
	}
	return s
}

// requireNoSameTypeReplacement checks the pool's history since originals
// were taken: no NodeClaim launched since then has the instance type and
// capacity type of an original that was disrupted (a same-type
// replacement moves pods and saves nothing).
func requireNoSameTypeReplacement(t *testing.T, l *claimLedger, pool string, originals map[string]bool) {
	t.Helper()
	disrupted := map[string]string{}
	var launched []claimRecord
	for _, r := range l.pool(pool) {
		switch {
		case originals[r.name] && !r.disrupted.IsZero():
			disrupted[r.instanceType+"/"+r.capacityType] = r.name
		case !originals[r.name]:
			launched = append(launched, r)
		}
	}
	for _, r := range launched {
		key := r.instanceType + "/" + r.capacityType
		require.Emptyf(t, disrupted[key], "%s: %s replaced %s with the same instance type and capacity type %s", pool, r.name, disrupted[key], key)
	}
}

// catalogPrice is the default kwok catalog's price of the type's offering
// in the capacity type (every zone of the catalog has the same prices).
func catalogPrice(t *testing.T, instanceType, capacityType string) float64 {
	t.Helper()
	its, err := kwok.LoadCatalog(kwok.CatalogDefault)
	require.NoError(t, err)
	for _, it := range its {
		if it.Name != instanceType {
			continue
		}
		price := math.Inf(1)
		for _, o := range it.Offerings {
			if o.CapacityType == capacityType && o.Price < price {
				price = o.Price
			}
		}
		require.Falsef(t, math.IsInf(price, 1), "%s has no %s offering", instanceType, capacityType)
		return price
	}
	t.Fatalf("%s is not in the default kwok catalog", instanceType)
	return 0
}

// cheaperTypes lists, cheapest first, the default catalog's amd64 types
// that a pool restricted to categories/families (nil: no restriction)
// offers, whose allocatable fits requests and whose capacityType price is
// below price: the options consolidation has to replace such a node.
func cheaperTypes(t *testing.T, categories, families []string, capacityType string, requests corev1.ResourceList, price float64) []string {
	t.Helper()
	its, err := kwok.LoadCatalog(kwok.CatalogDefault)
	require.NoError(t, err)
	in := func(vals []string, v string) bool {
		if vals == nil {
			return true
		}
		for _, x := range vals {
			if x == v {
				return true
			}
		}
		return false
	}
	prices := map[string]float64{}
	var out []string
	for _, it := range its {
		if single(it, corev1.LabelArchStable) != "amd64" ||
			!in(categories, single(it, "karpenter.k8s.aws/instance-category")) ||
			!in(families, single(it, "karpenter.k8s.aws/instance-family")) ||
			!fitsIn(requests, cloudprovider.Allocatable(it)) {
			continue
		}
		p := math.Inf(1)
		for _, o := range it.Offerings {
			if o.Available && o.CapacityType == capacityType && o.Price < p {
				p = o.Price
			}
		}
		if p < price {
			prices[it.Name] = p
			out = append(out, it.Name)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return prices[out[i]] < prices[out[j]] })
	return out
}

func single(it *cloudprovider.InstanceType, key string) string {
	if vals := it.Requirements.Get(key).Values(); len(vals) == 1 {
		return vals[0]
	}
	return ""
}

// eventWith returns the first message of an event with reason on the Node
// or NodeClaim called name that contains every one of parts, or "".
func eventWith(ctx context.Context, cp *controlplane.ControlPlane, name, reason string, parts ...string) string {
	for _, kind := range []string{"Node", "NodeClaim"} {
		for _, m := range eventMessages(ctx, cp, kind, name, reason) {
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

// allEvents lists the reasons and messages of every event on the Node or
// NodeClaim called name, for failure messages.
func allEvents(ctx context.Context, cp *controlplane.ControlPlane, name string) []string {
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events); err != nil {
		return nil
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && (e.InvolvedObject.Kind == "Node" || e.InvolvedObject.Kind == "NodeClaim") {
			out = append(out, e.InvolvedObject.Kind+" "+e.Reason+": "+e.Message)
		}
	}
	sort.Strings(out)
	return out
}

// consolidatable reports whether every named NodeClaim is Consolidatable.
func consolidatable(ctx context.Context, cp *controlplane.ControlPlane, names ...string) bool {
	for _, name := range names {
		nc := &v1.NodeClaim{}
		if cp.Client.Get(ctx, client.ObjectKey{Name: name}, nc) != nil || !conditionTrue(nc.Status.Conditions, v1.ConditionTypeConsolidatable) {
			return false
		}
	}
	return true
}

// liveClaims returns the pool's NodeClaims that are not deleting.
func liveClaims(ctx context.Context, cp *controlplane.ControlPlane, pool string) []v1.NodeClaim {
	claims, err := poolClaims(ctx, cp, pool)
	if err != nil {
		return nil
	}
	var out []v1.NodeClaim
	for _, nc := range claims {
		if nc.DeletionTimestamp == nil {
			out = append(out, nc)
		}
	}
	return out
}

// metricSum adds the values of every sample of name whose labels include
// want.
func metricSum(samples []metricSample, name string, want map[string]string) float64 {
	total := 0.0
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			total += s.value
		}
	}
	return total
}
