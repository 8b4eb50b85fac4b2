// Package provisioning turns pending pods into NodeClaims. A pod controller
// notices pods the kube-scheduler could not place and triggers a Batcher; a
// singleton loop waits for the batch window to close, snapshots the cluster
// (nodes first, then pending pods, so capacity that appears in between is
// never counted twice), asks the solver (pkg/scheduling) where everything
// goes, and creates the NodeClaims it plans. Pods get Nominated or
// FailedScheduling events carrying the solver's verdict.
//
// The package does not own the cluster state; it reads it through the small
// Cluster interface, which pkg/state implements.
package provisioning
