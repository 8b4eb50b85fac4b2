// Package snapshot turns the cluster as it is into the solver's Input: the
// pods to plan (pending pods, the pods their ReplicaSets are about to create,
// and the pods that must leave deleting or disrupted nodes), the nodes and
// in-flight NodeClaims they may go to, the Ready dynamic NodePools with their
// instance types and limit headroom, DaemonSets, namespaces and volumes.
//
// Provisioning, disruption and consolidation all build their snapshots here,
// so none of them imports another controller or keeps its own copy. A
// Request adds what to simulate on top (nodes to take away, extra pods).
//
// The Builder depends only on the interfaces it declares: a client.Reader for
// API objects, the cloud provider's GetInstanceTypes, and a small
// cluster-state interface. The controller passes its cache and pkg/state; a
// CLI can pass a direct client and an implementation that lists the API.
package snapshot
