package log

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestConfig(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		cfg     Config
		level   zapcore.Level
		wantErr string
	}{
		{name: "ZeroValueIsInfoJSON", cfg: Config{}, level: zapcore.InfoLevel},
		{name: "AcceptsConsoleDebug", cfg: Config{Level: "debug", Format: "console"}, level: zapcore.DebugLevel},
		{name: "LevelIsCaseInsensitive", cfg: Config{Level: "WARN"}, level: zapcore.WarnLevel},
		{name: "RejectsUnknownLevel", cfg: Config{Level: "loud"}, wantErr: `invalid level "loud"`},
		{name: "RejectsUnknownFormat", cfg: Config{Format: "xml"}, wantErr: `invalid format "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logger, err := NewLogger(tt.cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, tt.cfg.Validate(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, tt.cfg.Validate())
			require.True(t, logger.Core().Enabled(tt.level))
			require.False(t, logger.Core().Enabled(tt.level-1))
		})
	}
}

func TestTestAndNopLoggers(t *testing.T) {
	t.Parallel()

	NewTestLogger(t).Debug("visible with -v")
	require.False(t, NewNop().Core().Enabled(zapcore.FatalLevel))
}

func TestFormat(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		format   string
		terminal bool
		want     string
	}{
		{"", true, FormatPretty},
		{"", false, FormatJSON},
		{"json", true, FormatJSON},
		{"pretty", false, FormatPretty},
		{"console", false, FormatPretty},
		{"PRETTY", false, FormatPretty},
	} {
		_, got, err := Config{Format: tt.format}.resolve(tt.terminal)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "format %q on a terminal: %v", tt.format, tt.terminal)
	}

	var buf bytes.Buffer
	logger, err := newLogger(Config{Format: "pretty"}, zapcore.AddSync(&buf), false)
	require.NoError(t, err)
	logger.Info("vigil is serving", zap.String("frontend", "127.0.0.1:7233"))
	require.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}\tINFO\t\S+\tvigil is serving\t\{"frontend": "127.0.0.1:7233"\}\n$`, buf.String())

	buf.Reset()
	logger, err = newLogger(Config{}, zapcore.AddSync(&buf), false)
	require.NoError(t, err)
	logger.Info("vigil is serving", zap.String("frontend", "127.0.0.1:7233"))
	require.Contains(t, buf.String(), `"msg":"vigil is serving","frontend":"127.0.0.1:7233"}`)
}
