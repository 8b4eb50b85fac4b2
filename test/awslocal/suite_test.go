package awslocal_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

// local is the one local AWS every test in the package shares; starting
// moto costs seconds, so tests must not assume a fresh one and must clean
// up the faults and overrides they add.
var local *awslocal.Local

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	var err error
	local, err = awslocal.Start(ctx, awslocal.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local AWS:", err)
		os.Exit(1)
	}
	code := m.Run()
	local.Stop()
	os.Exit(code)
}
