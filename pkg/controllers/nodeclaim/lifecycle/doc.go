// Package lifecycle owns a NodeClaim from creation to deletion: it puts the
// termination finalizer on before anything is bought, launches the instance
// through the cloud provider (exactly once per NodeClaim), waits for its Node
// to register and syncs the NodeClaim's labels, taints and ownership onto it,
// declares the node initialized once it is Ready and its startup taints and
// extended resources have settled, gives up on instances that never launch or
// register, and on deletion removes the Node and the instance before letting
// the NodeClaim go.
//
// When a launch runs out of capacity it records the offering in the shared
// cloudprovider.UnavailableOfferings, which the provisioner and the provider
// consult when planning.
package lifecycle
