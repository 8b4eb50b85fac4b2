package disruption

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

// The planner's commands carry a Planner holding funcs; grouping two of
// them must not compare the values (that panics).
func TestByMethod(t *testing.T) {
	planner := repack.Planner{Drained: func([]string) {}}
	cmds := []*disruption.Command{{Method: disruption.Emptiness{}}, {Method: disruption.Emptiness{}}, {Method: planner}, {Method: planner}, {Method: planner}}
	groups := byMethod(cmds)
	if assert.Len(t, groups, 2) {
		assert.Len(t, groups[0].cmds, 2)
		assert.Len(t, groups[1].cmds, 3)
		assert.IsType(t, repack.Planner{}, groups[1].method)
	}
	assert.Empty(t, byMethod(nil))
}
