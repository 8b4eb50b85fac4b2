package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		{name: "nothing to simulate", yaml: "---\n", err: "no NodePool or Deployment"},
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
