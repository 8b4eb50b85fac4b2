package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Output formats.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

func jsonIndent(v any) ([]byte, error) {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}

// Render writes an answer (*StatusAnswer, *PodAnswer, *NodeAnswer,
// *SimulateAnswer) in format.
func Render(w io.Writer, format string, answer any) error {
	switch format {
	case FormatJSON:
		raw, err := jsonIndent(answer)
		if err != nil {
			return fmt.Errorf("encoding json: %w", err)
		}
		_, err = w.Write(raw)
		return err
	case FormatYAML:
		raw, err := yaml.Marshal(answer)
		if err != nil {
			return fmt.Errorf("encoding yaml: %w", err)
		}
		_, err = w.Write(raw)
		return err
	case FormatTable, "":
	default:
		return fmt.Errorf("unknown output format %q (want table, json or yaml)", format)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch a := answer.(type) {
	case *StatusAnswer:
		renderStatus(tw, a)
	case *PodAnswer:
		renderPod(tw, a)
	case *NodeAnswer:
		renderNode(tw, a)
	case *SimulateAnswer:
		renderSimulate(tw, a)
	default:
		return fmt.Errorf("no table for %T", answer)
	}
	return tw.Flush()
}

func renderStatus(w io.Writer, a *StatusAnswer) {
	fmt.Fprintln(w, "NODEPOOL\tNODES\tUSAGE/LIMITS\t$/H\tALLOWED DISRUPTIONS\tNEXT BUDGET CHANGE")
	for _, p := range a.NodePools {
		cost := fmt.Sprintf("%.4f", p.CostPerHour)
		if p.Unpriced > 0 {
			cost += fmt.Sprintf(" (+%d unpriced)", p.Unpriced)
		}
		next := "-"
		if p.NextBudgetChange != nil {
			next = p.NextBudgetChange.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Name, p.Nodes, usageVsLimits(p), cost, allowed(p.AllowedDisruptions), next)
		for _, e := range p.BudgetErrors {
			fmt.Fprintf(w, "\t\t\tbudget error: %s\n", e)
		}
	}
	if len(a.NotReady) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "NODECLAIM\tNODEPOOL\tNOT READY\tREASON\tMESSAGE")
		for _, c := range a.NotReady {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.NodePool, c.Condition, dash(c.Reason), dash(c.Message))
		}
	}
}

func usageVsLimits(p PoolStatus) string {
	keys := map[string]bool{}
	for k := range p.Usage {
		keys[k] = true
	}
	for k := range p.Limits {
		keys[k] = true
	}
	var parts []string
	for _, k := range sorted(keys) {
		used := p.Usage[k]
		if used == "" {
			used = "0"
		}
		if limit, ok := p.Limits[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %s/%s", k, used, limit))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", k, used))
		}
	}
	return dash(strings.Join(parts, ", "))
}

