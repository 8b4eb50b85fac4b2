package apis_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// upstreamExamples is where the workplace keeps upstream Karpenter's own
// example manifests; CI lays shared/ beside the clone.
const upstreamExamples = "../../../shared/reference/upstream-examples/v1"

// TestUpstreamExamples applies each of upstream's v1 example manifests with a
// server-side dry run and expects upstream's own verdict: every object is
// accepted except the Windows custom-userdata NodePool, whose nodeClassRef
// group carries a version.
func TestUpstreamExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(upstreamExamples, "*.yaml"))
	if len(files) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("no upstream examples at %s; CI must have shared/ beside the clone", upstreamExamples)
		}
		t.Skipf("no upstream examples at %s", upstreamExamples)
	}
	rejected := map[string]string{
		"windows-custom-userdata.yaml": `spec.template.spec.nodeClassRef.group: Invalid value: "karpenter.k8s.aws/v1"`,
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			raw = []byte(strings.ReplaceAll(string(raw), "${CLUSTER_NAME}", "example-cluster"))
			errs := dryRunAll(t, raw)
			if want, ok := rejected[name]; ok {
				require.Len(t, errs, 1, "exactly one object is invalid")
				require.Contains(t, errs[0], want)
				return
			}
			require.Empty(t, errs)
		})
	}
}

// TestOwnExamples checks that what `make run` applies is valid.
func TestOwnExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	aws, err := filepath.Glob("../../examples/aws/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, aws)
	files = append(files, aws...)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Empty(t, dryRunAll(t, raw), f)
	}
}

// dryRunAll creates every object of a manifest with DryRun=All, so CEL and
// OpenAPI validation run without leaving objects behind, and returns the
// API server's error messages.
func dryRunAll(t *testing.T, raw []byte) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objs, err := controlplane.DecodeManifests(raw)
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	var errs []string
	for _, o := range objs {
		if o.GetNamespace() == "" && o.GetKind() == "Deployment" {
			o.SetNamespace("default")
		}
		if err := cp.Client.Create(ctx, o, client.DryRunAll); err != nil {
			errs = append(errs, o.GetKind()+"/"+o.GetName()+": "+err.Error())
		}
	}
	return errs
}
