package benchmark

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

// Requirement keys of the kwok catalogs the traces' pools use.
const (
	categoryKey = "karpenter.k8s.aws/instance-category"
	sizeKey     = "karpenter.kwok.sh/instance-size"
)

func lt(key, value string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpLt, Values: []string{value}}
}

var (
	linux    = Req(corev1.LabelOSStable, "linux")
	amd64    = Req(corev1.LabelArchStable, "amd64")
	arm64    = Req(corev1.LabelArchStable, "arm64")
	onDemand = Req(v1.CapacityTypeLabelKey, v1.CapacityTypeOnDemand)
	spot     = Req(v1.CapacityTypeLabelKey, v1.CapacityTypeSpot)
	anyCap   = Req(v1.CapacityTypeLabelKey, v1.CapacityTypeOnDemand, v1.CapacityTypeSpot)
)

// Traces is the suite: five tuning traces and five held-out ones, each
// half covering scale-ins right after a scale-up and slow churn. The first
// is the end-to-end trace of issue 32 (four Deployments of mixed shapes on
// an on-demand pool capped below 32 vCPU, budget 20%), where the planner
// ended 21% dearer than upstream.
var Traces = []Trace{
	{
		Name: "mixed4", Catalog: kwok.CatalogUpstreamKWOK, Seed: 1, StepEvery: time.Hour,
		Pools: []TracePool{{Name: "bench", Budget: "20%", Requirements: CappedPoolRequirements(true)}},
		Deps: []Deployment{
			{Name: "small", CPU: 250, Memory: 512, ZoneSpread: true},
			{Name: "medium", CPU: 1000, Memory: 2048, PDB: 10},
			{Name: "memory", CPU: 500, Memory: 12288},
			{Name: "cpu", CPU: 3000, Memory: 1024},
		},
		Replicas: [][]int{{400, 100, 40, 40}, {150, 60, 25, 25}},
	},
	{
		Name: "churn-slow", Catalog: kwok.CatalogDefault, Seed: 2, StepEvery: 10 * time.Minute, Daemon: true,
		Pools: []TracePool{
			{Name: "general", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, amd64, onDemand}},
			{Name: "spot", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, amd64, spot}},
		},
		Deps: []Deployment{
			{Name: "web", CPU: 500, Memory: 1024, Pool: "general"},
			{Name: "api", CPU: 1000, Memory: 2048, Pool: "spot"},
			{Name: "cache", CPU: 500, Memory: 4096, Pool: "general"},
			{Name: "batch", CPU: 2000, Memory: 1024, Pool: "spot"},
		},
		Replicas: Walk([]int{60, 40, 30, 20}, 12, 10, 2),
	},
	{
		Name: "anti-affinity", Catalog: kwok.CatalogDefault, Seed: 3, StepEvery: time.Hour, Daemon: true,
		Pools: []TracePool{{Name: "general", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, amd64, onDemand}}},
		Deps: []Deployment{
			{Name: "ingress", CPU: 1000, Memory: 2048, AntiAffinity: true},
			{Name: "svc", CPU: 500, Memory: 1024},
		},
		Replicas: [][]int{{30, 120}, {12, 50}},
	},
	{
		Name: "weighted", Catalog: kwok.CatalogDefault, Seed: 4, StepEvery: time.Hour, Daemon: true,
		Pools: []TracePool{
			{Name: "compute", Weight: 50, Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c"), linux, amd64, onDemand}},
			{Name: "general", Weight: 10, Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, amd64, onDemand}},
		},
		Deps: []Deployment{
			{Name: "web", CPU: 500, Memory: 1024},
			{Name: "mem", CPU: 500, Memory: 8192},
		},
		Replicas: [][]int{{150, 40}, {60, 20}},
	},
	{
		Name: "dnd-memory", Catalog: kwok.CatalogDefault, Seed: 5, StepEvery: time.Hour, Daemon: true,
		Pools: []TracePool{{Name: "general", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "m", "r"), linux, amd64, onDemand}}},
		Deps: []Deployment{
			{Name: "db-cache", CPU: 1000, Memory: 16384, DoNotDisrupt: 4},
			{Name: "mem", CPU: 500, Memory: 6144, PDB: 20},
		},
		Replicas: [][]int{{40, 80}, {20, 30}},
	},

	// The held-out half.
	{
		Name: "mixed4-spot", HeldOut: true, Catalog: kwok.CatalogUpstreamKWOK, Seed: 6, StepEvery: time.Hour,
		Pools: []TracePool{{Name: "bench", Budget: "10%", Requirements: []v1.NodeSelectorRequirementWithMinValues{amd64, linux, anyCap, lt(sizeKey, "32")}}},
		Deps: []Deployment{
			{Name: "small", CPU: 500, Memory: 1024, ZoneSpread: true},
			{Name: "medium", CPU: 1500, Memory: 3072, PDB: 25, ZoneSpread: true},
			{Name: "memory", CPU: 1000, Memory: 16384},
			{Name: "cpu", CPU: 4000, Memory: 2048},
		},
		Replicas: [][]int{{300, 80, 30, 30}, {100, 40, 20, 12}},
	},
	{
		Name: "churn-weighted", HeldOut: true, Catalog: kwok.CatalogDefault, Seed: 7, StepEvery: 5 * time.Minute, Daemon: true,
		Pools: []TracePool{
			{Name: "spot", Weight: 20, Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, amd64, spot}},
			{Name: "general", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, amd64, onDemand}},
		},
		Deps: []Deployment{
			{Name: "front", CPU: 250, Memory: 512, ZoneSpread: true},
			{Name: "back", CPU: 1000, Memory: 4096, PDB: 10},
			{Name: "worker", CPU: 2000, Memory: 2048},
		},
		Replicas: Walk([]int{100, 40, 20}, 12, 8, 7),
	},
	{
		Name: "spot-od-cpu", HeldOut: true, Catalog: kwok.CatalogDefault, Seed: 8, StepEvery: time.Hour, Daemon: true,
		Pools: []TracePool{{Name: "mixed", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m"), linux, amd64, anyCap}}},
		Deps: []Deployment{
			{Name: "cpu2", CPU: 2000, Memory: 2048},
			{Name: "cpu4", CPU: 4000, Memory: 4096},
			{Name: "small", CPU: 250, Memory: 256},
		},
		Replicas: [][]int{{80, 20, 100}, {30, 8, 40}},
	},
	{
		Name: "arm-memory", HeldOut: true, Catalog: kwok.CatalogDefault, Seed: 9, StepEvery: time.Hour, Daemon: true,
		Pools: []TracePool{{Name: "arm", Requirements: []v1.NodeSelectorRequirementWithMinValues{Req(categoryKey, "c", "m", "r"), linux, arm64, onDemand}}},
		Deps: []Deployment{
			{Name: "mem", CPU: 1000, Memory: 8192, AntiAffinity: true},
			{Name: "mem2", CPU: 500, Memory: 4096, DoNotDisrupt: 5},
			{Name: "svc", CPU: 500, Memory: 1024, PDB: 10},
		},
		Replicas: [][]int{{30, 80, 60}, {12, 30, 20}},
	},
	{
		Name: "two-scaleins", HeldOut: true, Catalog: kwok.CatalogUpstreamKWOK, Seed: 10, StepEvery: 2 * time.Minute,
		Pools: []TracePool{
			{Name: "small", Weight: 10, Requirements: []v1.NodeSelectorRequirementWithMinValues{amd64, linux, onDemand, lt(sizeKey, "16")}},
			{Name: "big", Requirements: []v1.NodeSelectorRequirementWithMinValues{amd64, linux, onDemand}},
		},
		Deps: []Deployment{
			{Name: "a", CPU: 500, Memory: 1024, ZoneSpread: true},
			{Name: "b", CPU: 2000, Memory: 8192, PDB: 20},
		},
		Replicas: [][]int{{200, 60}, {120, 40}, {70, 20}},
	},
}
