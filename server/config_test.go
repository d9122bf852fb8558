package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
)

func TestSampleConfigsParse(t *testing.T) {
	cfg, err := LoadConfig("../config/server.yaml")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7233", cfg.Frontend.Address)
	require.EqualValues(t, 16, cfg.History.NumShards)
	require.Equal(t, "staging", cfg.Namespaces[0].Name)

	file, err := dynamicconfig.NewFileClient(dynamicconfig.FileClientConfig{Filepath: "../config/dynamicconfig.yaml"},
		zap.NewNop(), clock.NewRealTimeSource())
	require.NoError(t, err)
	delay := dynamicconfig.InactiveWorkerCleanupDelay.Get(dynamicconfig.NewCollection(file, zap.NewNop()))
	require.Equal(t, 5*time.Minute, delay("staging"))
	require.Equal(t, 60*time.Minute, delay("default"))
}

func TestLoadConfigRefusesUnknownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte("frontend:\n  adress: 127.0.0.1:1\n"), 0o600))
	_, err := LoadConfig(path)
	require.ErrorContains(t, err, "adress")
}

func TestDefaults(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	cfg := Config{}.withDefaults()
	require.Equal(t, "127.0.0.1:7233", cfg.Frontend.Address)
	require.Equal(t, "127.0.0.1:7243", cfg.Frontend.HTTPAddress)
	require.Equal(t, "/data/vigil/vigil.db", cfg.Persistence.SQLite.Path)
}

func TestConfigMetricsAndLogFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
log: {format: pretty}
metrics:
  otlp: {endpoint: "127.0.0.1:4317", protocol: http, insecure: true, interval: 15s, headers: {api-key: k}}
`), 0o600))
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	require.Equal(t, "pretty", cfg.Log.Format)
	require.NoError(t, cfg.Log.Validate())
	require.Equal(t, metrics.OTLPConfig{Endpoint: "127.0.0.1:4317", Protocol: "http", Insecure: true,
		Interval: 15 * time.Second, Headers: map[string]string{"api-key": "k"}}, cfg.Metrics.OTLP)

	cfg.Metrics.OTLP.Protocol = "smoke-signals"
	cfg.Persistence.SQLite.Path = filepath.Join(t.TempDir(), "vigil.db")
	_, err = New(cfg)
	require.ErrorContains(t, err, `metrics.otlp.protocol "smoke-signals"`)
}
