package v1_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/karpenter-go/karpenter/pkg/apis"
)

// TestCRDShape checks the parts of the embedded CRDs that users see outside
// validation: kubectl columns, categories, short names and subresources.
func TestCRDShape(t *testing.T) {
	crds, err := apis.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range crds {
		byName[crd.Name] = crd
	}
	type column struct {
		name, path string
		wide       bool
	}
	for _, tc := range []struct {
		crd        string
		version    string
		columns    []column
		shortNames []string
		scale      *apiextensionsv1.CustomResourceSubresourceScale
		// namespaced CRDs are in category "autoscaling" (CapacityBuffer);
		// the others are cluster-scoped in category "karpenter".
		namespaced bool
	}{
		{
			crd: "nodepools.karpenter.sh", version: "v1",
			columns: []column{
				{"NodeClass", ".spec.template.spec.nodeClassRef.name", false},
				{"Nodes", ".status.nodes", false},
				{"Ready", `.status.conditions[?(@.type=="Ready")].status`, false},
				{"Age", ".metadata.creationTimestamp", false},
				{"Weight", ".spec.weight", true},
				{"CPU", ".status.resources.cpu", true},
				{"Memory", ".status.resources.memory", true},
			},
			scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.nodes"},
		},
		{
			crd: "nodeclaims.karpenter.sh", version: "v1",
			columns: []column{
				{"Type", `.metadata.labels.node\.kubernetes\.io/instance-type`, false},
				{"Capacity", `.metadata.labels.karpenter\.sh/capacity-type`, false},
				{"Zone", `.metadata.labels.topology\.kubernetes\.io/zone`, false},
				{"Node", ".status.nodeName", false},
				{"Ready", `.status.conditions[?(@.type=="Ready")].status`, false},
				{"Age", ".metadata.creationTimestamp", false},
				{"ImageID", ".status.imageID", true},
				{"ID", ".status.providerID", true},
				{"NodePool", `.metadata.labels.karpenter\.sh/nodepool`, true},
				{"NodeClass", ".spec.nodeClassRef.name", true},
				{"Drifted", `.status.conditions[?(@.type=="Drifted")].status`, true},
			},
		},
		{
			crd: "nodeoverlays.karpenter.sh", version: "v1alpha1",
			columns: []column{
				{"Ready", `.status.conditions[?(@.type=="Ready")].status`, false},
				{"Age", ".metadata.creationTimestamp", false},
				{"Weight", ".spec.weight", true},
			},
			shortNames: []string{"overlays"},
		},
		{
			crd: "capacitybuffers.autoscaling.x-k8s.io", version: "v1beta1",
			columns: []column{
				{"Strategy", ".spec.provisioningStrategy", false},
				{"PodTemplate", ".status.podTemplateRef.name", false},
				{"Replicas", ".status.replicas", false},
				{"ConditionsType", ".status.conditions[*].type", false},
				{"ConditionsStatus", ".status.conditions[*].status", false},
				{"ConditionsReason", ".status.conditions[*].reason", false},
				{"Age", ".metadata.creationTimestamp", false},
			},
			shortNames: []string{"cb"},
			namespaced: true,
		},
	} {
		t.Run(tc.crd, func(t *testing.T) {
			crd, ok := byName[tc.crd]
			if !ok {
				t.Fatalf("CRD %s not embedded", tc.crd)
			}
			scope, category := apiextensionsv1.ClusterScoped, "karpenter"
			if tc.namespaced {
				scope, category = apiextensionsv1.NamespaceScoped, "autoscaling"
			}
			if crd.Spec.Scope != scope {
				t.Errorf("scope = %s, want %s", crd.Spec.Scope, scope)
			}
			if got := crd.Spec.Names.Categories; len(got) != 1 || got[0] != category {
				t.Errorf("categories = %v, want [%s]", got, category)
			}
			if got := crd.Spec.Names.ShortNames; len(got) != len(tc.shortNames) || (len(got) > 0 && got[0] != tc.shortNames[0]) {
				t.Errorf("short names = %v, want %v", got, tc.shortNames)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != tc.version {
				t.Fatalf("versions = %+v, want only %s", crd.Spec.Versions, tc.version)
			}
			v := crd.Spec.Versions[0]
			if len(v.AdditionalPrinterColumns) != len(tc.columns) {
				t.Fatalf("got %d printer columns, want %d", len(v.AdditionalPrinterColumns), len(tc.columns))
			}
			for i, want := range tc.columns {
				got := v.AdditionalPrinterColumns[i]
				if got.Name != want.name || got.JSONPath != want.path || (got.Priority == 1) != want.wide {
					t.Errorf("column %d = %s %s priority %d, want %s %s wide=%v", i, got.Name, got.JSONPath, got.Priority, want.name, want.path, want.wide)
				}
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Error("no status subresource")
			}
			switch {
			case tc.scale == nil && v.Subresources != nil && v.Subresources.Scale != nil:
				t.Errorf("unexpected scale subresource %+v", v.Subresources.Scale)
			case tc.scale != nil && (v.Subresources == nil || v.Subresources.Scale == nil ||
				v.Subresources.Scale.SpecReplicasPath != tc.scale.SpecReplicasPath || v.Subresources.Scale.StatusReplicasPath != tc.scale.StatusReplicasPath):
				t.Errorf("scale subresource = %+v, want %+v", v.Subresources, tc.scale)
			}
		})
	}
}
