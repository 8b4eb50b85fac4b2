package controlplane

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Main is a TestMain body: it starts a control plane for the package's tests,
// stores it in *cp, runs the tests and stops it. It returns the exit code for
// os.Exit.
func Main(m *testing.M, opts Options, cp **ControlPlane) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	started, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting control plane: %v\n", err)
		return 1
	}
	*cp = started
	defer started.Stop()
	return m.Run()
}
