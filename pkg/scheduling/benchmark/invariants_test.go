package benchmark

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// planBuilder hand-writes plans for the small scale workload, so that the
// checker can be shown to catch each kind of broken plan.
type planBuilder struct {
	t   *testing.T
	w   *ScaleWorkload
	res *scheduling.Result
}

func newPlanBuilder(t *testing.T, w *ScaleWorkload) *planBuilder {
	res := &scheduling.Result{}
	for _, p := range w.Input.Pods {
		res.Placements = append(res.Placements, scheduling.Placement{
			Pod: p, NodeClaim: -1,
			Errors: []scheduling.PlacementError{{NodePool: "test", Reason: "left out by the test"}},
		})
	}
	return &planBuilder{t: t, w: w, res: res}
}

func (b *planBuilder) pool(name string) *scheduling.NodePool {
	for _, p := range b.w.Input.NodePools {
		if p.Name == name {
			return p
		}
	}
	b.t.Fatalf("no pool %s", name)
	return nil
}

func (b *planBuilder) instanceType(name string) *scheduling.InstanceType {
	for _, it := range b.w.Input.NodePools[0].InstanceTypes {
		if it.Name == name {
			return it
		}
	}
	b.t.Fatalf("no instance type %s", name)
	return nil
}

// nodeClaim adds a NodeClaim of pool in zone with capacity type ct listing
// the named types (in the given order) and returns its index.
func (b *planBuilder) nodeClaim(pool, zone, ct string, types ...string) int {
	p := b.pool(pool)
	reqs := p.Requirements.Intersect(scheduling.NewRequirements(
		scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, zone),
		scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, ct),
		scheduling.NewRequirement(scheduling.LabelInstanceType, scheduling.OpIn, types...),
	))
	nc := &scheduling.NewNodeClaim{
		NodePool: pool, Hostname: fmt.Sprintf("hostname-%d", len(b.res.NewNodeClaims)),
		Requirements: reqs, Labels: map[string]string{PoolLabel: pool}, Taints: p.Taints,
	}
	for _, name := range types {
		nc.InstanceTypes = append(nc.InstanceTypes, b.instanceType(name))
	}
	b.res.NewNodeClaims = append(b.res.NewNodeClaims, nc)
	return len(b.res.NewNodeClaims) - 1
}

func (b *planBuilder) toNodeClaim(nc int, pods ...*corev1.Pod) {
	for _, p := range pods {
		pl := b.placement(p)
		pl.NodeClaim, pl.Errors = nc, nil
		b.res.NewNodeClaims[nc].Pods = append(b.res.NewNodeClaims[nc].Pods, p)
	}
}

func (b *planBuilder) toNode(node string, pods ...*corev1.Pod) {
	for _, p := range pods {
		pl := b.placement(p)
		pl.Node, pl.Errors = node, nil
	}
}

func (b *planBuilder) placement(p *corev1.Pod) *scheduling.Placement {
	for i := range b.res.Placements {
		if b.res.Placements[i].Pod == p {
			return &b.res.Placements[i]
		}
	}
	b.t.Fatalf("pod %s is not pending", podName(p))
	return nil
}

// pick returns pending pods that satisfy ok, at least n of them.
func pick(t *testing.T, w *ScaleWorkload, n int, ok func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range w.Input.Pods {
		if ok(p) {
			out = append(out, p)
		}
	}
	require.GreaterOrEqual(t, len(out), n, "not enough pods for the case")
	return out
}

func isPlain(p *corev1.Pod) bool {
	return len(p.Spec.TopologySpreadConstraints) == 0 && p.Spec.Affinity == nil &&
		len(p.Spec.NodeSelector) == 0 && len(p.Spec.Tolerations) == 0
}

func isTinyPlain(p *corev1.Pod) bool {
	return isPlain(p) && p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() <= 250
}

func isAnti(p *corev1.Pod) bool {
	return p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil
}

