package v1_test

import (
	"context"
	"os"
	"testing"
	"time"

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

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// validNodePool is the smallest NodePool the API server accepts; cases
// mutate a fresh copy of it.
const validNodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: test
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
`

// validNodeClaim is the smallest NodeClaim the API server accepts.
const validNodeClaim = `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: test
spec:
  requirements:
    - key: kubernetes.io/arch
      operator: In
      values: ["amd64"]
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: default
`

// Paths into a NodePool, for brevity in the tables.
var (
	tmplSpec   = []string{"spec", "template", "spec"}
	tmplLabels = []string{"spec", "template", "metadata", "labels"}
)

func path(prefix []string, rest ...string) []string {
	return append(append([]string{}, prefix...), rest...)
}
