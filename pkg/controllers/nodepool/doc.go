// Package nodepool holds what the NodePool controllers share: setting a
// status condition and recomputing Ready from its dependents. The
// controllers themselves live in the subpackages counter (status.resources
// and status.nodes), readiness (NodeClassReady), validation
// (ValidationSucceeded) and hash (the nodepool-hash annotation).
package nodepool
