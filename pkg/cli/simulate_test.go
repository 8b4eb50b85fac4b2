package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

func TestReadChanges(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		pools     int
		deploys   int
		namespace string
		err       string
	}{
		{name: "pool and deployment", yaml: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 2, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}}}
`, pools: 1, deploys: 1, namespace: "default"},
		{name: "other kinds are refused by name", yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", err: "ConfigMap cannot be simulated"},
		{name: "unknown fields are refused", yaml: "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {replica: 3}\n", err: "replica"},
		{name: "nothing to simulate", yaml: "---\n", err: "no NodePool, EC2NodeClass or Deployment"},
		{name: "not yaml", yaml: "{", err: "document 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ReadChanges([]byte(tt.yaml))
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, c.NodePools, tt.pools)
			require.Len(t, c.Deployments, tt.deploys)
			assert.Equal(t, tt.namespace, c.Deployments[0].Namespace)
		})
	}
}

// TestDefaulted checks that a pool written without its disruption block or
// expireAfter gets the CRD's defaults, and that set values are kept.
func TestDefaulted(t *testing.T) {
	c, err := ReadChanges([]byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: b}
spec:
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 5m}
  template:
    spec:
      expireAfter: Never
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: []
`))
	require.NoError(t, err)
	a, err := defaulted(&c.NodePools[0])
	require.NoError(t, err)
	assert.Equal(t, v1.ConsolidationPolicyWhenEmptyOrUnderutilized, a.Spec.Disruption.ConsolidationPolicy)
	require.Len(t, a.Spec.Disruption.Budgets, 1)
	assert.Equal(t, "10%", a.Spec.Disruption.Budgets[0].Nodes)
	require.NotNil(t, a.Spec.Template.Spec.ExpireAfter.Duration)
	assert.Equal(t, "720h0m0s", a.Spec.Template.Spec.ExpireAfter.Duration.String())
	b, err := defaulted(&c.NodePools[1])
	require.NoError(t, err)
	assert.Equal(t, v1.ConsolidationPolicyWhenEmpty, b.Spec.Disruption.ConsolidationPolicy)
	assert.Equal(t, "5m0s", b.Spec.Disruption.ConsolidateAfter.Duration.String())
	assert.Nil(t, b.Spec.Template.Spec.ExpireAfter.Duration, "Never stays Never")
}

// storedClass is an EC2NodeClass as the API server stores it (schema
// defaults applied) and the hash controller stamps it. The controller's
// hash includes its cluster CA bundle, which the CLI does not know.
func storedClass(t *testing.T, manifest string) awsv1.EC2NodeClass {
	t.Helper()
	c, err := ReadChanges([]byte(manifest))
	require.NoError(t, err)
	require.Len(t, c.EC2NodeClasses, 1)
	nc, err := defaultedClass(&c.EC2NodeClasses[0])
	require.NoError(t, err)
	require.NotNil(t, nc.Spec.MetadataOptions, "the CRD defaults metadataOptions, as the API server would")
	require.Equal(t, "required", *nc.Spec.MetadataOptions.HTTPTokens)
	nc.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: nc.Hash(ptr.To("Y29udHJvbGxlci1jYQ==")), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
	return *nc
}

const classManifest = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-local
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: local}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: local}}]
%s`

// TestSimulateEC2NodeClassEdits: a class edit drifts, with the provider's
// own static check, exactly the launched NodeClaims of that class whose
// hash it moves (NodeClassDrift); the same spec written without its
// defaults moves nothing; a changed selector, which only AWS resolves, is
// reported as unresolved with the NodeClaims it may still drift.
func TestSimulateEC2NodeClassEdits(t *testing.T) {
	stored := storedClass(t, fmt.Sprintf(classManifest, ""))
	claim := func(name, class string, launched bool) v1.NodeClaim {
		nc := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "default"},
			Annotations: map[string]string{awsv1.AnnotationEC2NodeClassHash: stored.Annotations[awsv1.AnnotationEC2NodeClassHash], awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}
		if launched {
			nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
			nc.Status.NodeName = "node-" + name
		}
		return nc
	}
	objects := func() *Objects {
		return &Objects{Time: metav1.Now(), EC2NodeClasses: []awsv1.EC2NodeClass{stored},
			NodeClaims: []v1.NodeClaim{claim("a", "default", true), claim("b", "default", true), claim("other", "other", true), claim("pending", "default", false)}}
	}
	tests := []struct {
		name       string
		edit       string
		drifted    []string
		unresolved []SimulatedUnresolved
	}{
		{name: "the stored spec written without its defaults drifts nothing", edit: fmt.Sprintf(classManifest, "")},
		{name: "a tag edit drifts the class's launched NodeClaims", edit: fmt.Sprintf(classManifest, "  tags: {team: a}\n"),
			drifted: []string{"a NodeClassDrift", "b NodeClassDrift"}},
		{name: "a metadata option edit drifts them too", edit: fmt.Sprintf(classManifest, "  metadataOptions: {httpTokens: optional}\n"),
			drifted: []string{"a NodeClassDrift", "b NodeClassDrift"}},
		{name: "a selector edit is left to the controller, named", edit: strings.Replace(fmt.Sprintf(classManifest, ""), "alias: al2023@latest", "alias: al2023@v20250101", 1),
			unresolved: []SimulatedUnresolved{{NodeClass: "default", Fields: []string{"amiSelectorTerms"}, NodeClaims: []string{"a", "b"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ReadChanges([]byte(tt.edit))
			require.NoError(t, err)
			s, err := NewSession(objects(), Options{})
			require.NoError(t, err)
			a, err := s.Simulate(context.Background(), c)
			require.NoError(t, err)
			var drifted []string
			for _, d := range a.Drifted {
				drifted = append(drifted, d.NodeClaim+" "+d.Reason)
			}
			sort.Strings(drifted)
			assert.Equal(t, tt.drifted, drifted)
			assert.Equal(t, tt.unresolved, a.Unresolved)
		})
	}

	// A class the snapshot does not hold (not listed): its hash still
	// judges the NodeClaims, and every selector is unresolved.
	o := objects()
	o.EC2NodeClasses = nil
	s, err := NewSession(o, Options{})
	require.NoError(t, err)
	c, err := ReadChanges([]byte(fmt.Sprintf(classManifest, "  tags: {team: a}\n")))
	require.NoError(t, err)
	a, err := s.Simulate(context.Background(), c)
	require.NoError(t, err)
	assert.Len(t, a.Drifted, 2)
	require.Len(t, a.Unresolved, 1)
	assert.Len(t, a.Unresolved[0].Fields, 4)
	assert.Empty(t, a.Unresolved[0].NodeClaims, "both already drift statically")
}
