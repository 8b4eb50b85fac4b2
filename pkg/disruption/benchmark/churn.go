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

	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// ChurnResult is one algorithm's replay of a churn trace.
type ChurnResult struct {
	Algorithm string
	Hours     float64
	Commands  int
	Evictions int
	// Fresh counts evicted pods that needed a newly provisioned node.
	Fresh int
	// MeanPrice is the fleet's $/h averaged over the trace's steps (after
	// each step's provisioning and consolidation).
	MeanPrice float64
}

// EvictionsPerHour is Evictions over Hours.
func (r ChurnResult) EvictionsPerHour() float64 { return float64(r.Evictions) / r.Hours }

// trace is every deployment's replica count at every step.
type trace struct {
	deployments []string
	replicas    [][]int // [step][deployment]
}

// newTrace moves each deployment's replicas around a daily curve (a sine
// with a 24 h period, ±25%), then by a random ±10–30% at each step.
func newTrace(base map[string]int, steps int, step time.Duration, seed int64) trace {
	rng := rand.New(rand.NewSource(seed))
	t := trace{}
	for d := range base {
		t.deployments = append(t.deployments, d)
	}
	sort.Strings(t.deployments)
	phase := make([]float64, len(t.deployments))
	for i := range phase {
		phase[i] = rng.Float64() * math.Pi / 2
	}
	for s := 0; s < steps; s++ {
		hours := (time.Duration(s+1) * step).Hours()
		row := make([]int, len(t.deployments))
		for i, d := range t.deployments {
			daily := 1 + 0.25*math.Sin(2*math.Pi*hours/24+phase[i])
			jitter := 0.1 + 0.2*rng.Float64()
			if rng.Intn(2) == 0 {
				jitter = -jitter
			}
			row[i] = max(1, int(math.Round(float64(base[d])*daily*(1+jitter))))
		}
		t.replicas = append(t.replicas, row)
	}
	return t
}

func shapeNamed(name string) shape {
	for _, s := range shapes {
		if s.name == name {
			return s
		}
	}
	return shapes[0]
}

// Churn replays hours of the trace (a step every step) on a cluster of
// nodes nodes: each step scales the deployments (removed pods go, new ones
// are created and provisioned by the solver), then, a minute later, runs
// consolidation passes of alg until one finds nothing (at most
// passesPerStep).
func Churn(alg Algorithm, nodes int, seed int64, hours float64, step time.Duration, passesPerStep int) (ChurnResult, error) {
	c, err := NewCluster(nodes, 0, seed)
	if err != nil {
		return ChurnResult{}, err
	}
	base := map[string]int{}
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			if disruption.Reschedulable(p) {
				base[p.Labels["app"]]++
			}
		}
	}
	steps := int(math.Round(hours * float64(time.Hour) / float64(step)))
	tr := newTrace(base, steps, step, seed+1)
	rng := rand.New(rand.NewSource(seed + 2))
	r := ChurnResult{Algorithm: alg.Name, Hours: hours}
	methods := disruption.MethodsOf(alg.Strategy)
	priceSum := 0.0
	for s := 0; s < steps; s++ {
		now := Epoch.Add(time.Duration(s+1) * step)
		c.Snap.Now = now
		pending := c.scaleTo(tr, s, rng)
		if _, err := c.Provision(pending, now); err != nil {
			return r, fmt.Errorf("step %d: provisioning: %w", s, err)
		}
		c.sortNodes()
		// Consolidation comes after the scale, as it would in a cluster
		// (the pods it creates are older than its evictions' replacements).
		now = now.Add(time.Minute)
		c.Snap.Now = now
		for pass := 0; pass < passesPerStep; pass++ {
			var sim disruption.Simulator
			if alg.Simulator != nil {
				sim = alg.Simulator(c.Snap)
			}
			d, err := disruption.Disrupt(c.Snap, methods, sim)
			if err != nil {
				return r, fmt.Errorf("step %d: %w", s, err)
			}
			c.applyDrain(alg)
			if len(d.Commands) == 0 {
				break
			}
			launched, err := c.Execute(d.Commands, now)
			if err != nil {
				return r, fmt.Errorf("step %d: %w", s, err)
			}
			alg.executed(now, d.Commands, launched)
			c.sortNodes()
		}
		priceSum += c.Price()
	}
	r.MeanPrice = priceSum / float64(steps)
	r.Commands, r.Evictions, r.Fresh = c.Commands, c.Evictions, c.Fresh
	return r, nil
}

// scaleTo removes pods at random from deployments above the step's count
// and returns new pending pods for those below it.
func (c *Cluster) scaleTo(tr trace, s int, rng *rand.Rand) []*corev1.Pod {
	type ref struct {
		n *disruption.Node
		p *corev1.Pod
	}
	have := map[string][]ref{}
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			if disruption.Reschedulable(p) {
				have[p.Labels["app"]] = append(have[p.Labels["app"]], ref{n, p})
			}
		}
	}
	drop := map[*corev1.Pod]bool{}
	var pending []*corev1.Pod
	for i, d := range tr.deployments {
		want, cur := tr.replicas[s][i], have[d]
		switch {
		case len(cur) > want:
			// The ReplicaSet controller removes the pods with the lowest
			// pod-deletion-cost first; among equals, at random here.
			perm := rng.Perm(len(cur))
			sort.SliceStable(perm, func(a, b int) bool {
				return disruption.DeletionCost(cur[perm[a]].p) < disruption.DeletionCost(cur[perm[b]].p)
			})
			for _, k := range perm[:len(cur)-want] {
				drop[cur[k].p] = true
			}
		case len(cur) < want:
			pool, shapeName, _ := strings.Cut(d, "-")
			for k := 0; k < want-len(cur); k++ {
				p := c.appPod(pool, shapeNamed(shapeName))
				p.CreationTimestamp = metav1.NewTime(c.Snap.Now)
				pending = append(pending, p)
			}
		}
	}
	if len(drop) > 0 {
		for _, n := range c.Snap.Nodes {
			kept := n.Pods[:0]
			for _, p := range n.Pods {
				if !drop[p] {
					kept = append(kept, p)
				}
			}
			n.Pods = kept
		}
	}
	return pending
}

// ChurnTable renders churn results.
func ChurnTable(rs []ChurnResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %6s %9s %10s %8s %6s %10s\n", "algorithm", "hours", "commands", "evictions", "evict/h", "fresh", "mean $/h")
	for _, r := range rs {
		fmt.Fprintf(&b, "%-16s %6.1f %9d %10d %8.1f %6d %10.3f\n", r.Algorithm, r.Hours, r.Commands, r.Evictions, r.EvictionsPerHour(), r.Fresh, r.MeanPrice)
	}
	return b.String()
}
