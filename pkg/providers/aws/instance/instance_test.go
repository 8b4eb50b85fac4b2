package instance_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

func TestParseProviderID(t *testing.T) {
	cases := []struct {
		in, zone, want string
		ok             bool
	}{
		{"aws:///us-east-1a/i-0123456789abcdef0", "us-east-1a", "i-0123456789abcdef0", true},
		{"aws:///us-west-2b/i-1", "us-west-2b", "i-1", true},
		{"kwok://node-1", "", "", false},
		{"aws:///us-east-1a", "", "", false},
		{"aws:///us-east-1a/vol-1", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range cases {
		got, err := instance.ParseProviderID(tc.in)
		if !tc.ok {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
		assert.Equal(t, tc.in, (&instance.Instance{ID: got, Zone: tc.zone}).ProviderID(), "round trip")
	}
}

func TestTagsKarpenterTagsWinOverTheClass(t *testing.T) {
	tags := instance.Tags("prod", "default", "nc-1", "class-a", map[string]string{
		"team":                       "ml",
		"karpenter.sh/nodepool":      "spoofed",
		"kubernetes.io/cluster/prod": "shared",
	})
	assert.Equal(t, map[string]string{
		"team":                           "ml",
		"karpenter.sh/nodepool":          "default",
		"karpenter.sh/nodeclaim":         "nc-1",
		"karpenter.k8s.aws/ec2nodeclass": "class-a",
		"eks:eks-cluster-name":           "prod",
		"kubernetes.io/cluster/prod":     "owned",
	}, tags)
	// Launch templates carry no NodeClaim tag (they are shared).
	assert.NotContains(t, instance.Tags("prod", "default", "", "class-a", nil), "karpenter.sh/nodeclaim")
}

func TestCapOverridesKeepsTheCheapestTypes(t *testing.T) {
	var a, b instance.LaunchConfig
	a.LaunchTemplateName, b.LaunchTemplateName = "a", "b"
	for i := 0; i < 50; i++ {
		// Two zones per type; the type's price is its cheapest override.
		a.Overrides = append(a.Overrides,
			instance.Override{InstanceType: fmt.Sprintf("a%02d", i), Zone: "z1", SubnetID: "s1", Price: float64(100 + i)},
			instance.Override{InstanceType: fmt.Sprintf("a%02d", i), Zone: "z2", SubnetID: "s2", Price: float64(2 * i)})
		b.Overrides = append(b.Overrides, instance.Override{InstanceType: fmt.Sprintf("b%02d", i), Zone: "z1", SubnetID: "s1", Price: float64(2*i + 1)})
	}
	got := instance.CapOverrides([]instance.LaunchConfig{a, b}, 60)
	types := map[string]bool{}
	overrides := 0
	for _, c := range got {
		for _, o := range c.Overrides {
			types[o.InstanceType] = true
			overrides++
		}
	}
	assert.Len(t, types, 60)
	// Prices 0..59 are a00..a29 (even) and b00..b29 (odd).
	for i := 0; i < 30; i++ {
		assert.True(t, types[fmt.Sprintf("a%02d", i)], "a%02d", i)
		assert.True(t, types[fmt.Sprintf("b%02d", i)], "b%02d", i)
	}
	assert.Equal(t, 30*2+30, overrides, "a kept type keeps all its zones")

	onlyB := instance.CapOverrides([]instance.LaunchConfig{a, b}, 0)
	assert.Empty(t, onlyB, "configs left without overrides are dropped")
}
