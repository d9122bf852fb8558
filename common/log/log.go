// Package log builds the zap loggers used across vigil.
//
// Loggers are *zap.Logger values passed in explicitly (never a global); fields come from the
// typed constructors in package tag so that the same fact always carries the same key.
package log

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// Output formats accepted by Config.Format.
const (
	// FormatJSON is one JSON object per line, for log collectors.
	FormatJSON = "json"
	// FormatPretty is zap's console encoder: time, level, message, then the fields as JSON;
	// levels are coloured on a terminal.
	FormatPretty = "pretty"
	// FormatConsole is another name of FormatPretty.
	FormatConsole = "console"
)

// LevelDefault is the level when Config.Level is empty. The format, when Config.Format is
// empty, is pretty when stderr is a terminal and JSON otherwise.
const LevelDefault = "info"

// Config is the static logging configuration. The zero value logs at info level, pretty on a
// terminal and JSON otherwise.
type Config struct {
	// Level is one of debug, info, warn, error, dpanic, panic, fatal (case-insensitive).
	Level string `yaml:"level"`
	// Format is "json" or "console" ("pretty" is another name of console).
	Format string `yaml:"format"`
}

// Validate reports whether the configuration names a known level and format.
func (c Config) Validate() error {
	_, _, err := c.resolve(false)
	return err
}

func (c Config) resolve(terminal bool) (zapcore.Level, string, error) {
	levelName := strings.ToLower(strings.TrimSpace(c.Level))
	if levelName == "" {
		levelName = LevelDefault
	}
	level, err := zapcore.ParseLevel(levelName)
	if err != nil {
		return 0, "", fmt.Errorf("log: invalid level %q: %w", c.Level, err)
	}
	format := strings.ToLower(strings.TrimSpace(c.Format))
	switch format {
	case "":
		format = FormatJSON
		if terminal {
			format = FormatPretty
		}
	case FormatJSON:
	case FormatPretty, FormatConsole:
		format = FormatPretty
	default:
		return 0, "", fmt.Errorf("log: invalid format %q: want %q or %q", c.Format, FormatJSON, FormatConsole)
	}
	return level, format, nil
}

// isTerminal reports whether f is a character device (a terminal), not a file or a pipe.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewLogger returns a logger writing to stderr at the configured level and format.
func NewLogger(cfg Config) (*zap.Logger, error) {
	return newLogger(cfg, zapcore.Lock(os.Stderr), isTerminal(os.Stderr))
}

func newLogger(cfg Config, out zapcore.WriteSyncer, terminal bool) (*zap.Logger, error) {
	level, format, err := cfg.resolve(terminal)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	encoder := zapcore.NewJSONEncoder(enc)
	// Stacks on errors, as zap's production config; sampling off: vigil's hot paths log
	// sparingly instead, and a dropped lease-expiry line is worse than a noisy one.
	stackLevel := zapcore.ErrorLevel
	if format == FormatPretty {
		enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		if terminal {
			enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		encoder = zapcore.NewConsoleEncoder(enc)
		stackLevel = zapcore.DPanicLevel // a stack under every error buries the message on a terminal
	}
	core := zapcore.NewCore(encoder, out, zap.NewAtomicLevelAt(level))
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(stackLevel), zap.ErrorOutput(zapcore.Lock(os.Stderr))), nil
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
