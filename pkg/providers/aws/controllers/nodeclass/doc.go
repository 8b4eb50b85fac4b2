// Package nodeclass owns an EC2NodeClass's status and its
// karpenter.k8s.aws/termination finalizer, as upstream's nodeclass
// controller does. Sub-reconcilers resolve, in order, the AMIs, subnets,
// security groups, instance profile, placement group and validation over one
// copy of the object; the status is patched once (optimistic lock) and Ready
// is the conjunction of their conditions. Requeue times are upstream's:
// AMIs 5m (1m when none match), subnets 1m, security groups 5m, validation
// 10m; the soonest wins.
//
// On deletion the finalizer waits while NodeClaims still reference the class
// (an event every 10 minutes), then deletes the managed instance profiles
// under the class's IAM path and its launch templates (through the optional
// LaunchTemplates hook) before letting the object go.
package nodeclass
