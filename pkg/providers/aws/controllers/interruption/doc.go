// Package interruption acts on the AWS interruption signals: the EventBridge
// events of the SQS interruption queue (spot interruption warnings,
// rebalance recommendations, instance state changes, capacity-reservation
// interruptions and AWS Health scheduled changes for EC2) and the
// instance-status check that polls DescribeInstanceStatus every minute.
//
// Controller implements interruption.Handler for the queue's receiver. For
// each instance a message names it finds the NodeClaim by the instance ID in
// its provider ID and, as upstream does, records events on the NodeClaim and
// its Node and deletes the NodeClaim, so that the normal termination path
// (finalizer, taint, drain, TerminateInstances) moves the pods off before
// EC2 takes the instance. A spot interruption also marks its spot offering
// unavailable in the shared insufficient-capacity cache, so the replacement
// goes elsewhere; a rebalance recommendation only records an event.
//
// StatusController is the instance-status check: an impaired instance or
// system status replaces the node forcefully (termination deadline now, so
// PDBs and do-not-disrupt do not hold the drain); a scheduled event drains it
// like an interruption.
//
// Beyond upstream, and off by default, the controller can learn interruption
// rates per offering (Learner): an offering that keeps being interrupted is
// kept out of launches for longer than the cache's three minutes, with a
// memory that decays.
package interruption
