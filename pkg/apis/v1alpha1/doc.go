// Package v1alpha1 holds the karpenter.sh/v1alpha1 API: NodeOverlay, which
// adjusts the price and extended resources Karpenter assumes for matching
// instance types.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1alpha1
