package v1beta1_test

import (
	"os"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
)

// env is the control plane shared by this package's tests; it starts on the
// first test that needs an API server.
var env crdtest.Env

func TestMain(m *testing.M) {
	code := m.Run()
	env.Stop()
	os.Exit(code)
}
