// Package scheduling is the solver: given a snapshot of pending pods, existing
// nodes and the NodePools with their instance types, it decides where every
// pod goes and which new NodeClaims to launch. It is a pure library (no I/O,
// no clock, no API server, no goroutines) and deterministic: the same
// snapshot always gives the same answer. Provisioning, consolidation, the
// `simulate` CLI and the `why` explanations all call it.
//
// # API
//
//	in := &scheduling.Input{
//		Pods:       pending,        // []*corev1.Pod
//		Nodes:      existing,       // []*scheduling.ExistingNode (nodes and in-flight NodeClaims)
//		NodePools:  pools,          // []*scheduling.NodePool, each with its []*InstanceType
//		DaemonSets: daemonsets,     // []*appsv1.DaemonSet
//		Unavailable: iceCache,      // []scheduling.OfferingKey
//		Options:    scheduling.Options{PreferencePolicy: scheduling.PreferencesRespect},
//	}
//	res := scheduling.Solve(in)
//	for _, p := range res.Placements { // one per input pod, input order
//		switch {
//		case p.Node != "":        // bind to an existing node / in-flight NodeClaim
//		case p.NodeClaim >= 0:    // res.NewNodeClaims[p.NodeClaim]
//		default:                  // p.Errors: one typed refusal per NodePool (Kind, Key, figures); p.Why() joins them
//		}
//	}
//	for _, nc := range res.NewNodeClaims {
//		// nc.NodePool, nc.Requirements (narrowed, instance types ≤ 600 by price),
//		// nc.InstanceTypes (sorted by price), nc.Requests, nc.Labels, nc.Taints, nc.Price
//	}
//
// Requirements are the label algebra everything is built on: each key maps to
// a finite value set or a complement set with optional integer bounds, so
// that In/NotIn/Exists/DoesNotExist/Gt/Lt/Gte/Lte intersect by one rule.
// Callers convert API objects with RequirementsFromNodeSelector,
// RequirementsFromMinValues and RequirementsFromLabels.
//
// # How it decides
//
// Pods with identical scheduling-relevant content form a class; parsing,
// request sums and topology membership are computed once per class, and a
// NodeClaim that can never take a class (resources, taints, labels, host
// ports, hostname anti-affinity) is remembered per class so identical pods
// skip it.
//
// Pods are queued most-constrained first: pods whose anti-affinity selects
// themselves (they decide how many nodes there must be), then pods with any
// topology term, then the rest; largest first within a tier, with cpu-heavy,
// memory-heavy and pod-count-heavy pods interleaved so that every NodeClaim
// ends with a balanced mix.
//
// Each pod tries existing nodes first (initialized first, then by name,
// first fit), then the NodeClaims planned so far: the first one whose
// cheapest remaining instance type still has room wins; otherwise the one
// whose cheapest type grows the least. Only then is a new NodeClaim opened,
// from the highest-weight NodePool that can take the pod. Upstream Karpenter
// instead puts each pod on the planned NodeClaim with the fewest pods, which
// spreads pods thinly; this packs tighter for the same constraints. With
// Options.CapGrowth (the provisioner's), a NodeClaim does not grow when no type that would hold its pods prices them
// within 20% of the best type it was opened with (per unit of its load):
// the biggest types often cost more per cpu and GiB than two of a family's
// largest, so the pod opens a new NodeClaim instead, unless limits forbid one.
//
// Topology (spread, pod affinity and anti-affinity) becomes, per pod, extra
// requirements on the domain key plus per-node checks for the hostname key;
// a NodeClaim is pinned to one domain when a pod's topology depends on it,
// so every count is exact. Preferences are treated as required and relaxed
// one at a time on failure, in upstream Karpenter's order: extra required
// node-affinity terms, preferred pod affinity, preferred pod anti-affinity,
// preferred node affinity, ScheduleAnyway spreads, PreferNoSchedule taints.
//
// NodePool limits are charged, per NodeClaim, with the largest capacity it
// could still launch. Reserved offerings are consumed one unit per NodeClaim
// when results are finalized, so two NodeClaims never count on the last one.
package scheduling
