// Package log builds the zap loggers used across vigil.
//
// Loggers are *zap.Logger values passed in explicitly (never a global); fields come from the
// typed constructors in package tag so that the same fact always carries the same key.
package log

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// Output formats accepted by Config.Format.
const (
	FormatJSON    = "json"
	FormatConsole = "console"
)

// Defaults used when a Config field is empty.
const (
	LevelDefault  = "info"
	FormatDefault = FormatJSON
)

// Config is the static logging configuration. The zero value logs at info level as JSON.
type Config struct {
	// Level is one of debug, info, warn, error, dpanic, panic, fatal (case-insensitive).
	Level string `yaml:"level"`
	// Format is "json" or "console".
	Format string `yaml:"format"`
}

// Validate reports whether the configuration names a known level and format.
func (c Config) Validate() error {
	_, _, err := c.resolve()
	return err
}

func (c Config) resolve() (zapcore.Level, string, error) {
	levelName := strings.ToLower(strings.TrimSpace(c.Level))
	if levelName == "" {
		levelName = LevelDefault
	}
	level, err := zapcore.ParseLevel(levelName)
	if err != nil {
		return 0, "", fmt.Errorf("log: invalid level %q: %w", c.Level, err)
	}
	format := strings.ToLower(strings.TrimSpace(c.Format))
	if format == "" {
		format = FormatDefault
	}
	if format != FormatJSON && format != FormatConsole {
		return 0, "", fmt.Errorf("log: invalid format %q: want %q or %q", c.Format, FormatJSON, FormatConsole)
	}
	return level, format, nil
}

// NewLogger returns a logger writing to stderr at the configured level and format.
func NewLogger(cfg Config) (*zap.Logger, error) {
	level, format, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = zap.NewAtomicLevelAt(level)
	zcfg.Encoding = format
	zcfg.EncoderConfig.TimeKey = "ts"
	zcfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	// Sampling drops repeated lines under load; vigil's hot paths log sparingly instead, and a
	// dropped lease-expiry line is worse than a noisy one.
	zcfg.Sampling = nil
	if format == FormatConsole {
		zcfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	return zcfg.Build()
}

// NewTestLogger returns a debug-level logger that writes through t.Log, so output shows up only
// for failing (or -v) tests and is attributed to the right test.
func NewTestLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zapcore.DebugLevel))
}

// NewNop returns a logger that discards everything.
func NewNop() *zap.Logger {
	return zap.NewNop()
}
