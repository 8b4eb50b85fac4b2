package scheduling

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// randomSnapshot builds a small but varied snapshot from a seed: several
// pools with taints and zone/capacity-type restrictions, existing nodes with
// pods, and pending pods mixing every constraint the solver knows.
func randomSnapshot(seed int64) *Input {
	r := rand.New(rand.NewSource(seed))
	pick := func(xs ...string) string { return xs[r.Intn(len(xs))] }
	in := &Input{}
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for i := 0; i < 1+r.Intn(3); i++ {
		var mods []func(*NodePool)
		if r.Intn(3) == 0 {
			mods = append(mods, poolTaints(taint))
		}
		if r.Intn(3) == 0 {
			mods = append(mods, poolReqs(NewRequirement(LabelZone, OpIn, pick("zone-a", "zone-b"), "zone-c")))
		}
		if r.Intn(4) == 0 {
			mods = append(mods, poolRemaining("cpu", fmt.Sprint(8+r.Intn(64))))
		}
		mods = append(mods, poolWeight(int32(r.Intn(3))))
		types := stdTypes()
		r.Shuffle(len(types), func(a, b int) { types[a], types[b] = types[b], types[a] })
		in.NodePools = append(in.NodePools, mkPool(fmt.Sprintf("pool-%d", i), types[:2+r.Intn(len(types)-2)], mods...))
	}
	apps := []string{"a", "b", "c"}
	for i := 0; i < r.Intn(4); i++ {
		var pods []*corev1.Pod
		for j := 0; j < r.Intn(4); j++ {
			pods = append(pods, mkPod(fmt.Sprintf("old-%d-%d", i, j), fmt.Sprintf("%dm", 100+r.Intn(900)), "256Mi", withLabels("app", pick(apps...))))
		}
		n := mkNode(fmt.Sprintf("node-%d", i), fmt.Sprint(2+r.Intn(4)), "8Gi", map[string]string{LabelZone: pick(zones3...)}, pods...)
		if r.Intn(4) == 0 {
			n.Taints = []corev1.Taint{taint}
		}
		in.Nodes = append(in.Nodes, n)
	}
	for i := 0; i < 1+r.Intn(40); i++ {
		app := pick(apps...)
		opts := []podOpt{withLabels("app", app)}
		switch r.Intn(10) {
		case 0:
			opts = append(opts, withNodeSelector(LabelZone, pick(zones3...)))
		case 1:
			opts = append(opts, withAntiAffinity(term(pick(LabelHostname, LabelZone), map[string]string{"app": app})))
		case 2:
			opts = append(opts, withSpread(pick(LabelHostname, LabelZone), int32(1+r.Intn(2)), corev1.DoNotSchedule, map[string]string{"app": pick(apps...)}))
		case 3:
			opts = append(opts, withPodAffinity(term(pick(LabelHostname, LabelZone), map[string]string{"app": pick(apps...)})))
		case 4:
			opts = append(opts, withToleration("dedicated", "gpu", corev1.TaintEffectNoSchedule))
		case 5:
			opts = append(opts, withHostPort(int32(8000+r.Intn(3))))
		case 6:
			opts = append(opts, withPreferredAntiAffinity(10, term(LabelHostname, map[string]string{"app": app})),
				withPreferredNode(1, nsr(LabelZone, corev1.NodeSelectorOpIn, pick(zones3...))))
		case 7:
			opts = append(opts, withRequiredTerms([]corev1.NodeSelectorRequirement{nsr(LabelCapacityType, corev1.NodeSelectorOpIn, CapacityTypeOnDemand)},
				[]corev1.NodeSelectorRequirement{nsr(LabelZone, corev1.NodeSelectorOpNotIn, pick(zones3...))}))
		}
		cpu := []string{"100m", "500m", "1", "3", "7", "20"}[r.Intn(6)]
		mem := []string{"128Mi", "1Gi", "4Gi", "30Gi"}[r.Intn(4)]
		in.Pods = append(in.Pods, mkPod(fmt.Sprintf("p%03d", i), cpu, mem, opts...))
	}
	if r.Intn(2) == 0 {
		in.Options.PreferencePolicy = PreferencesIgnore
	}
	// An earlier round's nominations, some stale (a node that is gone, a
	// node that no longer fits), and the provisioner's Robust sizing.
	in.Options.Robust = r.Intn(2) == 0
	if len(in.Nodes) > 0 && r.Intn(2) == 0 {
		in.Nominations = map[types.UID]string{}
		for _, p := range in.Pods {
			switch r.Intn(4) {
			case 0:
				in.Nominations[p.UID] = in.Nodes[r.Intn(len(in.Nodes))].Name
			case 1:
				in.Nominations[p.UID] = "node-gone"
			}
		}
	}
	return in
}

// FuzzSolve checks the solver's invariants on random snapshots: nothing is
// over-committed, no hard constraint is broken, no pod lands on a pool whose
// taints it does not tolerate, and the answer is deterministic.
func FuzzSolve(f *testing.F) {
	for i := int64(0); i < 8; i++ {
		f.Add(i)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		in := randomSnapshot(seed)
		res := Solve(in)
		if err := checkInvariants(in, res); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		again := Solve(randomSnapshot(seed))
		a, b := where(res), where(again)
		for k, v := range a {
			if b[k] != v {
				t.Fatalf("seed %d: not deterministic: %s on %s then %s", seed, k, v, b[k])
			}
		}
	})
}

// TestRandomSnapshots runs a fixed batch of the fuzz seeds in normal test runs.
func TestRandomSnapshots(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		in := randomSnapshot(seed)
		res := Solve(in)
		if err := checkInvariants(in, res); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}