// byApp groups pods by app label, keeping first-seen order of apps.
func byApp(pods []*corev1.Pod) ([]string, map[string][]*corev1.Pod) {
	var order []string
	m := map[string][]*corev1.Pod{}
	for _, p := range pods {
		app := p.Labels[AppLabelKey]
		if _, ok := m[app]; !ok {
			order = append(order, app)
		}
		m[app] = append(m[app], p)
	}
	return order, m
}

func TestCheckPlan(t *testing.T) {
	cfg := ScaleConfigFor(500, 50)
	cfg.OnDemandShare = 0.5 // the small mix may have no on-demand-only app
	w, err := GenerateScale(cfg)
	require.NoError(t, err)
	const zoneA, od, spot = "us-test-1a", scheduling.CapacityTypeOnDemand, scheduling.CapacityTypeSpot

	// A general node with room for one tiny pod.
	roomy := func(b *planBuilder) string {
		for _, n := range w.Input.Nodes {
			if len(n.Taints) > 0 {
				continue
			}
			free := n.Allocatable.Cpu().AsApproximateFloat64() - sumRequests(nil, n.Pods...)[corev1.ResourceCPU]
			if free >= 1 {
				return n.Name
			}
		}
		b.t.Fatal("no roomy node")
		return ""
	}

	for _, tc := range []struct {
		name string
		plan func(b *planBuilder)
		want string // "" means the plan is sound
	}{
		{"nothing placed", func(b *planBuilder) {}, ""},
		{"sound plan", func(b *planBuilder) {
			tiny := pick(t, w, 2, isTinyPlain)
			b.toNodeClaim(b.nodeClaim(PoolGeneral, zoneA, od, "m6i.large", "m6i.xlarge"), tiny[0])
			b.toNode(roomy(b), tiny[1])
		}, ""},
		{"unplaced pod without a reason", func(b *planBuilder) {
			b.res.Placements[0].Errors = nil
		}, "without a reason"},
		{"existing node over-committed", func(b *planBuilder) {
			b.toNode(roomy(b), pick(t, w, 50, isPlain)...)
		}, "over-committed"},
		{"nodeclaim over-committed", func(b *planBuilder) {
			b.toNodeClaim(b.nodeClaim(PoolArm, zoneA, od, "c6g.medium"), pick(t, w, 20, isPlain)[:20]...)
		}, "nodeclaim hostname-0 over-committed (1 of 1 listed types; first: as c6g.medium"},
		{"daemonset overhead counted", func(b *planBuilder) {
			// c6g.medium has 940m allocatable: 900m of pods fit, but not
			// beside the 100m node agent.
			var pods []*corev1.Pod
			var cpu int64
			for _, p := range pick(t, w, 1, isPlain) {
				c := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
				if c <= 250 && cpu+c <= 900 && p.Spec.Containers[0].Resources.Requests.Memory().Value() <= 128<<20 {
					pods = append(pods, p)
					cpu += c
				}
			}
			require.Greater(t, cpu, int64(840))
			b.toNodeClaim(b.nodeClaim(PoolArm, zoneA, od, "c6g.medium"), pods...)
		}, "first: as c6g.medium on cpu"},
		{"anti-affinity on a nodeclaim", func(b *planBuilder) {
			order, apps := byApp(pick(t, w, 2, isAnti))
			for _, app := range order {
				if len(apps[app]) >= 2 {
					b.toNodeClaim(b.nodeClaim(PoolGeneral, zoneA, od, "m6i.16xlarge"), apps[app][:2]...)
					return
				}
			}
			t.Fatal("no anti app with two pending pods")
		}, "anti-affinity"},
		{"anti-affinity against a running replica", func(b *planBuilder) {
			for _, n := range w.Input.Nodes {
				for _, running := range n.Pods {
					if !isAnti(running) {
						continue
					}
					for _, p := range w.Input.Pods {
						if p.Labels[AppLabelKey] == running.Labels[AppLabelKey] {
							b.toNode(n.Name, p)
							return
						}
					}
				}
			}
			t.Fatal("no running anti replica with a pending sibling")
		}, "anti-affinity"},
		{"zone spread skew", func(b *planBuilder) {
			order, apps := byApp(pick(t, w, 1, func(p *corev1.Pod) bool { return len(p.Spec.TopologySpreadConstraints) > 0 }))
			for _, app := range order {
				// Running replicas per zone decide whether 3+ more in one zone break maxSkew 1.
				count := map[string]int{}
				for _, n := range w.Input.Nodes {
					for _, p := range n.Pods {
						if p.Labels[AppLabelKey] == app {
							count[n.Labels[corev1.LabelTopologyZone]]++
						}
					}
				}
				least := min(count["us-test-1a"], count["us-test-1b"], count["us-test-1c"])
				if count[zoneA]+len(apps[app]) > least+1 {
					b.toNodeClaim(b.nodeClaim(PoolGeneral, zoneA, od, "m6i.32xlarge"), apps[app]...)
					return
				}
			}
			t.Fatal("no spread app that can be skewed")
		}, "emptiest zone"},
		{"spread pod on a nodeclaim with an open zone", func(b *planBuilder) {
			p := pick(t, w, 1, func(p *corev1.Pod) bool { return len(p.Spec.TopologySpreadConstraints) > 0 })[0]
			nc := b.nodeClaim(PoolGeneral, zoneA, od, "m6i.4xlarge")
			b.res.NewNodeClaims[nc].Requirements[scheduling.LabelZone] = scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, ScaleZones...)
			b.toNodeClaim(nc, p)
		}, "leaves its zone open"},
		{"taint not tolerated", func(b *planBuilder) {
			b.toNodeClaim(b.nodeClaim(PoolGPU, zoneA, od, "g5.xlarge"), pick(t, w, 1, isTinyPlain)[0])
		}, "does not tolerate taint nvidia.com/gpu"},
		{"nodepool taint dropped", func(b *planBuilder) {
			gpuPod := pick(t, w, 1, func(p *corev1.Pod) bool { return len(p.Spec.Tolerations) > 0 })[0]
			nc := b.nodeClaim(PoolGPU, zoneA, od, "g5.4xlarge")
			b.res.NewNodeClaims[nc].Taints = nil
			b.toNodeClaim(nc, gpuPod)
		}, "lacks its nodepool's taint"},
		{"nodeSelector not guaranteed", func(b *planBuilder) {
			p := pick(t, w, 1, func(p *corev1.Pod) bool { return p.Spec.NodeSelector[corev1.LabelArchStable] == "amd64" })[0]
			b.toNodeClaim(b.nodeClaim(PoolArm, zoneA, od, "m7g.8xlarge"), p)
		}, "nodeSelector kubernetes.io/arch=amd64"},
		{"capacity type left open for an on-demand pod", func(b *planBuilder) {
			p := pick(t, w, 1, func(p *corev1.Pod) bool {
				return p.Spec.NodeSelector[scheduling.LabelCapacityType] == od
			})[0]
			nc := b.nodeClaim(PoolGeneral, zoneA, od, "m6i.8xlarge")
			b.res.NewNodeClaims[nc].Requirements[scheduling.LabelCapacityType] =
				scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, od, spot)
			b.toNodeClaim(nc, p)
		}, "nodeSelector karpenter.sh/capacity-type=on-demand"},
		{"instance type without a launchable offering", func(b *planBuilder) {
			for _, it := range b.pool(PoolGeneral).InstanceTypes {
				for _, o := range it.Offerings {
					if o.CapacityType == spot && !o.Available && strings.HasPrefix(it.Name, "m6i.") {
						b.toNodeClaim(b.nodeClaim(PoolGeneral, o.Zone, spot, it.Name), pick(t, w, 1, isTinyPlain)[0])
						return
					}
				}
			}
			t.Fatal("every m6i spot offering is available")
		}, "no launchable offering"},
		{"instance type the pool excludes", func(b *planBuilder) {
			nc := b.nodeClaim(PoolGeneral, zoneA, od, "m6i.large")
			b.res.NewNodeClaims[nc].InstanceTypes = append(b.res.NewNodeClaims[nc].InstanceTypes, b.instanceType("m5.large"))
			b.toNodeClaim(nc, pick(t, w, 1, isTinyPlain)[0])
		}, "conflict with its requirements"},
		{"instance types not cheapest first", func(b *planBuilder) {
			b.toNodeClaim(b.nodeClaim(PoolGeneral, zoneA, od, "m6i.xlarge", "m6i.large"), pick(t, w, 1, isTinyPlain)[0])
		}, "not cheapest first"},
		{"nodepool limit", func(b *planBuilder) {
			// The small arm pool has 75 cpu of headroom.
			b.toNodeClaim(b.nodeClaim(PoolArm, zoneA, od, "c7g.16xlarge", "c8g.48xlarge"), pick(t, w, 1, isTinyPlain)[0])
		}, "nodepool arm: nodeclaims may use 192 cpu"},
		{"pod list disagrees with placements", func(b *planBuilder) {
			nc := b.nodeClaim(PoolGeneral, zoneA, od, "m6i.large")
			tiny := pick(t, w, 2, isTinyPlain)
			b.toNodeClaim(nc, tiny[0])
			b.res.NewNodeClaims[nc].Pods = append(b.res.NewNodeClaims[nc].Pods, tiny[1])
		}, "Pods lists 2 pods"},
		{"empty nodeclaim", func(b *planBuilder) {
			b.nodeClaim(PoolGeneral, zoneA, od, "m6i.large")
		}, "has no pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPlanBuilder(t, w)
			tc.plan(b)
			errs := CheckPlan(w.Input, b.res)
			if tc.want == "" {
				require.Empty(t, errs)
				return
			}
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			require.Contains(t, strings.Join(msgs, "\n"), tc.want)
		})
	}
}

