// Package cloudprovider owns the contract between Karpenter's controllers and
// whatever actually buys machines: the CloudProvider interface, the typed
// errors that tell the NodeClaim lifecycle how to react to a failed launch,
// and small helpers over instance types and offerings.
//
// Instance types and offerings are the solver's own types (aliases of
// scheduling.InstanceType and scheduling.Offering), so a provider's catalog
// can be handed to the solver without conversion.
package cloudprovider
