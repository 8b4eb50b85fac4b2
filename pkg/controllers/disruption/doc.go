// Package disruption runs voluntary disruption: a singleton loop on the
// leader that, every 10 seconds (and again right after it acted), builds a
// disruption snapshot from cluster state, asks pkg/disruption what to do,
// publishes the verdicts (DisruptionBlocked, InvalidDoNotDisruptAnnotation)
// and budget metrics, and hands the chosen commands to the orchestration
// queue.
//
// The queue carries a command out: it taints the candidates
// karpenter.sh/disrupted:NoSchedule, sets their DisruptionReason condition
// and marks them for deletion in cluster state, launches the replacements
// through the provisioner, waits until every replacement is Initialized,
// and deletes the candidate NodeClaims (the termination controller drains
// them). Any failure rolls the candidates back; replacements already
// launched stay as ordinary capacity. The queue lives in memory only: after
// a restart, the loop's first pass removes the taints and conditions of
// nodes that are not in the queue, and the next decision starts afresh,
// finding any replacement already launched as existing capacity.
package disruption
