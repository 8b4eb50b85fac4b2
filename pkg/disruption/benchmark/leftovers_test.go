package benchmark

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

// eachNode is upstream's single-node consolidation asked about every
// candidate on its own, rather than stopping at the first command.
type eachNode struct {
	disruption.SingleNodeConsolidation
}

func (e eachNode) ComputeCommands(env *disruption.Env, budgets map[string]*disruption.BudgetStatus, cs []*disruption.Candidate) ([]*disruption.Command, []disruption.Verdict, error) {
	var out []*disruption.Command
	for _, c := range cs {
		cmds, _, err := e.SingleNodeConsolidation.ComputeCommands(env, disruption.CloneBudgets(budgets), []*disruption.Candidate{c})
		if err != nil {
			return nil, nil, fmt.Errorf("single-node consolidation of %s: %w", c.Name(), err)
		}
		out = append(out, cmds...)
	}
	return out, nil, nil
}

// eachPool is upstream's multi-node consolidation asked about every
// NodePool's candidates on their own.
type eachPool struct {
	disruption.MultiNodeConsolidation
}

func (e eachPool) ComputeCommands(env *disruption.Env, budgets map[string]*disruption.BudgetStatus, cs []*disruption.Candidate) ([]*disruption.Command, []disruption.Verdict, error) {
	byPool := map[string][]*disruption.Candidate{}
	var pools []string
	for _, c := range cs {
		if byPool[c.NodePool.Name] == nil {
			pools = append(pools, c.NodePool.Name)
		}
		byPool[c.NodePool.Name] = append(byPool[c.NodePool.Name], c)
	}
	var out []*disruption.Command
	for _, pool := range pools {
		cmds, _, err := e.MultiNodeConsolidation.ComputeCommands(env, disruption.CloneBudgets(budgets), byPool[pool])
		if err != nil {
			return nil, nil, fmt.Errorf("multi-node consolidation of pool %s: %w", pool, err)
		}
		out = append(out, cmds...)
	}
	return out, nil, nil
}

// BenchmarkTraceLeftovers plays each trace with the planner and then asks
// upstream's multi-node consolidation about every NodePool and its
// single-node consolidation about every node of the end fleet:
// a move it finds whose saving over the payback horizon exceeds its
// restart cost is one the planner's rule should have taken, so it names
// where the rule or the search falls short. Each paying move is also
// carried out on a fresh play of the trace, evicted pods bound as the
// kube-scheduler would (Cluster.Execute), and the pods that then need a
// fresh node are printed: a move the kube-scheduler's spreading does not
// place is one the planner's spreading check refuses.
//
//	go test ./pkg/disruption/benchmark -run '^$' -bench TraceLeftovers -benchtime 1x -v
func BenchmarkTraceLeftovers(b *testing.B) {
	for _, t := range Traces {
		if only := os.Getenv("TRACES"); only != "" && !strings.Contains(","+only+",", ","+t.Name+",") {
			continue
		}
		b.Run("trace="+t.Name, func(b *testing.B) {
			for b.Loop() {
				pl := Planner("planner", repack.Options{SpotToSpot: true})
				c, err := t.play(pl)
				if err != nil {
					b.Fatal(err)
				}
				t.refresh(c)
				// The planner's own reason for leaving each node, from one
				// more pass over the end fleet.
				d, err := disruption.Disrupt(c.Snap, disruption.MethodsOf(pl.Strategy), nil)
				if err != nil {
					b.Fatal(err)
				}
				why := map[string]disruption.Kind{}
				for _, e := range d.Explanations {
					if n := len(e.Verdicts); n > 0 {
						why[e.Node] = e.Verdicts[n-1].Kind
					}
				}
				up := Upstream()
				sim := up.Simulator(c.Snap)
				opts := disruption.ConsolidationOptions{SpotToSpot: true}
				var cmds []*disruption.Command
				for _, m := range []disruption.Method{eachPool{disruption.MultiNodeConsolidation{Options: opts}}, eachNode{disruption.NewSingleNodeConsolidation(opts)}} {
					d, err := disruption.Disrupt(c.Snap, []disruption.Method{m}, sim)
					if err != nil {
						b.Fatal(err)
					}
					cmds = append(cmds, d.Commands...)
				}
				var lines []string
				paying := 0
				for _, cmd := range cmds {
					saving, err := disruption.CommandSaving(c.Snap, cmd)
					if err != nil {
						b.Fatal(err)
					}
					cost, pods := 0.0, 0
					var names []string
					for _, cand := range cmd.Candidates {
						cost += max(0, cand.DisruptionCost) * repack.DefaultRestartCost
						pods += len(cand.Reschedulable)
						names = append(names, fmt.Sprintf("%s(%s, planner: %s)", cand.Name(), cand.Node.Node.Labels[corev1.LabelInstanceTypeStable], why[cand.Name()]))
					}
					var repl []string
					for _, r := range cmd.Replacements {
						if len(r.InstanceTypes) > 0 {
							repl = append(repl, r.InstanceTypes[0].Name)
						}
					}
					mark := ""
					if saving > cost {
						mark, paying = " PAYS", paying+1
						fresh, err := freshAfter(t, pl.Name, cmd)
						if err != nil {
							b.Fatal(err)
						}
						mark += fmt.Sprintf(" (carried out: %d pods need a fresh node)", fresh)
					}
					lines = append(lines, fmt.Sprintf("%s %s -> %v saves $%.4f/h for %d pods (cost $%.4f)%s", cmd.Decision(), strings.Join(names, ","), repl, saving, pods, cost, mark))
				}
				sort.Strings(lines)
				b.ReportMetric(float64(paying), "paying-moves")
				b.Logf("end $/h %.3f, %d nodes; upstream's moves (multi-node per pool, single-node per node):\n%s", c.Price(), len(c.Snap.Nodes), strings.Join(lines, "\n"))
			}
		})
	}
}

// freshAfter plays t again with a new planner (the play is deterministic,
// so the end fleet is the same, node names included), carries cmd out on
// it and returns how many evicted pods then needed a fresh node.
func freshAfter(t Trace, name string, cmd *disruption.Command) (int, error) {
	c, err := t.play(Planner(name, repack.Options{SpotToSpot: true}))
	if err != nil {
		return 0, err
	}
	t.refresh(c)
	fresh := c.Fresh
	if _, err := c.Execute([]*disruption.Command{cmd}, c.Snap.Now); err != nil {
		return 0, fmt.Errorf("carrying out %s: %w", cmd.Decision(), err)
	}
	return c.Fresh - fresh, nil
}
