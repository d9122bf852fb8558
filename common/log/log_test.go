package log

import (
	"testing"

	"github.com/stretchr/testify/require"
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
