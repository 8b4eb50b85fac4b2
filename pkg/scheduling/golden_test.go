package scheduling

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden .out files")

// goldenScenario is the YAML shape of testdata/golden/*.yaml: a snapshot
// written by hand, small enough to read as documentation.
type goldenScenario struct {
	Description string             `json:"description"`
	NodePools   []goldenPool       `json:"nodePools"`
	Nodes       []goldenNode       `json:"nodes"`
	DaemonSets  []appsv1.DaemonSet `json:"daemonSets"`
	Pods        []corev1.Pod       `json:"pods"`
	Options     Options            `json:"options"`
}

type goldenPool struct {
	Name         string                     `json:"name"`
	Weight       int32                      `json:"weight"`
	Requirements []RequirementWithMinValues `json:"requirements"`
	Labels       map[string]string          `json:"labels"`
	Taints       []corev1.Taint             `json:"taints"`
	Remaining    corev1.ResourceList        `json:"remaining"`
	// InstanceTypes picks from the standard test catalogue (m.1x … m.64x);
	// empty means all of it.
	InstanceTypes []string `json:"instanceTypes"`
}

type goldenNode struct {
	Name        string              `json:"name"`
	Labels      map[string]string   `json:"labels"`
	Taints      []corev1.Taint      `json:"taints"`
	Allocatable corev1.ResourceList `json:"allocatable"`
	Pods        []corev1.Pod        `json:"pods"`
}

func (g *goldenScenario) input(t *testing.T) *Input {
	in := &Input{Options: g.Options}
	for _, p := range g.NodePools {
		reqs, err := RequirementsFromMinValues(p.Requirements)
		require.NoError(t, err)
		var types []*InstanceType
		for _, it := range stdTypes() {
			if len(p.InstanceTypes) == 0 || contains(p.InstanceTypes, it.Name) {
				types = append(types, it)
			}
		}
		in.NodePools = append(in.NodePools, &NodePool{Name: p.Name, Weight: p.Weight, Requirements: reqs, Labels: p.Labels,
			Taints: p.Taints, Remaining: p.Remaining, InstanceTypes: types})
	}
	for _, n := range g.Nodes {
		labels := map[string]string{LabelHostname: n.Name}
		for k, v := range n.Labels {
			labels[k] = v
		}
		en := &ExistingNode{Name: n.Name, Labels: labels, Taints: n.Taints, Allocatable: n.Allocatable, Initialized: true}
		for i := range n.Pods {
			en.Pods = append(en.Pods, &n.Pods[i])
		}
		in.Nodes = append(in.Nodes, en)
	}
	for i := range g.DaemonSets {
		in.DaemonSets = append(in.DaemonSets, &g.DaemonSets[i])
	}
	for i := range g.Pods {
		p := &g.Pods[i]
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// render prints decisions and reasons in a stable, readable form.
func render(res *Result) string {
	var b strings.Builder
	b.WriteString("# pods\n")
	for _, p := range res.Placements {
		switch {
		case p.Node != "":
			fmt.Fprintf(&b, "%s -> node %s", p.Pod.Name, p.Node)
		case p.NodeClaim >= 0:
			fmt.Fprintf(&b, "%s -> nodeclaim %d", p.Pod.Name, p.NodeClaim)
		default:
			fmt.Fprintf(&b, "%s -> unschedulable\n", p.Pod.Name)
			for _, e := range p.Errors {
				fmt.Fprintf(&b, "    %s\n", e)
			}
			continue
		}
		if len(p.Relaxed) > 0 {
			fmt.Fprintf(&b, " (relaxed: %s)", strings.Join(p.Relaxed, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("# nodeclaims\n")
	for i, nc := range res.NewNodeClaims {
		var pods []string
		for _, p := range nc.Pods {
			pods = append(pods, p.Name)
		}
		sort.Strings(pods)
		names := typeNames(nc)
		if len(names) > 4 {
			names = append(names[:4], fmt.Sprintf("…+%d", len(names)-4))
		}
		fmt.Fprintf(&b, "%d: nodepool=%s price=%.4f types=%v\n", i, nc.NodePool, nc.Price, names)
		fmt.Fprintf(&b, "   zone=%v capacity-type=%v\n", nc.Requirements.Get(LabelZone).Values(), nc.Requirements.Get(LabelCapacityType).Values())
		fmt.Fprintf(&b, "   requests: %s\n", describeRequests(nc.Requests))
		var labels []string
		for _, k := range sortedKeys(nc.Labels) {
			labels = append(labels, k+"="+nc.Labels[k])
		}
		fmt.Fprintf(&b, "   labels: %s\n", strings.Join(labels, ", "))
		if len(nc.Taints) > 0 {
			var ts []string
			for i := range nc.Taints {
				ts = append(ts, taintString(&nc.Taints[i]))
			}
			fmt.Fprintf(&b, "   taints: %s\n", strings.Join(ts, ", "))
		}
		fmt.Fprintf(&b, "   pods: %s\n", strings.Join(pods, " "))
	}
	fmt.Fprintf(&b, "# cost %.4f\n", res.Cost())
	return b.String()
}

// TestGolden solves every testdata/golden/*.yaml and compares the decisions
// with the .out file next to it. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			var g goldenScenario
			require.NoError(t, yaml.UnmarshalStrict(raw, &g))
			in := g.input(t)
			res := Solve(in)
			require.NoError(t, checkInvariants(in, res))
			got := render(res)
			out := strings.TrimSuffix(f, ".yaml") + ".out"
			if *update {
				require.NoError(t, os.WriteFile(out, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(out)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), got)
		})
	}
}
