package benchmark

import (
	"fmt"
	"math"
	"math/rand"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// The scale workload is our own design (issue 3, "a scale benchmark"): a
// busy cluster that a solver has to answer about in one go. Pods belong to
// apps (think Deployments); an app has one shape and one kind of constraint,
// and some apps already run replicas on the existing nodes, so that topology
// counts and anti-affinity start from a non-empty cluster.

// NodePool names of the scale workload.
const (
	PoolGeneral = "general"
	PoolArm     = "arm"
	PoolGPU     = "gpu"
	// PoolLabel is a template label each pool puts on its nodes.
	PoolLabel = "example.com/pool"
	// AppLabelKey is the label every scale pod carries; spread and
	// anti-affinity select on it.
	AppLabelKey = "app"
)

// ScaleConfig sizes and shapes the scale workload. Fractions are of all
// pending pods; shares are of plain apps.
type ScaleConfig struct {
	Seed          int64
	Pods          int
	ExistingNodes int
	// SpreadFraction of pods have a zonal topology spread (maxSkew 1,
	// DoNotSchedule, selecting their own app); AntiAffinityFraction have
	// required hostname anti-affinity to their own app; GPUFraction request
	// one nvidia.com/gpu and tolerate the gpu pool's taint. The rest is plain.
	SpreadFraction       float64
	AntiAffinityFraction float64
	GPUFraction          float64
	// Shares of plain apps that select kubernetes.io/arch=amd64, select
	// on-demand capacity, or tolerate the gpu taint without needing a GPU.
	AMD64Share       float64
	OnDemandShare    float64
	TolerateGPUShare float64
	// RunningShare of pending apps already run some replicas on existing nodes.
	RunningShare float64
	// ArmHeadroomCPU is the cpu left under the arm pool's limit; 0 means the
	// pool is unlimited.
	ArmHeadroomCPU int64
	// SinglePool replaces the three pools with one unconstrained, untainted
	// pool over the whole catalogue: the setting for the quality figure.
	SinglePool bool
}

// ScaleConfigFor returns the benchmark's mix for a number of pods and
// existing nodes: 20% zonal spread, 10% hostname anti-affinity, 1% GPU pods,
// and an arm pool limit that leaves 0.15 cpu per pending pod, so that the
// preferred (heavier) arm pool fills up and the rest spills to general.
func ScaleConfigFor(pods, nodes int) ScaleConfig {
	return ScaleConfig{
		Seed:                 7,
		Pods:                 pods,
		ExistingNodes:        nodes,
		SpreadFraction:       0.20,
		AntiAffinityFraction: 0.10,
		GPUFraction:          0.01,
		AMD64Share:           0.15,
		OnDemandShare:        0.05,
		TolerateGPUShare:     0.05,
		RunningShare:         0.5,
		ArmHeadroomCPU:       int64(math.Ceil(0.15 * float64(pods))),
	}
}

// DefaultScaleConfig is the scale benchmark: 20,000 pending pods and
// 1,000 existing nodes.
func DefaultScaleConfig() ScaleConfig { return ScaleConfigFor(20000, 1000) }

// PlainScaleConfig is the quality-figure workload: the same app shapes with
// no constraints at all, an empty cluster and a single pool.
func PlainScaleConfig(pods int) ScaleConfig {
	return ScaleConfig{Seed: 11, Pods: pods, SinglePool: true}
}

// ScaleWorkload is a generated snapshot plus the neutral catalogue it was
// built from (which workload.LowerBound needs).
type ScaleWorkload struct {
	Config    ScaleConfig
	Catalogue []workload.InstanceType
	Input     *scheduling.Input
}

// podShape is an app's per-replica request.
type podShape struct {
	cpuMilli, memMi, gpus int64
	weight                int
}

// scaleShapes are the plain/spread/anti app shapes with their draw weights
// (out of 100): mostly small web-style pods, a tail of big ones.
var scaleShapes = []podShape{
	{cpuMilli: 100, memMi: 128, weight: 20},
	{cpuMilli: 250, memMi: 512, weight: 25},
	{cpuMilli: 500, memMi: 1024, weight: 20},
	{cpuMilli: 1000, memMi: 2048, weight: 15},
	{cpuMilli: 500, memMi: 4096, weight: 8},
	{cpuMilli: 2000, memMi: 2048, weight: 7},
	{cpuMilli: 4000, memMi: 16384, weight: 4},
	{cpuMilli: 8000, memMi: 32768, weight: 1},
}

var scaleGPUPodShapes = []podShape{
	{cpuMilli: 2000, memMi: 8192, gpus: 1, weight: 1},
	{cpuMilli: 4000, memMi: 16384, gpus: 1, weight: 1},
	{cpuMilli: 8000, memMi: 32768, gpus: 1, weight: 1},
}

var scaleNamespaces = []string{"checkout", "search", "payments", "ml", "platform"}

// scaleEpoch stamps every pod: the workload must not depend on the clock.
var scaleEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type appKind int

const (
	appPlain appKind = iota
	appSpread
	appAnti
	appGPU
	appBackground // runs on existing nodes only
)

type scaleApp struct {
	name, namespace string
	kind            appKind
	shape           podShape
	nodeSelector    map[string]string
	tolerateGPU     bool
	pending         int
	created         metav1.Time
}

// gpuTaint keeps pods that do not ask for the gpu pool off its nodes.
var gpuTaint = corev1.Taint{Key: string(ResourceGPU), Value: "true", Effect: corev1.TaintEffectNoSchedule}

// scaleGen carries the generator state.
type scaleGen struct {
	cfg    ScaleConfig
	rng    *rand.Rand
	cat    []workload.InstanceType
	types  []*scheduling.InstanceType
	nodes  []*scaleNode
	apps   []*scaleApp
	podSeq int
	appSeq int
}

type scaleNode struct {
	node                      *scheduling.ExistingNode
	pool                      string
	freeCPU, freeMem, freeGPU int64 // milli, Mi, count
	freePods                  int64
	apps                      map[string]bool
}

// GenerateScale builds the scale workload. The same config always gives the
// same snapshot, pod for pod.
func GenerateScale(cfg ScaleConfig) (*ScaleWorkload, error) {
	g := &scaleGen{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), cat: ScaleCatalogue()}
	types, err := InstanceTypes(g.cat)
	if err != nil {
		return nil, fmt.Errorf("scale catalogue: %w", err)
	}
	g.types = types
	pools, err := g.pools()
	if err != nil {
		return nil, err
	}
	ds := nodeAgent()
	g.existingNodes(ds)
	g.makeApps()
	g.placeRunningReplicas()
	g.fillBackground()
	pending := g.pendingPods()

	in := &scheduling.Input{
		Pods:       pending,
		NodePools:  pools,
		DaemonSets: []*appsv1.DaemonSet{ds},
		// The AWS provider declares its instance labels well known.
		WellKnownLabels: ScaleWellKnownLabels,
		// Planned as the provisioner plans.
		Options: scheduling.Options{
			PreferencePolicy: scheduling.PreferencesRespect,
			MinValuesPolicy:  scheduling.MinValuesStrict,
			CapGrowth:        true,
		},
	}
	for _, n := range g.nodes {
		in.Nodes = append(in.Nodes, n.node)
	}
	return &ScaleWorkload{Config: cfg, Catalogue: g.cat, Input: in}, nil
}

