// Package snapshot turns the cluster as it is into the solver's Input: the
// pods to plan (pending pods, the pods their ReplicaSets are about to create,
// and the pods that must leave deleting or disrupted nodes), the nodes and
// in-flight NodeClaims they may go to, the Ready dynamic NodePools with their
// instance types and limit headroom, DaemonSets, namespaces and volumes.
//
// Build is the one function that does it. Provisioning, both consolidation
// strategies, drift, the disruption simulator and the CLI call it with the
// View they have: the controller's cluster state over its informer cache
// and cloud provider (Live), the CLI's listed objects (Live over them), or
// a disruption.Snapshot for offline planning. A Request adds what to
// simulate on top: nodes to take away, destinations the moved pods may not
// use, instance types to restrict new NodeClaims to, extra pods.
package snapshot
