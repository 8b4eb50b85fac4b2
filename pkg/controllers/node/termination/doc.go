// Package termination owns the end of a Karpenter-managed Node: once the
// Node is being deleted and carries the karpenter.sh/termination finalizer,
// it cordons and taints the node, evicts its pods in upstream's order while
// honouring PodDisruptionBudgets and do-not-disrupt (until the NodeClaim's
// terminationGracePeriod deadline, after which pods are deleted outright),
// waits for volumes to detach, terminates the instance and only then lets
// the Node go.
package termination