func (g *scaleGen) pools() ([]*scheduling.NodePool, error) {
	type req = scheduling.RequirementWithMinValues
	mk := func(name string, weight int32, taints []corev1.Taint, reqs ...req) (*scheduling.NodePool, error) {
		r, err := scheduling.RequirementsFromMinValues(reqs)
		if err != nil {
			return nil, fmt.Errorf("nodepool %s: %w", name, err)
		}
		return &scheduling.NodePool{
			Name: name, Weight: weight, Requirements: r, Taints: taints,
			Labels:        map[string]string{PoolLabel: name},
			InstanceTypes: g.types,
		}, nil
	}
	in := func(key string, vals ...string) req { return req{Key: key, Operator: scheduling.OpIn, Values: vals} }
	if g.cfg.SinglePool {
		p, err := mk("default", 0, nil)
		if err != nil {
			return nil, err
		}
		return []*scheduling.NodePool{p}, nil
	}
	spotOD := in(scheduling.LabelCapacityType, scheduling.CapacityTypeSpot, scheduling.CapacityTypeOnDemand)
	general, err := mk(PoolGeneral, 10, nil,
		in(scheduling.LabelArch, "amd64"), in(scheduling.LabelOS, "linux"), spotOD,
		in(LabelInstanceCategory, "c", "m", "r"),
		req{Key: LabelInstanceGeneration, Operator: scheduling.OpGt, Values: []string{"5"}})
	if err != nil {
		return nil, err
	}
	arm, err := mk(PoolArm, 50, nil,
		in(scheduling.LabelArch, "arm64"), in(scheduling.LabelOS, "linux"), spotOD,
		in(LabelInstanceCategory, "c", "m", "r"))
	if err != nil {
		return nil, err
	}
	if g.cfg.ArmHeadroomCPU > 0 {
		arm.Remaining = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(g.cfg.ArmHeadroomCPU, resource.DecimalSI)}
	}
	gpu, err := mk(PoolGPU, 0, []corev1.Taint{gpuTaint},
		in(scheduling.LabelArch, "amd64"), in(scheduling.LabelOS, "linux"),
		in(scheduling.LabelCapacityType, scheduling.CapacityTypeOnDemand),
		in(LabelInstanceCategory, "g"))
	if err != nil {
		return nil, err
	}
	return []*scheduling.NodePool{arm, general, gpu}, nil
}

