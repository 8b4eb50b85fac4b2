// Package interruption receives the AWS interruption queue: several workers
// long-poll SQS (settings.interruptionQueue, found by name), parse each body
// with package messages, hand the actionable ones to a Handler and delete
// each message once it is handled, counting all of them under upstream's
// karpenter_interruption_* metrics. Acting on a message (deleting the
// NodeClaim, marking an offering or a capacity reservation unavailable)
// belongs to the controller that implements Handler.
package interruption
