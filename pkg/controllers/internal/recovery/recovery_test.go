package recovery_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/controllers/internal/recovery"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
)

func TestDo(t *testing.T) {
	logs := &testutil.Logs{}
	ctx := logs.Context(context.Background())

	ran := false
	require.NoError(t, recovery.Do(ctx, "quiet", func() { ran = true }))
	require.True(t, ran)
	require.Empty(t, logs.Matching("Observed a panic"))

	err := recovery.Do(ctx, "garbage collection", func() { panic("boom") })
	var perr *recovery.PanicError
	require.True(t, errors.As(err, &perr))
	require.Equal(t, "boom", perr.Value)
	require.Equal(t, "panic in garbage collection: boom", err.Error())
	require.Contains(t, perr.Stack, "recovery_test.go", "the stack points at the panicking code")

	lines := logs.Matching("Observed a panic")
	require.Len(t, lines, 1)
	require.True(t, strings.Contains(lines[0], `"stacktrace"`) && strings.Contains(lines[0], `"panic":"boom"`), lines[0])
}
