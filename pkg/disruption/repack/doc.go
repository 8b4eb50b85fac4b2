// Package repack is the fleet repacking planner, our consolidation
// algorithm beside upstream's. For the pods that run now it computes a
// cheaper fleet per NodePool and turns the difference into ordinary
// disruption commands, within the budgets, replacements first:
//
//   - deletes: the inefficient nodes into the free room of the nodes
//     kept as they are, then, when no group move helps, any node into
//     any other's free room, least disruption per dollar first; a delete
//     is taken only when the kube-scheduler's own spreading of the
//     evicted pods (LeastAllocated) still places them;
//   - replacements: a node's pods (after the free room elsewhere) on
//     cheaper NodeClaims, one or two (a split into smaller machines,
//     mixing families), straight to the cheapest fit rather than one size
//     down at a time;
//   - N→M: groups of underused nodes that no single move helps, replaced
//     together by fewer or cheaper NodeClaims; when the whole group has
//     no move, the longest prefix of it (upstream's order) that has one.
//
// The pool is also planned deletes first (when the plan has a group move)
// and with upstream's batch of deletes first, and the plan worth the most
// net of the restarts it causes is kept. Before
// any move, room is reserved for pending pods and for the pods of nodes
// already leaving (upstream simulates both beside the moved pods), and an
// empty node Emptiness will delete receives nothing (it is drained).
//
// Every placement is confirmed by the pure solver provisioning uses
// (scheduling.Solve, with Robust sizing so the kube-scheduler's own mixing
// of the evicted pods still fits), with DaemonSet overhead counted on new
// NodeClaims. A move is taken only when its saving over a horizon pays for
// the pods it restarts (the payback gate), and never churns: no
// replacement by the same instance type and capacity type, no move of a
// node a recent move launched, no second eviction of a pod within the
// cool-down. Every candidate left alone gets a verdict saying why.
//
// The package is pure: the caller passes the snapshot, the candidates,
// the budgets and the history of recent moves, and gets commands and
// verdicts back. Pools are planned in parallel (bounded by GOMAXPROCS) over
// one shared, read-only snapshot; the answer does not depend on the
// number of goroutines.
package repack
