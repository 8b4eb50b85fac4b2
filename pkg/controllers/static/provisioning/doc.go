// Package provisioning owns scale-up of static NodePools (spec.replicas set,
// feature gate StaticCapacity): it keeps as many NodeClaims as the pool asks
// for, never more than limits.nodes allows. The NodeClaims are the pool's
// template with no pod requests, so the cloud provider picks the instance
// type at launch. Scale-down is the deprovisioning package's; replacing
// drifted static nodes is the disruption controller's (StaticDrift).
package provisioning