// onePerPod is a deliberately naive but sound planner: every pending pod
// gets a NodeClaim of its own, from the first pool (by weight) that can take
// it, in the emptiest zone of its spread group. It gives CheckPlan and
// MeasureScale a real, valid plan to judge.
func onePerPod(t *testing.T, w *ScaleWorkload) *scheduling.Result {
	in := w.Input
	zoneCount := map[string]map[string]int{}
	app := func(p *corev1.Pod) string { return p.Namespace + "/" + p.Labels[AppLabelKey] }
	for _, n := range in.Nodes {
		for _, p := range n.Pods {
			if zoneCount[app(p)] == nil {
				zoneCount[app(p)] = map[string]int{}
			}
			zoneCount[app(p)][n.Labels[corev1.LabelTopologyZone]]++
		}
	}
	headroom := map[string]float64{}
	for _, pool := range in.NodePools {
		if q, ok := pool.Remaining[corev1.ResourceCPU]; ok {
			headroom[pool.Name] = q.AsApproximateFloat64()
		}
	}
	agent := &corev1.Pod{Spec: in.DaemonSets[0].Spec.Template.Spec}
	res := &scheduling.Result{}
	memo := map[string][]*scheduling.InstanceType{}
	c := &checker{} // for its allocatable cache
	for i, p := range in.Pods {
		pl := scheduling.Placement{Pod: p, NodeClaim: -1}
		zone := ScaleZones[i%len(ScaleZones)]
		if len(p.Spec.TopologySpreadConstraints) > 0 {
			for _, z := range ScaleZones {
				if zoneCount[app(p)][z] < zoneCount[app(p)][zone] {
					zone = z
				}
			}
		}
		for _, pool := range in.NodePools {
			ok := true
			for _, taint := range pool.Taints {
				ok = ok && tolerates(p, taint)
			}
			if !ok {
				continue
			}
			reqs := pool.Requirements.Intersect(scheduling.NewRequirements(
				scheduling.NewRequirement(scheduling.LabelZone, scheduling.OpIn, zone),
				scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, scheduling.CapacityTypeOnDemand)))
			for k, v := range p.Spec.NodeSelector {
				reqs.Add(scheduling.NewRequirement(scheduling.NormalizeKey(k), scheduling.OpIn, v))
			}
			demand := sumRequests(nil, agent, p)
			limit, limited := headroom[pool.Name]
			type priced struct {
				it    *scheduling.InstanceType
				price float64
			}
			var fit []priced
			key := pool.Name + "|" + reqs.String()
			compatible, seen := memo[key]
			if !seen {
				for _, it := range pool.InstanceTypes {
					if it.Requirements.Intersects(reqs) == nil {
						compatible = append(compatible, it)
					}
				}
				memo[key] = compatible
			}
			for _, it := range compatible {
				if _, _, _, over := overCommitted(demand, c.allocatable(it)); over {
					continue
				}
				if limited && it.Capacity.Cpu().AsApproximateFloat64() > limit {
					continue
				}
				for _, o := range it.Offerings {
					if o.Available && o.Zone == zone && o.CapacityType == scheduling.CapacityTypeOnDemand {
						fit = append(fit, priced{it, o.Price})
					}
				}
			}
			if len(fit) == 0 {
				continue
			}
			sort.SliceStable(fit, func(a, b int) bool { return fit[a].price < fit[b].price })
			fit = fit[:min(len(fit), scheduling.DefaultMaxInstanceTypes)]
			nc := &scheduling.NewNodeClaim{
				NodePool: pool.Name, Hostname: fmt.Sprintf("one-per-pod-%d", i),
				Labels: pool.Labels, Taints: pool.Taints, Pods: []*corev1.Pod{p}, Price: fit[0].price,
			}
			var names []string
			most := 0.0
			for _, f := range fit {
				nc.InstanceTypes = append(nc.InstanceTypes, f.it)
				names = append(names, f.it.Name)
				most = max(most, f.it.Capacity.Cpu().AsApproximateFloat64())
			}
			if limited {
				headroom[pool.Name] -= most
			}
			reqs.Add(scheduling.NewRequirement(scheduling.LabelInstanceType, scheduling.OpIn, names...))
			nc.Requirements = reqs
			pl.NodeClaim = len(res.NewNodeClaims)
			res.NewNodeClaims = append(res.NewNodeClaims, nc)
			if zoneCount[app(p)] == nil {
				zoneCount[app(p)] = map[string]int{}
			}
			zoneCount[app(p)][zone]++
			break
		}
		if pl.NodeClaim < 0 {
			pl.Errors = []scheduling.PlacementError{{NodePool: "any", Reason: "no pool fits"}}
		}
		res.Placements = append(res.Placements, pl)
	}
	return res
}

// TestCheckPlanAcceptsSoundPlan guards against false alarms: a valid plan
// passes, and its cost is never below the lower bound.
func TestCheckPlanAcceptsSoundPlan(t *testing.T) {
	cfgs := []ScaleConfig{ScaleConfigFor(500, 50), PlainScaleConfig(500)}
	if !testing.Short() {
		cfgs = append(cfgs, ScaleConfigFor(2000, 100))
	}
	for _, cfg := range cfgs {
		w, err := GenerateScale(cfg)
		require.NoError(t, err)
		res := onePerPod(t, w)
		for _, e := range CheckPlan(w.Input, res) {
			t.Error(e)
		}
		m, err := MeasureScale(res, w.Input, w.Catalogue)
		require.NoError(t, err)
		t.Logf("pods=%d placed on %d nodeclaims, unscheduled=%d cost=%.2f bound=%.2f ratio=%.2f packing ratio=%.2f",
			m.Pods, m.NodeClaims, m.Unscheduled, m.Cost, m.Bound, m.Ratio, m.PackingRatio)
		require.Zero(t, m.Unscheduled)
		require.GreaterOrEqual(t, m.Ratio, 1.0)
		require.GreaterOrEqual(t, m.PackingRatio, 1.0)
	}
}
