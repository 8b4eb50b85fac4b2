// Package messages parses the interruption queue's message bodies: the
// EventBridge envelopes EC2 and AWS Health put on the SQS queue
// (settings.interruptionQueue). Parse is pure (no I/O, no clock, no state)
// and imports only the standard library, so it is cheap to fuzz; every body
// becomes either a typed Message (with a Kind, the EC2 instance ids it is
// about and its start time) or a *ParseError.
package messages
