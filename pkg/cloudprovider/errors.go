package cloudprovider

import (
	"errors"
	"fmt"
)

// Each launch failure has its own type because the NodeClaim lifecycle reacts
// differently: insufficient capacity and an unready NodeClass delete the
// NodeClaim (the provisioner then tries something else), a CreateError keeps
// it and retries with the given condition reason, and NodeClaimNotFoundError
// is how Delete and Get say "the machine is gone". All of them wrap a cause
// and are matched with errors.As, so callers may wrap them further.

// InsufficientCapacityError means no compatible offering could be launched.
// Offerings names those found to be out of capacity, for the caller's
// unavailable-offerings cache; it may be empty.
type InsufficientCapacityError struct {
	Err       error
	Offerings []OfferingKey
}

// NewInsufficientCapacityError wraps err, naming the exhausted offerings.
func NewInsufficientCapacityError(err error, offerings ...OfferingKey) *InsufficientCapacityError {
	return &InsufficientCapacityError{Err: err, Offerings: offerings}
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity, %v", e.Err)
}

func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// IsInsufficientCapacityError reports whether err (or anything it wraps) is
// an InsufficientCapacityError.
func IsInsufficientCapacityError(err error) bool {
	var target *InsufficientCapacityError
	return errors.As(err, &target)
}

// NodeClassNotReadyError means the NodeClaim's NodeClass exists but cannot be
// launched from yet.
type NodeClassNotReadyError struct {
	Err error
}

// NewNodeClassNotReadyError wraps err.
func NewNodeClassNotReadyError(err error) *NodeClassNotReadyError {
	return &NodeClassNotReadyError{Err: err}
}

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("nodeclass not ready, %v", e.Err)
}

func (e *NodeClassNotReadyError) Unwrap() error { return e.Err }

// IsNodeClassNotReadyError reports whether err wraps a NodeClassNotReadyError.
func IsNodeClassNotReadyError(err error) bool {
	var target *NodeClassNotReadyError
	return errors.As(err, &target)
}

// CreateError is a launch failure worth retrying; ConditionReason and
// ConditionMessage are what the Launched condition should show meanwhile.
type CreateError struct {
	Err              error
	ConditionReason  string
	ConditionMessage string
}

// NewCreateError wraps err with the reason and message for the Launched
// condition.
func NewCreateError(err error, reason, message string) *CreateError {
	return &CreateError{Err: err, ConditionReason: reason, ConditionMessage: message}
}

func (e *CreateError) Error() string {
	return fmt.Sprintf("creating nodeclaim, %v", e.Err)
}

func (e *CreateError) Unwrap() error { return e.Err }

// IsCreateError reports whether err wraps a CreateError.
func IsCreateError(err error) bool {
	var target *CreateError
	return errors.As(err, &target)
}

// AsCreateError returns the CreateError err wraps, or nil.
func AsCreateError(err error) *CreateError {
	var target *CreateError
	if errors.As(err, &target) {
		return target
	}
	return nil
}

// NodeClaimNotFoundError means the machine behind a NodeClaim does not exist
// (any more).
type NodeClaimNotFoundError struct {
	Err error
}

// NewNodeClaimNotFoundError wraps err.
func NewNodeClaimNotFoundError(err error) *NodeClaimNotFoundError {
	return &NodeClaimNotFoundError{Err: err}
}

func (e *NodeClaimNotFoundError) Error() string {
	return fmt.Sprintf("nodeclaim not found, %v", e.Err)
}

func (e *NodeClaimNotFoundError) Unwrap() error { return e.Err }

// IsNodeClaimNotFoundError reports whether err wraps a NodeClaimNotFoundError.
func IsNodeClaimNotFoundError(err error) bool {
	var target *NodeClaimNotFoundError
	return errors.As(err, &target)
}

// IgnoreNodeClaimNotFoundError returns nil for a NodeClaimNotFoundError and
// err otherwise, for callers to whom "already gone" is success.
func IgnoreNodeClaimNotFoundError(err error) error {
	if IsNodeClaimNotFoundError(err) {
		return nil
	}
	return err
}
