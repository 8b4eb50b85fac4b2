package ssminvalidation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/ssminvalidation"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

type params struct {
	forgotten []string
	err       error
	panics    bool
}

func (p params) InvalidateDeprecated(context.Context) ([]string, error) {
	if p.panics {
		panic("bad answer")
	}
	return p.forgotten, p.err
}

type classes struct{ resyncs int }

func (c *classes) Resync(context.Context) error { c.resyncs++; return nil }

// The amifamily side is tested against the local AWS (amifamily
// TestInvalidateDeprecated) and the whole loop end to end (e2e TestAWSDrift);
// this checks the controller's own decisions.
func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		params  params
		resyncs int
		err     string
	}{
		{"nothing forgotten: classes keep their requeue", params{}, 0, ""},
		{"a parameter forgotten: every class is reconciled", params{forgotten: []string{"/aws/service/x"}}, 1, ""},
		{"an error is returned, no resync", params{err: errors.New("throttled")}, 0, "throttled"},
		{"a panic is returned as an error by the loop", params{panics: true}, 0, "panic: bad answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := &classes{}
			// Through periodic.Safe, as the loop runs it.
			err := periodic.Safe(context.Background(), ssminvalidation.New(tt.params, cl, 0, logr.Discard()).Check)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.resyncs, cl.resyncs)
		})
	}
}
