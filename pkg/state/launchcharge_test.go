package state_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
)

func instanceType(name, arch, cpu, mem string) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{
		Name:         name,
		Requirements: scheduling.NewRequirements(scheduling.NewRequirement(corev1.LabelArchStable, scheduling.OpIn, arch)),
		Capacity:     rl(cpu, mem),
	}
}

func unlaunched(name, pool string, requests corev1.ResourceList, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	nc := nodeClaim(name, pool, "")
	nc.UID = types.UID("uid-" + name)
	nc.Status = v1.NodeClaimStatus{}
	nc.Spec.Resources.Requests = requests
	nc.Spec.Requirements = append(nc.Spec.Requirements, reqs...)
	return nc
}

func instanceTypeIn(names ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: names}
}

// TestUnlaunchedChargesLargestCapacity: until it launches, a NodeClaim
// counts against its pool at the largest capacity among the instance types
// its requirements allow (as the solver charged it); once launched, at its
// real capacity.
func TestUnlaunchedChargesLargestCapacity(t *testing.T) {
	catalog := []*cloudprovider.InstanceType{
		instanceType("small", "amd64", "2", "8Gi"),
		instanceType("large", "amd64", "8", "16Gi"),
		instanceType("himem", "amd64", "4", "64Gi"),
		instanceType("arm-huge", "arm64", "64", "256Gi"), // arch excluded by the nodeclaim
	}
	var asked []string
	c := state.NewCluster(clocktesting.NewFakeClock(time.Now()), cp.Client, state.Options{
		InstanceTypes: func(pool string) []*cloudprovider.InstanceType {
			asked = append(asked, pool)
			return catalog
		},
	})
	tests := []struct {
		name     string
		nc       *v1.NodeClaim
		cpu, mem string
	}{
		{"max per resource over the allowed types", unlaunched("a", "default", rl("1", "1Gi"), instanceTypeIn("small", "large", "himem")), "8", "64Gi"},
		{"only the allowed types", unlaunched("b", "default", rl("1", "1Gi"), instanceTypeIn("small")), "2", "8Gi"},
		{"no instance-type requirement: any compatible type", unlaunched("c", "default", rl("1", "1Gi")), "8", "64Gi"},
		{"no known type: its requests", unlaunched("d", "default", rl("1", "1Gi"), instanceTypeIn("gone")), "1", "1Gi"},
		{"requests above every type still count", unlaunched("e", "default", rl("1", "100Gi"), instanceTypeIn("small")), "2", "100Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Reset()
			c.UpdateNodeClaim(tt.nc)
			u := c.NodePoolUsage("default")
			assert.Equal(t, 1, u.Nodes)
			assert.True(t, u.Resources.Cpu().Equal(resource.MustParse(tt.cpu)), "cpu %s", u.Resources.Cpu())
			assert.True(t, u.Resources.Memory().Equal(resource.MustParse(tt.mem)), "memory %s", u.Resources.Memory())
		})
	}

	// Launch: the real capacity replaces the charge.
	c.Reset()
	nc := unlaunched("f", "default", rl("1", "1Gi"), instanceTypeIn("small", "large"))
	c.UpdateNodeClaim(nc)
	assert.Equal(t, "8", func() string { r := c.NodePoolUsage("default").Resources; return r.Cpu().String() }())
	launched := nc.DeepCopy()
	launched.Status.ProviderID = "kwok://f"
	launched.Status.Capacity = rl("2", "8Gi")
	c.UpdateNodeClaim(launched)
	u := c.NodePoolUsage("default")
	assert.Equal(t, 1, u.Nodes)
	assert.Equal(t, "2", u.Resources.Cpu().String())
	assert.Contains(t, asked, "default")
}

// TestUnparsableRequirementsLogged: requirements that do not parse are
// reported once per NodeClaim generation, not on every round.
func TestUnparsableRequirementsLogged(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.NewJSON(func(obj string) { mu.Lock(); defer mu.Unlock(); lines = append(lines, obj) }, funcr.Options{})
	matching := func(msg string) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, l := range lines {
			if strings.Contains(l, `"msg":"`+msg+`"`) {
				out = append(out, l)
			}
		}
		return out
	}
	c := state.NewCluster(clocktesting.NewFakeClock(time.Now()), cp.Client, state.Options{Logger: logger})
	bad := unlaunched("bad", "default", rl("1", "1Gi"),
		v1.NodeSelectorRequirementWithMinValues{Key: "example.com/size", Operator: "Bogus", Values: []string{"x"}})
	bad.Generation = 1
	c.UpdateNodeClaim(bad)
	for range 3 {
		nodes := c.SchedulingNodes()
		require.Len(t, nodes, 1)
		assert.Nil(t, nodes[0].Requirements, "described by its labels alone")
	}
	got := matching("ignoring nodeclaim requirements")
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"bad"`)

	next := bad.DeepCopy()
	next.Generation = 2
	c.UpdateNodeClaim(next)
	c.SchedulingNodes()
	c.SchedulingNodes()
	assert.Len(t, matching("ignoring nodeclaim requirements"), 2, "a new generation is reported again")
}
