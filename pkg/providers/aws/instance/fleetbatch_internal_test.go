package instance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

func TestAssignOwners(t *testing.T) {
	members := instance.MemberTags("b1", []string{"a", "b", "c", "d"})
	inst := func(id, state, claimedBy string) *instance.Instance {
		tags := map[string]string{}
		for k, v := range members {
			tags[k] = v
		}
		if claimedBy != "" {
			tags["karpenter.sh/nodeclaim"] = claimedBy
		}
		return &instance.Instance{ID: id, Tags: tags, Unclaimed: state == "unclaimed", BatchID: "b1"}
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
		{"the first value holds the batch id and 17 names of 13", 17, 13, 1},
		{"18 spill into a second tag", 18, 13, 2},
		{"long names: three of 63 beside the id, four to a tag after", 10, 63, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for i := 0; i < tc.names; i++ {
				n := fmt.Sprintf("np-%d-", i)
				names = append(names, n+strings.Repeat("x", tc.nameLen-len(n)))
			}
			tags := instance.MemberTags("0123456789abcdef", names)
			assert.Len(t, tags, tc.wantTags)
			for k, v := range tags {
				assert.LessOrEqual(t, len(v), 256, k)
			}
			assert.Equal(t, names, instance.Members(tags))
			assert.Equal(t, "0123456789abcdef", instance.BatchID(tags))
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
		{"one tag of room splits every 17 (the batch id takes the 18th place)", 40, 1, []int{17, 17, 6}},
		{"two tags of room", 40, 2, []int{35, 5}},
		{"no room: every launch alone", 3, 0, []int{1, 1, 1}},
		{"plenty of room", 1000, 56, []int{1000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := instance.ChunkByTagBudget(names(tc.n), tc.budget)
			assert.Equal(t, tc.want, got)
			// What memberTags makes of each chunk fits the budget.
			start := 0
			for _, n := range got {
				if n > 1 {
					assert.LessOrEqual(t, len(instance.MemberTags("0123456789abcdef", names(tc.n)[start:start+n])), tc.budget)
				}
				start += n
			}
		})
	}
}

// TestTagBudgetBoundary: a batch whose shared tags leave exactly room for
// the member tags, the claim and Name ends at exactly 50 tags once all are
// written; one more shared tag and no member tag fits (the batch is then
// listed in the karpenter.sh/nodeclaim value, TestChunkInValue).
func TestTagBudgetBoundary(t *testing.T) {
	for _, tc := range []struct {
		shared    int
		wantBatch bool
	}{
		{47, true},  // 47 shared + 1 member tag + nodeclaim + Name = 50
		{48, false}, // no room for a member tag
	} {
		shared := map[string]string{}
		for i := 0; i < tc.shared; i++ {
			shared[fmt.Sprintf("k%02d", i)] = "v"
		}
		budget := instance.MaxTagsPerResource - len(shared) - instance.LaterTags(shared)
		got := instance.ChunkByTagBudget([]string{"default-00001", "default-00002"}, budget)
		if !tc.wantBatch {
			assert.Equal(t, []int{1, 1}, got, "%d shared tags", tc.shared)
			continue
		}
		require.Equal(t, []int{2}, got, "%d shared tags", tc.shared)
		members := instance.MemberTags("0123456789abcdef", []string{"default-00001", "default-00002"})
		assert.Equal(t, 50, len(shared)+len(members)+instance.LaterTags(shared), "every tag written later fits, exactly")
	}
	withName := map[string]string{"Name": "mine"}
	assert.Equal(t, 1, instance.LaterTags(withName), "a class's own Name leaves room for one more member tag")
}

// TestChunkInValue: a batch listed in the karpenter.sh/nodeclaim value
// holds as many NodeClaims as the value's 256 characters take after the
// unclaimed mark and the batch id.
func TestChunkInValue(t *testing.T) {
	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("default-%05d", i) // 13 characters
	}
	got := instance.ChunkInValue(names)
	// "karpenter-go.io:unclaimed:" and 16 of id take 42; 14 a name: 15.
	assert.Equal(t, []int{15, 15, 10}, got)
	start := 0
	for _, n := range got {
		v := instance.UnclaimedValueOf("0123456789abcdef", names[start:start+n])
		assert.LessOrEqual(t, len(v), 256)
		assert.Equal(t, names[start:start+n], instance.BatchOrder(map[string]string{"karpenter.sh/nodeclaim": v}), "read back in order")
		start += n
	}
	assert.Equal(t, []int{1}, instance.ChunkInValue([]string{strings.Repeat("x", 253)}), "a name too long for the value still launches")
}
