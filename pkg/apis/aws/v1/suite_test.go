package v1_test

import (
	"os"
	"testing"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

// cp is one etcd + kube-apiserver shared by every test in the package, with
// our CRDs installed: validation is only meaningful against the real server.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}
