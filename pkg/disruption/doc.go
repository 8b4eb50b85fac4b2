// Package disruption decides which Karpenter nodes to take away, and says
// why it leaves the others alone. It owns candidate eligibility (upstream's
// rules: managed, initialized, not deleting, not nominated, not in flight,
// no do-not-disrupt, no PodDisruptionBudget that forbids an eviction),
// disruption cost, per-NodePool disruption budgets, and the voluntary
// methods in upstream's order: Emptiness, StaticDrift, Drift (consolidation
// joins the list later).
//
// The package is pure: a Snapshot goes in (the clock reading, the managed
// nodes with their pods, NodePools and PDBs), a Decision comes out (at most
// one method's commands, plus a typed Verdict for every node the pass looked
// at and did not disrupt). It does no I/O and reads no clock. The one thing
// it cannot decide alone, whether a drifted node's pods fit elsewhere, it
// asks of a Simulator the caller passes in. The disruption controller builds
// the snapshot from cluster state and acts on the decision; a CLI can build
// the same snapshot offline and call Explain.
package disruption
