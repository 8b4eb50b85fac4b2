// Package health owns node repair (feature gate NodeRepair): a Karpenter
// node whose condition matches one of the cloud provider's repair policies
// for longer than the policy's toleration is replaced by deleting its
// NodeClaim with a termination deadline of now, which makes termination
// skip PDBs, do-not-disrupt and terminationGracePeriod. Repair is a safety
// net, not a mass action: while more than 20% (rounded up) of a pool's
// nodes are unhealthy it stops and reports NodeRepairBlocked, since that
// many failures at once point at a cause replacing nodes will not fix.
package health
