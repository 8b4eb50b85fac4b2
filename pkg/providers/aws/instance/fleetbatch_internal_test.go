package instance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

func TestAssignOwners(t *testing.T) {
	members := instance.MemberTags([]string{"a", "b", "c", "d"})
	inst := func(id, state, claimedBy string) *instance.Instance {
		tags := map[string]string{instance.TagLaunchBatch: "b1", instance.TagLaunchState: state}
		for k, v := range members {
			tags[k] = v
		}
		if claimedBy != "" {
			tags["karpenter.sh/nodeclaim"] = claimedBy
		}
		return &instance.Instance{ID: id, Tags: tags}
	}
	cases := []struct {
		name  string
		insts []*instance.Instance
		want  map[string]string
	}{
		{"nothing claimed: members in order take instances in id order",
			[]*instance.Instance{inst("i-3", "unclaimed", ""), inst("i-1", "unclaimed", ""), inst("i-2", "unclaimed", ""), inst("i-4", "unclaimed", "")},
			map[string]string{"i-1": "a", "i-2": "b", "i-3": "c", "i-4": "d"}},
		{"claimed pairs drop out and the rest keep their live pairing",
			[]*instance.Instance{inst("i-1", "claimed", "a"), inst("i-2", "unclaimed", ""), inst("i-3", "claimed", "c"), inst("i-4", "unclaimed", "")},
			map[string]string{"i-2": "b", "i-4": "d"}},
		{"partial fulfilment: the first members own the instances",
			[]*instance.Instance{inst("i-7", "unclaimed", ""), inst("i-5", "unclaimed", "")},
			map[string]string{"i-5": "a", "i-7": "b"}},
		{"everything claimed", []*instance.Instance{inst("i-1", "claimed", "a")}, map[string]string{}},
		{"no instances", nil, map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, instance.AssignOwners(tc.insts))
		})
	}
}

func TestMemberTagsRoundTrip(t *testing.T) {
	cases := []struct {
		name     string
		names    int
		nameLen  int
		wantTags int
	}{
		{"one", 1, 13, 1},
		{"a value holds 18 names of 13", 18, 13, 1},
		{"19 spill into a second tag", 19, 13, 2},
		{"long names: four of 63 to a tag", 10, 63, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for i := 0; i < tc.names; i++ {
				n := fmt.Sprintf("np-%d-", i)
				names = append(names, n+strings.Repeat("x", tc.nameLen-len(n)))
			}
			tags := instance.MemberTags(names)
			assert.Len(t, tags, tc.wantTags)
			for k, v := range tags {
				assert.LessOrEqual(t, len(v), 256, k)
			}
			assert.Equal(t, names, instance.Members(tags))
		})
	}
}

func TestChunkByTagBudget(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("default-%05d", i) // 13 characters: 18 to a tag
		}
		return out
	}
	cases := []struct {
		name   string
		n      int
		budget int
		want   []int
	}{
		{"all fit in one tag", 10, 1, []int{10}},
		{"one tag of room splits every 18", 40, 1, []int{18, 18, 4}},
		{"two tags of room", 40, 2, []int{36, 4}},
		{"no room: every launch alone", 3, 0, []int{1, 1, 1}},
		{"plenty of room", 1000, 56, []int{1000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, instance.ChunkByTagBudget(names(tc.n), tc.budget))
		})
	}
}
