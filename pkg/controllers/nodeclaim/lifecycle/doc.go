// Package lifecycle owns a NodeClaim from creation to deletion: it puts the
// termination finalizer on before anything is bought, launches the instance
// through the cloud provider (exactly once per NodeClaim), waits for its Node
// to register and syncs the NodeClaim's labels, taints and ownership onto it,
// declares the node initialized once it is Ready and its startup taints and
// extended resources have settled, gives up on instances that never launch or
// register, and on deletion removes the Node and the instance before letting
// the NodeClaim go.
//
// It also owns UnavailableOfferings, the short-lived memory of offerings that
// ran out of capacity, which the provisioner consults when planning.
package lifecycle
