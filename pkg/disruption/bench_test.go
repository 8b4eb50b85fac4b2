package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// benchSnapshot is a synthetic cluster: 5,000 nodes in 20 NodePools (some
// with scheduled and reason-scoped budgets, two static), 50,000 pods (10
// app pods per busy node, a DaemonSet pod on each: 52,500), 5% of nodes drifted,
// 5% empty, some do-not-disrupt pods and PDBs (half of them blocking).
func benchSnapshot() *Snapshot {
	const pools, nodesPerPool, podsPerNode = 20, 250, 10
	snap := &Snapshot{Now: now, NodePools: map[string]*v1.NodePool{}}
	for p := 0; p < pools; p++ {
		name := fmt.Sprintf("pool-%02d", p)
		var opts []func(*v1.NodePool)
		switch p % 4 {
		case 0:
			opts = append(opts, budgets(budget("10%")))
		case 1:
			opts = append(opts, budgets(scheduled("0", "0 9 * * mon-fri", 8*time.Hour), budget("20%")))
		case 2:
			opts = append(opts, budgets(forReasons(budget("5"), v1.DisruptionReasonDrifted), scheduled("1", "@daily", time.Hour), budget("15%")))
		case 3:
			opts = append(opts, budgets(budget("3")))
		}
		if p >= 18 {
			opts = append(opts, replicas(nodesPerPool), nodeLimit(nodesPerPool+5))
		}
		snap.NodePools[name] = pool(name, opts...)
	}
	for ns := 0; ns < 50; ns++ {
		b := pdb(fmt.Sprintf("pdb-%02d", ns), int32(ns%2), fmt.Sprintf("app-%02d", ns))
		b.Namespace = fmt.Sprintf("ns-%02d", ns)
		snap.PDBs = append(snap.PDBs, b)
	}
	tgp := &v1.Duration{Duration: time.Hour}
	i := 0
	for p := 0; p < pools; p++ {
		poolName := fmt.Sprintf("pool-%02d", p)
		for k := 0; k < nodesPerPool; k++ {
			name := fmt.Sprintf("%s-node-%04d", poolName, k)
			n := node(name, poolName, consolidatable)
			if i%20 == 0 {
				drifted(now.Add(-time.Duration(i) * time.Second))(n)
				n.NodeClaim.Spec.TerminationGracePeriod = tgp
			}
			ds := pod(name+"-ds", daemonSetPod)
			ds.Spec.NodeName = name
			n.Pods = append(n.Pods, ds)
			if i%20 != 7 { // 5% empty
				for j := 0; j < podsPerNode; j++ {
					ns := (i*podsPerNode + j) % 50
					p := pod(fmt.Sprintf("%s-pod-%d", name, j), func(p *corev1.Pod) {
						p.Namespace = fmt.Sprintf("ns-%02d", ns)
						p.Labels = map[string]string{"app": fmt.Sprintf("app-%02d", (ns+j)%60)}
					})
					if i%97 == 3 && j == 0 {
						p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
					}
					p.Spec.NodeName = name
					n.Pods = append(n.Pods, p)
				}
			}
			snap.Nodes = append(snap.Nodes, n)
			i++
		}
	}
	return snap
}

// evaluateOnly runs a method's decision but acts on nothing, so that one
// pass evaluates every method.
type evaluateOnly struct{ Method }

func (e evaluateOnly) ComputeCommands(env *Env, b map[string]*BudgetStatus, cs []*Candidate) ([]*Command, []Verdict, error) {
	cmds, vs, err := e.Method.ComputeCommands(env, b, cs)
	if len(cmds) == 0 || len(cmds[0].Candidates) == 0 {
		return nil, vs, fmt.Errorf("benchmark expected %s to find a command", e.Reason())
	}
	return nil, vs, err
}

// BenchmarkDisruptionPass times candidate discovery, budgets and the
// emptiness, static drift and drift decisions over the synthetic cluster,
// with a simulator that always fits (the solver is not part of the
// decision ordering).
func BenchmarkDisruptionPass(b *testing.B) {
	snap := benchSnapshot()
	pods := 0
	for _, n := range snap.Nodes {
		pods += len(n.Pods)
	}
	// 4,750 busy nodes with 10 pods and a DaemonSet pod, 250 empty ones
	// with only the DaemonSet pod.
	if len(snap.Nodes) != 5000 || pods != 4750*11+250 {
		b.Fatalf("nodes %d pods %d", len(snap.Nodes), pods)
	}
	methods := []Method{evaluateOnly{Emptiness{}}, evaluateOnly{StaticDrift{}}, evaluateOnly{Drift{}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := Disrupt(snap, methods, fits())
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Explanations) != len(snap.Nodes) || len(d.Runs) != 3 {
			b.Fatalf("explanations %d runs %d", len(d.Explanations), len(d.Runs))
		}
	}
}