// nodeAgent is a DaemonSet that runs on every node, tainted or not.
func nodeAgent() *appsv1.DaemonSet {
	labels := map[string]string{AppLabelKey: "node-agent"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "node-agent", Namespace: "kube-system", UID: "ds-node-agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "agent", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("128Mi"),
						},
					}}},
				},
			},
		},
	}
}

// existingNodes makes the cluster: 70% general (amd64, 8–32 vCPU), 27% arm
// (4–16 vCPU), 3% gpu (tainted), zones and capacity types drawn at random,
// 2% still initializing. Each runs the node agent.
func (g *scaleGen) existingNodes(ds *appsv1.DaemonSet) {
	var generalIdx, armIdx, gpuIdx []int
	for i, it := range g.cat {
		cat, arch, size, gen, cpu := "", "", "", "", int64(it.K)
		for _, r := range it.Requirements {
			switch r.Key {
			case LabelInstanceCategory:
				cat = r.Values[0]
			case corev1.LabelArchStable:
				arch = r.Values[0]
			case LabelInstanceSize:
				size = r.Values[0]
			case LabelInstanceGeneration:
				gen = r.Values[0]
			}
		}
		if size == "metal" {
			continue
		}
		switch {
		case cat == "g" && cpu <= 16:
			gpuIdx = append(gpuIdx, i)
		case cat != "g" && arch == "amd64" && gen > "5" && cpu >= 8 && cpu <= 32:
			generalIdx = append(generalIdx, i)
		case cat != "g" && arch == "arm64" && cpu >= 4 && cpu <= 16:
			armIdx = append(armIdx, i)
		}
	}
	for i := range g.cfg.ExistingNodes {
		pool, idx := PoolGeneral, generalIdx
		switch f := g.rng.Float64(); {
		case f < 0.03:
			pool, idx = PoolGPU, gpuIdx
		case f < 0.30:
			pool, idx = PoolArm, armIdx
		}
		it := g.cat[idx[g.rng.Intn(len(idx))]]
		zone := ScaleZones[g.rng.Intn(len(ScaleZones))]
		ct := scheduling.CapacityTypeOnDemand
		if pool != PoolGPU && g.rng.Float64() < 0.4 {
			ct = scheduling.CapacityTypeSpot
		}
		name := fmt.Sprintf("node-%04d", i)
		labels := map[string]string{
			corev1.LabelHostname:         name,
			corev1.LabelTopologyZone:     zone,
			scheduling.LabelCapacityType: ct,
			scheduling.LabelNodePool:     pool,
			PoolLabel:                    pool,
			"karpenter.sh/registered":    "true",
			"karpenter.sh/initialized":   "true",
		}
		for _, r := range it.Requirements {
			if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				labels[r.Key] = r.Values[0]
			}
		}
		initialized := g.rng.Float64() >= 0.02
		if !initialized {
			delete(labels, "karpenter.sh/initialized")
		}
		var taints []corev1.Taint
		if pool == PoolGPU {
			taints = []corev1.Taint{gpuTaint}
		}
		alloc := it.Allocatable()
		n := &scaleNode{
			node: &scheduling.ExistingNode{
				Name: name, Labels: labels, Taints: taints, Allocatable: alloc,
				Initialized: initialized, Managed: true,
			},
			pool:     pool,
			freeCPU:  alloc.Cpu().MilliValue(),
			freeMem:  alloc.Memory().Value() >> 20,
			freePods: alloc.Pods().Value(),
			apps:     map[string]bool{},
		}
		if q, ok := alloc[ResourceGPU]; ok {
			n.freeGPU = q.Value()
		}
		g.nodes = append(g.nodes, n)
		g.bind(n, g.daemonPod(ds, n), podShape{cpuMilli: 100, memMi: 128})
	}
}

func (g *scaleGen) daemonPod(ds *appsv1.DaemonSet, n *scaleNode) *corev1.Pod {
	spec := *ds.Spec.Template.Spec.DeepCopy()
	spec.NodeName = n.node.Name
	g.podSeq++
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: ds.Name + "-" + n.node.Name, Namespace: ds.Namespace, UID: g.uid(),
			Labels:            ds.Spec.Template.Labels,
			CreationTimestamp: metav1.NewTime(scaleEpoch),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptrTrue(),
			}},
		},
		Spec:   spec,
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func ptrTrue() *bool { t := true; return &t }

// uid is a deterministic, UUID-shaped id from a counter.
func (g *scaleGen) uid() types.UID {
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", g.podSeq))
}
