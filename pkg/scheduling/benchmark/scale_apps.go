package benchmark

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// The scale workload's apps: their shapes, replicas already running on the
// existing nodes, and the pending pods the solver is asked about.

func (g *scaleGen) pickShape(shapes []podShape) podShape {
	total := 0
	for _, s := range shapes {
		total += s.weight
	}
	r := g.rng.Intn(total)
	for _, s := range shapes {
		if r < s.weight {
			return s
		}
		r -= s.weight
	}
	return shapes[len(shapes)-1]
}

func (g *scaleGen) newApp(kind appKind, shape podShape) *scaleApp {
	g.appSeq++
	prefix := map[appKind]string{appPlain: "web", appSpread: "zonal", appAnti: "solo", appGPU: "train", appBackground: "svc"}[kind]
	return &scaleApp{
		name:      fmt.Sprintf("%s-%04d", prefix, g.appSeq),
		namespace: scaleNamespaces[g.rng.Intn(len(scaleNamespaces))],
		kind:      kind,
		shape:     shape,
		created:   metav1.NewTime(scaleEpoch.Add(time.Duration(g.appSeq) * time.Second)),
	}
}

// makeApps splits the pending pods into apps of each kind with exact totals.
func (g *scaleGen) makeApps() {
	n := g.cfg.Pods
	spread := int(math.Round(g.cfg.SpreadFraction * float64(n)))
	anti := int(math.Round(g.cfg.AntiAffinityFraction * float64(n)))
	gpu := int(math.Round(g.cfg.GPUFraction * float64(n)))
	plain := max(0, n-spread-anti-gpu)
	add := func(kind appKind, budget, minRep, maxRep int) {
		for budget > 0 {
			shapes := scaleShapes
			if kind == appGPU {
				shapes = scaleGPUPodShapes
			}
			a := g.newApp(kind, g.pickShape(shapes))
			a.pending = min(budget, minRep+g.rng.Intn(maxRep-minRep+1))
			budget -= a.pending
			switch kind {
			case appGPU:
				a.tolerateGPU = true
			case appPlain:
				if g.rng.Float64() < g.cfg.AMD64Share {
					a.nodeSelector = map[string]string{corev1.LabelArchStable: "amd64"}
				} else if g.rng.Float64() < g.cfg.OnDemandShare {
					a.nodeSelector = map[string]string{scheduling.LabelCapacityType: scheduling.CapacityTypeOnDemand}
				}
				a.tolerateGPU = g.rng.Float64() < g.cfg.TolerateGPUShare
			}
			g.apps = append(g.apps, a)
		}
	}
	add(appSpread, spread, 3, 48)
	add(appAnti, anti, 2, 30)
	add(appGPU, gpu, 1, 8)
	add(appPlain, plain, 1, 80)
}

// fits reports whether one replica of a can run on n now.
func (n *scaleNode) fits(a *scaleApp) bool {
	if n.node.Taints != nil && !a.tolerateGPU {
		return false
	}
	for k, v := range a.nodeSelector {
		if n.node.Labels[k] != v {
			return false
		}
	}
	if a.kind == appAnti && n.apps[a.name] {
		return false
	}
	return n.freeCPU >= a.shape.cpuMilli && n.freeMem >= a.shape.memMi &&
		n.freeGPU >= a.shape.gpus && n.freePods >= 1
}

func (g *scaleGen) bind(n *scaleNode, p *corev1.Pod, s podShape) {
	n.node.Pods = append(n.node.Pods, p)
	n.freeCPU -= s.cpuMilli
	n.freeMem -= s.memMi
	n.freeGPU -= s.gpus
	n.freePods--
	if app := p.Labels[AppLabelKey]; app != "" {
		n.apps[app] = true
	}
}

// placeRunningReplicas gives a share of pending apps some replicas that
// already run, on random nodes that can hold them (distinct ones for
// anti-affinity apps). A replica that finds no room in a few tries is
// dropped: the cluster is allowed to be full.
func (g *scaleGen) placeRunningReplicas() {
	if len(g.nodes) == 0 {
		return
	}
	for _, a := range g.apps {
		if g.rng.Float64() >= g.cfg.RunningShare {
			continue
		}
		running := 1 + g.rng.Intn(max(1, a.pending/2))
		for range running {
			for try := 0; try < 8; try++ {
				n := g.nodes[g.rng.Intn(len(g.nodes))]
				if n.fits(a) {
					g.bind(n, g.appPod(a, n.node.Name), a.shape)
					break
				}
			}
		}
	}
}

// fillBackground loads every node to a random 45–90% of cpu and memory
// with pods of apps that are not pending at all.
func (g *scaleGen) fillBackground() {
	for _, n := range g.nodes {
		alloc := n.node.Allocatable
		cpu, mem := alloc.Cpu().MilliValue(), alloc.Memory().Value()>>20
		target := 0.45 + 0.45*g.rng.Float64()
		for misses := 0; misses < 4; {
			a := g.newApp(appBackground, g.pickShape(scaleShapes))
			a.tolerateGPU = n.pool == PoolGPU
			usedCPU, usedMem := float64(cpu-n.freeCPU), float64(mem-n.freeMem)
			if usedCPU+float64(a.shape.cpuMilli) > target*float64(cpu) ||
				usedMem+float64(a.shape.memMi) > target*float64(mem) || !n.fits(a) {
				g.appSeq-- // the app was never used; keep names dense
				misses++
				continue
			}
			g.bind(n, g.appPod(a, n.node.Name), a.shape)
		}
	}
}

// pendingPods builds every app's pending replicas and shuffles them, as a
// snapshot of a real cluster would list them in no useful order.
func (g *scaleGen) pendingPods() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, g.cfg.Pods)
	for _, a := range g.apps {
		for range a.pending {
			p := g.appPod(a, "")
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}}}
			out = append(out, p)
		}
	}
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// appPod builds one replica of a; nodeName binds it.
func (g *scaleGen) appPod(a *scaleApp, nodeName string) *corev1.Pod {
	g.podSeq++
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(a.shape.cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(a.shape.memMi<<20, resource.BinarySI),
	}
	var limits corev1.ResourceList
	if a.shape.gpus > 0 {
		// Extended resources must have limit == request.
		gpus := *resource.NewQuantity(a.shape.gpus, resource.DecimalSI)
		requests[ResourceGPU] = gpus
		limits = corev1.ResourceList{ResourceGPU: gpus}
	}
	labels := map[string]string{AppLabelKey: a.name}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("%s-%06d", a.name, g.podSeq),
			Namespace:         a.namespace,
			UID:               g.uid(),
			Labels:            labels,
			CreationTimestamp: a.created,
		},
		Spec: corev1.PodSpec{
			NodeName:     nodeName,
			NodeSelector: a.nodeSelector,
			Containers: []corev1.Container{{
				Name:      "main",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
	if nodeName != "" {
		p.Status.Phase = corev1.PodRunning
	}
	if a.tolerateGPU {
		p.Spec.Tolerations = []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	self := &metav1.LabelSelector{MatchLabels: map[string]string{AppLabelKey: a.name}}
	switch a.kind {
	case appSpread:
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: self,
		}}
	case appAnti:
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: self, TopologyKey: corev1.LabelHostname},
			},
		}}
	}
	return p
}
