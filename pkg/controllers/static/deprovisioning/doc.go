// Package deprovisioning owns scale-down of static NodePools: when a pool
// has more NodeClaims than spec.replicas, it deletes the surplus, cheapest
// to lose first (not yet launched, then empty, then lowest disruption cost,
// nodes with do-not-disrupt pods last), and counts them in
// karpenter_nodeclaims_disrupted_total with reason "overprovisioned". The
// termination controller then drains them as for any deleted NodeClaim.
package deprovisioning
