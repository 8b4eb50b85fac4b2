// Package v1alpha1 holds the karpenter.kwok.sh/v1alpha1 API used by the
// simulated (KWOK) provider: the KWOKNodeClass kind and the labels the fake
// provider stamps on the Nodes it creates.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.kwok.sh
package v1alpha1
