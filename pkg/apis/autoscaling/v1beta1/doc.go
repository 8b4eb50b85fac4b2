// Package v1beta1 holds the autoscaling.x-k8s.io/v1beta1 API Karpenter
// shares with the Cluster Autoscaler: CapacityBuffer, spare capacity kept
// ready for pods that do not exist yet. The wire format is upstream's; the
// Go types and their comments are ours.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
