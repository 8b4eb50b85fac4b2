// Package v1 holds the karpenter.sh/v1 API: NodePool and NodeClaim, and the
// well-known labels, annotations, taints and finalizers that every other
// package reads from here.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1