func allowed(m map[string]int) string {
	keys := map[string]bool{}
	for k := range m {
		keys[k] = true
	}
	var parts []string
	for _, k := range sorted(keys) {
		if m[k] < 0 {
			parts = append(parts, k+"=unlimited")
		} else {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	return strings.Join(parts, " ")
}

func renderPod(w io.Writer, a *PodAnswer) {
	fmt.Fprintf(w, "POD %s: %s\n", a.Pod, a.Phase)
	fmt.Fprintln(w, a.Message)
	if a.NewNodeClaim != nil {
		its := a.NewNodeClaim.InstanceTypes
		if len(its) > 5 {
			its = append(its[:5:5], fmt.Sprintf("and %d more", len(a.NewNodeClaim.InstanceTypes)-5))
		}
		fmt.Fprintf(w, "new nodeclaim: nodepool %s, $%.4f/h, instance types %s\n", a.NewNodeClaim.NodePool, a.NewNodeClaim.Price, strings.Join(its, ", "))
	}
	if len(a.NodePools) == 0 && a.Existing == nil {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "NODEPOOL\tREFUSAL\tKEY/RESOURCE\tNODEPOOL SIDE\tPOD SIDE\tMESSAGE")
	rows := a.NodePools
	if a.Existing != nil {
		e := *a.Existing
		e.NodePool = "(existing nodes)"
		rows = append(append([]PoolVerdict(nil), rows...), e)
	}
	for _, v := range rows {
		key, poolSide, podSide := v.Key, v.NodePoolValues, v.PodValues
		switch {
		case v.Resource != "":
			key = string(v.Resource)
			poolSide = limitFigures(v)
			podSide = dash(v.Needed)
			if v.Needed != "" {
				podSide = "needs " + v.Needed
			}
		case v.Taint != "":
			key, poolSide, podSide = "taint", v.Taint, "not tolerated"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", v.NodePool, v.Kind, dash(key), dash(poolSide), dash(podSide), v.Message)
	}
}

func limitFigures(v PoolVerdict) string {
	var parts []string
	if v.Limit != "" {
		parts = append(parts, "limit "+v.Limit)
	}
	if v.Used != "" {
		parts = append(parts, "used "+v.Used)
	}
	if v.Remaining != "" {
		parts = append(parts, "left "+v.Remaining)
	}
	return strings.Join(parts, ", ")
}

func renderNode(w io.Writer, a *NodeAnswer) {
	fmt.Fprintf(w, "NODE %s (nodeclaim %s, nodepool %s)\n", a.Node, dash(a.NodeClaim), dash(a.NodePool))
	if len(a.LaunchedFor) > 0 {
		fmt.Fprintf(w, "launched for: %s\n", strings.Join(a.LaunchedFor, ", "))
	}
	fmt.Fprintln(w, a.Message)
	if len(a.Verdicts) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "METHOD\tVERDICT\tBLOCKER\tMESSAGE")
	for _, v := range a.Verdicts {
		blocker := v.Pod
		if blocker == "" {
			blocker = v.PDB
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", dash(v.Method), v.Kind, dash(blocker), v.Message)
	}
	if u := a.IfUnblocked; u != nil && u.Method == "" {
		fmt.Fprintf(w, "\nif unblocked (%s lifted), still kept: %s\n", strings.Join(u.Blockers, ", "), strings.Join(u.StillKept, "; "))
	} else if u != nil {
		fmt.Fprintf(w, "\nif unblocked (%s lifted): %s, %s of %s, saving $%.4f/h", strings.Join(u.Blockers, ", "), u.Method, u.Decision, strings.Join(u.Candidates, ", "), u.SavingPerHour)
		if len(u.Replacements) > 0 {
			fmt.Fprintf(w, " with %s", strings.Join(u.Replacements, ", "))
		}
		fmt.Fprintln(w)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func nodeClaimsOrNone(names []string) string {
	if len(names) == 0 {
		return "no launched NodeClaim"
	}
	return "nodeclaims " + strings.Join(names, ", ")
}

func renderSimulate(w io.Writer, a *SimulateAnswer) {
	fmt.Fprintf(w, "$/h %.4f -> %.4f; pods added %d, removed %d; %d evictions\n", a.CostBefore, a.CostAfter, a.PodsAdded, a.PodsRemoved, a.Evictions)
	if len(a.NodeClaims) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "NEW NODECLAIM NODEPOOL\tINSTANCE TYPE\tTYPES\t$/H\tPODS")
		for _, nc := range a.NodeClaims {
			fmt.Fprintf(w, "%s\t%s\t%d\t%.4f\t%d\n", nc.NodePool, nc.InstanceType, nc.InstanceTypes, nc.Price, nc.Pods)
		}
	}
	if a.Unschedulable > 0 {
		fmt.Fprintf(w, "%d pending pod(s) no NodePool can take: `karpenter why pod` says why\n", a.Unschedulable)
	}
	if a.BufferPods > 0 {
		fmt.Fprintf(w, "%d capacitybuffer virtual pod(s) planned for, as the controller keeps room for them\n", a.BufferPods)
	}
	if len(a.Drifted) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "DRIFTED NODE\tNODECLAIM\tNODEPOOL\tREASON")
		for _, d := range a.Drifted {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", dash(d.Node), d.NodeClaim, d.NodePool, d.Reason)
		}
	}
	for _, u := range a.Unresolved {
		fmt.Fprintf(w, "ec2nodeclass %s: %s changed; they resolve through AWS, which simulate does not call: %s may still drift once the controller resolves them\n",
			u.NodeClass, strings.Join(u.Fields, ", "), nodeClaimsOrNone(u.NodeClaims))
	}
	if len(a.Disruptions) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "NEXT DISRUPTION\tDECISION\tNODES\tREPLACEMENTS\tEVICTIONS")
		for _, d := range a.Disruptions {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", d.Reason, d.Decision, strings.Join(d.Nodes, ","), d.Replacements, d.Evictions)
		}
	}
}
