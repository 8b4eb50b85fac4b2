package instance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

// TestGroupRefused sorts the fleet errors that are the placement group's
// refusal of a zone from those that are the offering's.
func TestGroupRefused(t *testing.T) {
	spread := instance.Request{PlacementGroupID: "pg-1", PlacementGroupStrategy: "spread"}
	cluster := instance.Request{PlacementGroupID: "pg-1", PlacementGroupStrategy: "cluster"}
	partition := instance.Request{PlacementGroupID: "pg-1", PlacementGroupStrategy: "partition"}
	const limit = "The spread placement group 'web' already has the maximum of 7 running instances in the Availability Zone (us-east-1a)."
	const ice = "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a)."
	for _, tc := range []struct {
		name          string
		req           instance.Request
		code, message string
		want          bool
	}{
		{"spread limit", spread, "InsufficientInstanceCapacity", limit, true},
		{"spread, plain capacity", spread, "InsufficientInstanceCapacity", ice, false},
		{"cluster in another zone", cluster, "InvalidPlacementGroup.InUse", "The placement group 'hpc' is in use in another availability zone: us-east-1b", true},
		{"cluster, plain capacity", cluster, "InsufficientInstanceCapacity", ice, false},
		{"partition, placement group named", partition, "InsufficientInstanceCapacity", limit, false},
		{"no group", instance.Request{}, "InvalidPlacementGroup.InUse", "in use", false},
		{"spread, other code", spread, "Unsupported", limit, false},
	} {
		assert.Equal(t, tc.want, instance.GroupRefused(tc.req, tc.code, tc.message), tc.name)
	}
}
