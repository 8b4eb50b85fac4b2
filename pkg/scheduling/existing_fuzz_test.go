package scheduling

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// existingAgreement checks, for every pod at every relaxation level and
// every existing node, that the hot path (existingFits) and the
// explanation (existingReason) agree: a node fits exactly when there is no
// reason it does not. A disagreement would place pods where `why` says
// they cannot go, or refuse them with no reason to show.
func existingAgreement(t *testing.T, s *solver, when string) {
	t.Helper()
	for i := range s.in.Pods {
		for cl := s.podClass[i].level0; cl != nil; cl = cl.relax(s.hasPreferTaints) {
			if cl.class.err != nil || cl.reqsErr != nil {
				continue
			}
			ev, err := s.topo.evaluate(cl)
			if err != nil {
				continue
			}
			eff := cl.reqs
			if len(ev.extra) > 0 {
				eff = cl.reqs.Intersect(ev.extra)
			}
			for _, b := range s.nodes {
				_, ok := s.existingFits(b, cl, eff, ev)
				reason := s.existingReason(b, cl, eff, ev)
				if ok != (reason == nil) {
					t.Fatalf("%s: pod %s on node %s: existingFits=%v, existingReason=%v", when, s.in.Pods[i].Name, b.node.Name, ok, reason)
				}
			}
		}
	}
}

// withInFlight adds to a random snapshot in-flight NodeClaims (described by
// requirements, not yet initialized, some with the ephemeral startup
// taints) and makes zone and capacity type well known, so that the lenient
// path of both checks is exercised.
func withInFlight(in *Input, seed int64) *Input {
	r := rand.New(rand.NewSource(seed))
	in.WellKnownLabels = []string{LabelZone, LabelCapacityType}
	for i := 0; i < r.Intn(3); i++ {
		n := mkNode(fmt.Sprintf("claim-%d", i), fmt.Sprint(2+r.Intn(6)), "16Gi", nil)
		n.NodeClaim, n.Managed, n.Initialized = n.Name, true, false
		n.Requirements = NewRequirements(NewRequirement(LabelZone, OpIn, zones3[r.Intn(len(zones3))]))
		if r.Intn(2) == 0 {
			n.Requirements.Add(NewRequirement(LabelCapacityType, OpIn, CapacityTypeOnDemand))
		}
		if r.Intn(3) == 0 {
			n.Taints = []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}
		}
		in.Nodes = append(in.Nodes, n)
	}
	return in
}

// FuzzExistingFitsAgreesWithReason: on random snapshots, before the solve
// and once every pod is placed (nodes fuller, topology counted), existingFits
// succeeds exactly when existingReason is nil.
func FuzzExistingFitsAgreesWithReason(f *testing.F) {
	for i := int64(0); i < 8; i++ {
		f.Add(i)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		s := newSolver(withInFlight(randomSnapshot(seed), seed))
		existingAgreement(t, s, "before the solve")
		s.run()
		existingAgreement(t, s, "after the solve")
	})
}

// TestExistingFitsAgreesWithReason runs a fixed batch of the fuzz seeds in
// normal test runs.
func TestExistingFitsAgreesWithReason(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		s := newSolver(withInFlight(randomSnapshot(seed), seed))
		existingAgreement(t, s, "before the solve")
		s.run()
		existingAgreement(t, s, "after the solve")
	}
}
