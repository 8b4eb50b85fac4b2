// Package apis owns the CustomResourceDefinitions generated from the API types
// and the scheme that knows every API group this project serves. The CRD YAML
// is embedded so that the controller, the test harness and `make run` install
// exactly what was generated and committed.
package apis

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
)

// AddToScheme registers every API group this project serves.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		v1.AddToScheme, v1alpha1.AddToScheme, awsv1.AddToScheme, kwokv1alpha1.AddToScheme, autoscalingv1beta1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return fmt.Errorf("adding API group to scheme: %w", err)
		}
	}
	return nil
}

//go:embed crds/*.yaml
var crdFS embed.FS

// CRDs decodes every embedded CustomResourceDefinition, sorted by file name so
// that installation order is stable.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crdFS, "crds/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing embedded CRDs: %w", err)
	}
	sort.Strings(names)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		raw, err := crdFS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		// controller-gen writes one document per file, but tolerate a leading
		// separator so a hand-edited file does not break start-up.
		raw = bytes.TrimPrefix(bytes.TrimSpace(raw), []byte("---"))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
