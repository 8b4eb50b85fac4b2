package disruption

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNextPass(t *testing.T) {
	c := &Controller{opts: Options{PollPeriod: 10 * time.Second}}
	for _, tt := range []struct {
		name string
		r    passResult
		err  error
		want time.Duration
	}{
		{"nothing to do: the poll period", passResult{}, nil, 10 * time.Second},
		{"a command started: at once", passResult{started: true}, nil, 0},
		{"a command abandoned by validation: at once", passResult{abandoned: true}, nil, 0},
		{"cluster state not synced: a second", passResult{}, errNotSynced, time.Second},
		{"an error: the poll period, even after a start", passResult{started: true}, errors.New("boom"), 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, c.nextPass(tt.r, tt.err))
		})
	}
}
