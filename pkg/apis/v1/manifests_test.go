package v1_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/apis/internal/crdtest"
)

// TestSeedManifests gives the NodePool and NodeClaim manifests of the seed
// documents the verdicts upstream's CRDs give them. Several are illustrative
// and invalid as written; the comments in testdata/seeds say why.
func TestSeedManifests(t *testing.T) {
	kube := env.Client(t)
	for _, tc := range []struct {
		file   string
		strip  [][]string // fields removed before applying, see below
		reject []crdtest.WantField
	}{
		{
			file: "000-nodeclaim.yaml",
			// The illustrative ownerReference has no uid, which the API
			// server demands of every object's metadata regardless of the
			// CRD; status is not part of a create.
			strip: [][]string{{"metadata", "ownerReferences"}, {"status"}},
		},
		{file: "001-lab-general-nodepool.yaml"},
		{file: "002-general-purpose-nodepool.yaml"},
		{file: "003-default-nodepool.yaml", reject: []crdtest.WantField{
			{Field: "spec", Message: "only 'limits.nodes' is supported on static NodePools"},
			{Field: "spec", Message: "'weight' is not supported on static NodePools"},
		}},
		{file: "003-static-pool.yaml", reject: []crdtest.WantField{
			{Field: "spec.template.spec.nodeClassRef.group", Message: "Required value"},
			{Field: "spec.template.spec.nodeClassRef.kind", Message: "Required value"},
			{Field: "spec.disruption.consolidateAfter", Message: "Required value"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "seeds", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			docs := crdtest.Documents(t, data)
			if len(docs) != 1 {
				t.Fatalf("want one document, got %d", len(docs))
			}
			obj := docs[0]
			for _, p := range tc.strip {
				crdtest.Delete(obj.Object, p...)
			}
			err = crdtest.DryRunCreate(testContext(t), kube, obj)
			if tc.reject == nil {
				if err != nil {
					t.Fatalf("rejected, upstream accepts it: %v", err)
				}
				return
			}
			crdtest.RequireInvalid(t, err, tc.reject...)
		})
	}
}

// TestUpstreamExampleNodePools applies the NodePools of upstream's
// examples/v1. All are accepted except windows-custom-userdata's, whose
// nodeClassRef.group carries a version, which upstream rejects too.
func TestUpstreamExampleNodePools(t *testing.T) {
	kube := env.Client(t)
	rejected := map[string][]crdtest.WantField{
		"windows-custom-userdata.yaml": {{Field: "spec.template.spec.nodeClassRef.group", Message: "should match '^[^/]*$'"}},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "upstream-examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d example files, want the whole examples/v1 set", len(files))
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			docs := crdtest.Documents(t, data)
			if len(docs) == 0 {
				t.Fatal("no NodePool in file")
			}
			for _, obj := range docs {
				err := crdtest.DryRunCreate(testContext(t), kube, obj)
				if want, ok := rejected[name]; ok {
					crdtest.RequireInvalid(t, err, want...)
					continue
				}
				if err != nil {
					t.Errorf("NodePool %s rejected, upstream accepts it: %v", obj.GetName(), err)
				}
			}
		})
	}
}
