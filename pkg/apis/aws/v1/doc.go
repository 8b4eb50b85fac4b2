// Package v1 holds the karpenter.k8s.aws/v1 API: the EC2NodeClass kind that
// tells the AWS provider how to launch instances (network, image, identity,
// storage, instance metadata), plus the AWS-specific label, annotation,
// finalizer and resource-name constants. Validation lives in kubebuilder
// markers so the API server enforces it without a webhook.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1
