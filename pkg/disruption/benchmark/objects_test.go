package benchmark

import (
	"testing"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestTraceObjects: a trace as Kubernetes objects has the offline run's
// pools (budget, weight), PDBs, DaemonSet and pod constraints, and its
// Deployments' replicas add up to the trace's counts at every step, the
// do-not-disrupt pods in a Deployment of their own.
func TestTraceObjects(t *testing.T) {
	ref := v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	tests := []struct {
		trace       string
		deployments []string
		pdbs        int
		daemon      bool
		budget      string            // of the first pool
		weights     map[string]int32  // by pool, 0: none
		selector    map[string]string // deployment -> the pool its pods are pinned to
		spread      []string          // deployments with a zone spread
		anti        []string          // deployments with anti-affinity
		step0       map[string]int32  // replicas of some Deployments at step 0
	}{
		{trace: "mixed4", deployments: []string{"small", "medium", "memory", "cpu"}, pdbs: 1, budget: "20%",
			weights: map[string]int32{"bench": 0}, spread: []string{"small"}, step0: map[string]int32{"small": 400, "cpu": 40}},
		{trace: "dnd-memory", deployments: []string{"db-cache", "db-cache-dnd", "mem"}, pdbs: 1, daemon: true, budget: "100%",
			step0: map[string]int32{"db-cache": 30, "db-cache-dnd": 10, "mem": 80}},
		{trace: "two-scaleins", deployments: []string{"a", "b"}, pdbs: 1, budget: "100%",
			weights: map[string]int32{"small": 10, "big": 0}, spread: []string{"a"}},
		{trace: "churn-slow", deployments: []string{"web", "api", "cache", "batch"}, daemon: true, budget: "100%",
			selector: map[string]string{"web": "general", "api": "spot"}},
		{trace: "arm-memory", deployments: []string{"mem", "mem2", "mem2-dnd", "svc"}, pdbs: 1, daemon: true, budget: "100%",
			anti: []string{"mem"}, step0: map[string]int32{"mem2": 64, "mem2-dnd": 16}},
	}
	for _, tt := range tests {
		t.Run(tt.trace, func(t *testing.T) {
			tr := traceNamed(t, tt.trace)
			objs := tr.Objects("default", ref, map[string]string{"soak": "true"})
			if len(objs.NodePools) != len(tr.Pools) {
				t.Fatalf("%d NodePools, want %d", len(objs.NodePools), len(tr.Pools))
			}
			if got := objs.NodePools[0].Spec.Disruption.Budgets[0].Nodes; got != tt.budget {
				t.Errorf("budget %s, want %s", got, tt.budget)
			}
			for _, np := range objs.NodePools {
				if np.Spec.Template.Spec.NodeClassRef == nil || *np.Spec.Template.Spec.NodeClassRef != ref {
					t.Errorf("%s: nodeClassRef %v", np.Name, np.Spec.Template.Spec.NodeClassRef)
				}
				if np.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized {
					t.Errorf("%s: policy %s", np.Name, np.Spec.Disruption.ConsolidationPolicy)
				}
				if w, ok := tt.weights[np.Name]; ok {
					if got := np.Spec.Weight; (got == nil) != (w == 0) || got != nil && *got != w {
						t.Errorf("%s: weight %v, want %d", np.Name, got, w)
					}
				}
			}
			var names []string
			byName := map[string]int{}
			for i, d := range objs.Deployments {
				names = append(names, d.Name)
				byName[d.Name] = i
				if d.Spec.Template.Labels["soak"] != "true" || d.Spec.Template.Labels["app"] == "" {
					t.Errorf("%s: pod labels %v", d.Name, d.Spec.Template.Labels)
				}
				dnd := d.Spec.Template.Annotations[v1.DoNotDisruptAnnotationKey] == "true"
				if want := len(d.Name) > 4 && d.Name[len(d.Name)-4:] == "-dnd"; dnd != want {
					t.Errorf("%s: do-not-disrupt %v, want %v", d.Name, dnd, want)
				}
			}
			if len(names) != len(tt.deployments) {
				t.Fatalf("Deployments %v, want %v", names, tt.deployments)
			}
			for i, n := range tt.deployments {
				if names[i] != n {
					t.Fatalf("Deployments %v, want %v", names, tt.deployments)
				}
			}
			if len(objs.PDBs) != tt.pdbs {
				t.Errorf("%d PDBs, want %d", len(objs.PDBs), tt.pdbs)
			}
			if (objs.DaemonSet != nil) != tt.daemon {
				t.Errorf("DaemonSet %v, want %v", objs.DaemonSet != nil, tt.daemon)
			}
			for d, pool := range tt.selector {
				if got := objs.Deployments[byName[d]].Spec.Template.Spec.NodeSelector[v1.NodePoolLabelKey]; got != pool {
					t.Errorf("%s: pinned to %q, want %q", d, got, pool)
				}
			}
			for _, d := range tt.spread {
				if len(objs.Deployments[byName[d]].Spec.Template.Spec.TopologySpreadConstraints) != 1 {
					t.Errorf("%s: no zone spread", d)
				}
			}
			for _, d := range tt.anti {
				if a := objs.Deployments[byName[d]].Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
					t.Errorf("%s: no anti-affinity", d)
				}
			}
			for d, n := range tt.step0 {
				if got := tr.ReplicasAt(0)[d]; got != n {
					t.Errorf("%s at step 0: %d replicas, want %d", d, got, n)
				}
			}
			for s, row := range tr.Replicas {
				want, got := 0, int32(0)
				for _, n := range row {
					want += n
				}
				for _, n := range tr.ReplicasAt(s) {
					got += n
				}
				if int(got) != want {
					t.Errorf("step %d: %d replicas, want %d", s, got, want)
				}
			}
		})
	}
}
