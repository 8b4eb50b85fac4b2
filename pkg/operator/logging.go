package operator

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/karpenter-go/karpenter/pkg/operator/options"
)

// NewLogger builds the JSON logger upstream's log lines are shaped like:
// level, time, logger, message, then the commit and the caller's key/values.
// logr's V(1) maps to zap's debug level.
func NewLogger(o *options.Options) (logr.Logger, error) {
	level, err := zapLevel(o.LogLevel)
	if err != nil {
		return logr.Discard(), err
	}
	cfg := zap.Config{
		Level:             zap.NewAtomicLevelAt(level),
		DisableCaller:     true,
		DisableStacktrace: true,
		Encoding:          "json",
		EncoderConfig: zapcore.EncoderConfig{
			MessageKey:     "message",
			LevelKey:       "level",
			TimeKey:        "time",
			NameKey:        "logger",
			StacktraceKey:  "stacktrace",
			LineEnding:     zapcore.DefaultLineEnding,
			EncodeLevel:    zapcore.CapitalLevelEncoder,
			EncodeTime:     utcMillis,
			EncodeDuration: zapcore.StringDurationEncoder,
			EncodeName:     zapcore.FullNameEncoder,
		},
		OutputPaths:      splitPaths(o.LogOutputPaths, "stdout"),
		ErrorOutputPaths: splitPaths(o.LogErrorOutputPaths, "stderr"),
		InitialFields:    map[string]any{"commit": Commit},
	}
	z, err := cfg.Build()
	if err != nil {
		return logr.Discard(), fmt.Errorf("building logger: %w", err)
	}
	return zapr.NewLogger(z), nil
}

func zapLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "", "info":
		return zapcore.InfoLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want debug, info or error)", s)
}

// utcMillis writes times as 2024-06-22T02:24:16.114Z, as the seeds show.
func utcMillis(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
	enc.AppendString(t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

func splitPaths(s, def string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []string{def}
	}
	return out
}
