package strategies_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/disruption/strategies"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		algorithm    string
		types        []string
		readsPending bool
	}{
		{"", []string{"multi", "single"}, false},
		{strategies.Upstream, []string{"multi", "single"}, false},
		{strategies.Planner, []string{"repack"}, true},
	} {
		s, err := strategies.New(strategies.Options{Algorithm: tc.algorithm})
		require.NoError(t, err, tc.algorithm)
		var types []string
		for _, m := range s.Methods() {
			types = append(types, m.ConsolidationType())
		}
		assert.Equal(t, tc.types, types, tc.algorithm)
		assert.Equal(t, tc.readsPending, s.ReadsPending(), tc.algorithm)
	}
	_, err := strategies.New(strategies.Options{Algorithm: "greedy"})
	assert.ErrorContains(t, err, `unknown consolidation algorithm "greedy"`)
}
