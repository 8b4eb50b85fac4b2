// Package capacity compares a Node with what the cloud provider promised for
// its NodeClaim. The consistency controller reports what it finds, and the
// lifecycle takes the first look in the write that initializes a NodeClaim,
// so both judge a Node by the same rule.
package capacity

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// MinShare is the fraction of the promised capacity a Node must have
// (upstream's consistency check: a shortfall above 10% fails it).
const MinShare = 0.90

// Shortfalls returns one message per requested resource whose Node capacity
// is below MinShare of the NodeClaim's, sorted by resource name; none when
// the Node is as promised.
func Shortfalls(nc *v1.NodeClaim, node *corev1.Node) []string {
	names := make([]string, 0, len(nc.Spec.Resources.Requests))
	for name := range nc.Spec.Resources.Requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		name := corev1.ResourceName(n)
		expected, ok := nc.Status.Capacity[name]
		if !ok || expected.IsZero() {
			continue
		}
		actual := node.Status.Capacity[name]
		share := actual.AsApproximateFloat64() / expected.AsApproximateFloat64()
		if share < MinShare {
			out = append(out, fmt.Sprintf("expected %s of resource %s, but found %s (%0.1f%% of expected)",
				expected.String(), name, actual.String(), share*100))
		}
	}
	return out
}
