// Package recovery keeps a panic in a goroutine or ticker loop that a
// controller starts itself from killing the process. controller-runtime
// recovers panics in reconcilers only; everything else (periodic passes,
// fan-out workers) runs its body through Do.
package recovery

import (
	"context"
	"fmt"
	"runtime/debug"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// PanicError is what Do returns when the function panicked.
type PanicError struct {
	// What names the work that panicked, as given to Do.
	What string
	// Value is what was passed to panic.
	Value interface{}
	// Stack is the goroutine's stack at the panic.
	Stack string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic in %s: %v", e.What, e.Value)
}

// Do runs fn. If fn panics, the panic is logged with its stack (as
// controller-runtime logs a reconciler's) and returned as a *PanicError, so
// a loop can carry on with its next pass and a worker can report a failure
// instead of taking the process down.
func Do(ctx context.Context, what string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			perr := &PanicError{What: what, Value: r, Stack: string(debug.Stack())}
			log.FromContext(ctx).Error(perr, "Observed a panic", "panic", fmt.Sprint(r), "work", what, "stacktrace", perr.Stack)
			err = perr
		}
	}()
	fn()
	return nil
}
