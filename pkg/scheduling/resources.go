package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequests returns what a pod needs from a node, following the kubelet's
// rule: the larger of (app containers + sidecars) and the peak reached while
// init containers run one by one (each on top of the sidecars started before
// it), plus the pod overhead. A container that sets only a limit requests
// its limit, as the API server would default it.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	apps := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addContainerRequests(apps, &pod.Spec.Containers[i])
	}
	if len(pod.Spec.InitContainers) == 0 {
		addList(apps, pod.Spec.Overhead)
		return apps
	}
	sidecars := corev1.ResourceList{}
	peak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(sidecars, r)
			maxList(peak, sidecars)
			continue
		}
		step := sidecars.DeepCopy()
		addList(step, r)
		maxList(peak, step)
	}
	addList(apps, sidecars)
	maxList(apps, peak)
	addList(apps, pod.Spec.Overhead)
	return apps
}

// addContainerRequests adds what containerRequests returns to dst without
// building it: PodRequests runs for every pod on every node in every solve.
func addContainerRequests(dst corev1.ResourceList, c *corev1.Container) {
	for k, v := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[k]; !ok {
			q := dst[k]
			q.Add(v)
			dst[k] = q
		}
	}
	addList(dst, c.Resources.Requests)
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range c.Resources.Limits {
		out[k] = v.DeepCopy()
	}
	for k, v := range c.Resources.Requests {
		out[k] = v.DeepCopy()
	}
	return out
}

func addList(dst, src corev1.ResourceList) {
	for k, v := range src {
		q := dst[k]
		q.Add(v)
		dst[k] = q
	}
}

func maxList(dst, src corev1.ResourceList) {
	for k, v := range src {
		if q, ok := dst[k]; !ok || v.Cmp(q) > 0 {
			dst[k] = v.DeepCopy()
		}
	}
}

// resIndex assigns each resource name a slot in a dense vector so that fit
// checks are a loop over int64s instead of map lookups on quantities. cpu is
// kept in millicores, everything else in base units.
type resIndex struct {
	names []corev1.ResourceName
	pos   map[corev1.ResourceName]int
}

const (
	resCPU  = 0
	resMem  = 1
	resPods = 2
)

func newResIndex() *resIndex {
	ri := &resIndex{pos: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		ri.add(n)
	}
	return ri
}

func (ri *resIndex) add(n corev1.ResourceName) int {
	if i, ok := ri.pos[n]; ok {
		return i
	}
	ri.pos[n] = len(ri.names)
	ri.names = append(ri.names, n)
	return len(ri.names) - 1
}

// addAll registers names in sorted order so the layout is deterministic.
func (ri *resIndex) addAll(l corev1.ResourceList) {
	if len(l) == 0 {
		return
	}
	names := make([]string, 0, len(l))
	for k := range l {
		if _, ok := ri.pos[k]; !ok {
			names = append(names, string(k))
		}
	}
	sort.Strings(names)
	for _, n := range names {
		ri.add(corev1.ResourceName(n))
	}
}

type vec []int64

func (ri *resIndex) vec(l corev1.ResourceList) vec {
	v := make(vec, len(ri.names))
	for k, q := range l {
		i, ok := ri.pos[k]
		if !ok {
			continue
		}
		v[i] = units(k, q)
	}
	return v
}

// units is q as the solver counts it: CPU in millicores, the rest in
// whole units, each rounded up.
func units(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func (ri *resIndex) list(v vec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, x := range v {
		if x == 0 {
			continue
		}
		switch i {
		case resCPU:
			out[ri.names[i]] = *resource.NewMilliQuantity(x, resource.DecimalSI)
		case resMem:
			out[ri.names[i]] = *resource.NewQuantity(x, resource.BinarySI)
		default:
			out[ri.names[i]] = *resource.NewQuantity(x, resource.DecimalSI)
		}
	}
	return out
}

// fits reports whether used+add ≤ alloc in every dimension. Vectors may be
// shorter than the index when built before a name was registered.
func fits(used, add, alloc vec) bool {
	for i := range alloc {
		var u, a int64
		if i < len(used) {
			u = used[i]
		}
		if i < len(add) {
			a = add[i]
		}
		if u+a > alloc[i] {
			return false
		}
	}
	for i := len(alloc); i < len(add); i++ {
		if add[i] > 0 {
			return false
		}
	}
	return true
}

func (v vec) add(o vec) {
	for i := range o {
		v[i] += o[i]
	}
}

func (v vec) sub(o vec) {
	for i := range o {
		v[i] -= o[i]
	}
}

func (v vec) clone() vec { return append(vec(nil), v...) }

func (v vec) maxWith(o vec) {
	for i := range o {
		if o[i] > v[i] {
			v[i] = o[i]
		}
	}
}

// firstShort names the first resource where used+add exceeds alloc.
func (ri *resIndex) firstShort(used, add, alloc vec) string {
	for i := range ri.names {
		var u, a, al int64
		if i < len(used) {
			u = used[i]
		}
		if i < len(add) {
			a = add[i]
		}
		if i < len(alloc) {
			al = alloc[i]
		}
		if u+a > al {
			return string(ri.names[i])
		}
	}
	return ""
}
