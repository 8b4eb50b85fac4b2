package workload

import (
	"errors"
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Demand is a total resource demand in base units (cores, bytes, pods).
type Demand map[corev1.ResourceName]float64

// PodRequests is what one pod occupies on a node, by the Kubernetes rule:
// regular containers and sidecars (restartable init containers) run side by
// side and add up; each ordinary init container runs alone beside the
// sidecars started before it, so only the peak counts; pod overhead is added
// on top. "pods" counts the pod itself.
func PodRequests(p *corev1.Pod) Demand {
	sum := Demand{}
	add := func(d Demand, rl corev1.ResourceList) {
		for name, q := range rl {
			d[name] += q.AsApproximateFloat64()
		}
	}
	for _, c := range p.Spec.Containers {
		add(sum, c.Resources.Requests)
	}
	sidecars := Demand{}
	peak := Demand{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, c.Resources.Requests)
			add(sum, c.Resources.Requests)
			continue
		}
		step := Demand{}
		add(step, c.Resources.Requests)
		for name, v := range sidecars {
			step[name] += v
		}
		for name, v := range step {
			peak[name] = math.Max(peak[name], v)
		}
	}
	for name, v := range peak {
		sum[name] = math.Max(sum[name], v)
	}
	add(sum, p.Spec.Overhead)
	sum[corev1.ResourcePods] = 1
	return sum
}

// TotalDemand adds up PodRequests over pods.
func TotalDemand(pods []*corev1.Pod) Demand {
	total := Demand{}
	for _, p := range pods {
		for name, v := range PodRequests(p) {
			total[name] += v
		}
	}
	return total
}

// Bound is a floor on the hourly cost of any set of nodes that can hold a
// demand. Both figures ignore that pods are indivisible and that constraints
// (spread, anti-affinity) may force more nodes, so no real plan beats them.
type Bound struct {
	// LP is the optimum of the linear relaxation: buy fractional amounts of
	// each type so that every resource is covered, at minimum price. It is
	// never below PerResource.
	LP float64
	// PerResource is the largest, over resources, of demand times the
	// cheapest price per allocatable unit of that resource.
	PerResource float64
	// Binding is the resource behind PerResource.
	Binding corev1.ResourceName
}

// ErrInfeasible means some demanded resource is offered by no type.
var ErrInfeasible = errors.New("workload: demand cannot be covered by the catalogue")

// LowerBound computes Bound for a demand over the types that have an
// available offering, each priced at its cheapest one.
func LowerBound(demand Demand, types []InstanceType) (Bound, error) {
	names := make([]corev1.ResourceName, 0, len(demand))
	for name, v := range demand {
		if v > 0 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })

	// a[t][r] is type t's allocatable of resource r as a fraction of the
	// demand, which keeps bytes and cores on the same scale for the simplex.
	var a [][]float64
	var price []float64
	for _, it := range types {
		p, ok := it.CheapestPrice()
		if !ok {
			continue
		}
		alloc := it.Allocatable()
		row := make([]float64, len(names))
		for j, name := range names {
			if q, ok := alloc[name]; ok {
				row[j] = math.Max(0, q.AsApproximateFloat64()/demand[name])
			}
		}
		a = append(a, row)
		price = append(price, p)
	}

	var b Bound
	for j, name := range names {
		best := math.Inf(1)
		for t := range a {
			if a[t][j] > 0 {
				best = math.Min(best, price[t]/a[t][j])
			}
		}
		if math.IsInf(best, 1) {
			return Bound{}, fmt.Errorf("%w: no type has allocatable %s", ErrInfeasible, name)
		}
		if best > b.PerResource || b.Binding == "" {
			b.PerResource, b.Binding = best, name
		}
	}
	if len(names) == 0 {
		return b, nil
	}
	lp, err := coverLP(a, price)
	if err != nil {
		return Bound{}, err
	}
	// Rounding in the simplex must not push the LP below the simpler bound,
	// which is itself a feasible dual point.
	b.LP = math.Max(lp, b.PerResource)
	return b, nil
}

// coverLP solves min Σ price_t x_t subject to Σ_t a[t][r] x_t ≥ 1 for every
// r, x ≥ 0, through its dual: max Σ y_r subject to Σ_r a[t][r] y_r ≤ price_t,
// y ≥ 0. The dual has one row per type and one column per resource, its
// origin is feasible (prices are not negative), so a plain one-phase simplex
// suffices. Bland's rule avoids cycling: the catalogue's proportional
// types make ties the norm.
func coverLP(a [][]float64, price []float64) (float64, error) {
	n, m := len(a), len(a[0])
	cols := m + n // resource duals, then one slack per type
	tab := make([][]float64, n)
	basis := make([]int, n)
	for t := range tab {
		row := make([]float64, cols+1)
		copy(row, a[t])
		row[m+t] = 1
		row[cols] = price[t]
		tab[t] = row
		basis[t] = m + t
	}
	// obj holds reduced costs as "gain per unit"; the objective is Σ y_r.
	obj := make([]float64, cols+1)
	for j := range m {
		obj[j] = 1
	}
	const eps = 1e-12
	for iter := 0; ; iter++ {
		if iter > 50*(n+m)+1000 {
			return 0, errors.New("workload: lower-bound simplex did not converge")
		}
		enter := -1
		for j := range cols {
			if obj[j] > eps {
				enter = j
				break
			}
		}
		if enter < 0 {
			return -obj[cols], nil
		}
		leave := -1
		bestRatio := math.Inf(1)
		for t := range tab {
			if c := tab[t][enter]; c > eps {
				r := tab[t][cols] / c
				if r < bestRatio-eps || (r <= bestRatio+eps && leave >= 0 && basis[t] < basis[leave]) {
					bestRatio, leave = r, t
				}
			}
		}
		if leave < 0 {
			return 0, ErrInfeasible // dual unbounded: a resource nobody supplies
		}
		pivot(tab, obj, leave, enter)
		basis[leave] = enter
	}
}

func pivot(tab [][]float64, obj []float64, row, col int) {
	pr := tab[row]
	inv := 1 / pr[col]
	for j := range pr {
		pr[j] *= inv
	}
	for t, r := range tab {
		if t == row || r[col] == 0 {
			continue
		}
		f := r[col]
		for j := range r {
			r[j] -= f * pr[j]
		}
	}
	f := obj[col]
	for j := range obj {
		obj[j] -= f * pr[j]
	}
}
