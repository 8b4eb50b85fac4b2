// Package disruption owns the NodeClaim conditions that make a node a
// candidate for voluntary disruption: Drifted (the node no longer matches
// its NodePool, its instance type or its NodeClass) and Consolidatable
// (consolidateAfter has passed without pod churn). It only marks NodeClaims;
// the disruption controller decides what to do with the marked ones.
//
// Both conditions are computed by one controller, as upstream does, so that
// one status patch per reconcile carries both and the two never race each
// other's optimistic lock.
package disruption
