package server

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
)

var (
	typeLine = regexp.MustCompile(`(?m)^# TYPE (vigil_\w+) (\w+)$`)
	helpLine = regexp.MustCompile(`(?m)^# HELP (vigil_\w+) (.*)$`)
)

// TestMetricsEndpointMatchesTheDeclarations starts a server and scrapes /metrics: every vigil_
// metric it exports is declared, with the declared type and help, and every declared metric
// whose labels are a fixed set is there from the start, before anything happened.
func TestMetricsEndpointMatchesTheDeclarations(t *testing.T) {
	var cfg Config
	cfg.Frontend.Address = "127.0.0.1:0"
	cfg.Frontend.HTTPAddress = "127.0.0.1:0"
	cfg.History.NumShards = 2
	cfg.Persistence.SQLite.Path = filepath.Join(t.TempDir(), "vigil.db")
	srv, err := New(cfg,
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))),
		WithDynamicConfigClient(dynamicconfig.NewMemoryClient()))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	defer func() { require.NoError(t, srv.Stop(ctx)) }()

	resp, err := http.Get("http://" + srv.HTTPAddress() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	body := string(raw)

	declared := map[string]metrics.Definition{}
	for _, d := range metrics.Declared() {
		declared[d.ExportedName()] = d
	}
	promType := map[metrics.Type]string{metrics.TypeCounter: "counter", metrics.TypeGauge: "gauge",
		metrics.TypeTimer: "histogram", metrics.TypeHistogram: "histogram"}
	exported := map[string]bool{}
	for _, m := range typeLine.FindAllStringSubmatch(body, -1) {
		d, ok := declared[m[1]]
		require.True(t, ok, "%s is exported but not declared", m[1])
		require.Equal(t, promType[d.Type()], m[2], m[1])
		exported[m[1]] = true
	}
	for _, m := range helpLine.FindAllStringSubmatch(body, -1) {
		require.Equal(t, declared[m[1]].Help(), m[2], m[1])
	}
	for name, d := range declared {
		fixed := true
		for _, k := range d.Tags() {
			fixed = fixed && len(d.Values(k)) > 0
		}
		if fixed {
			require.True(t, exported[name], "%s is declared with fixed labels but not exported at start", name)
		}
	}
	require.Contains(t, body, "vigil_worker_heartbeats_total 0\n")
	require.Contains(t, body, `vigil_workers_by_state{state="ACTIVE"} 0`)
	require.NotContains(t, body, "vigil_worker_worker_")
	require.NotContains(t, body, "vigil_persistence_group_commit")
	require.False(t, strings.Contains(body, "vigil_matching_matching_"))

	// The build's identity, as 1 once tally has reported it (every report interval).
	buildInfo := regexp.MustCompile(`(?m)^vigil_build_info\{build_date="[^"]+",commit="[^"]+",go_version="go[^"]+",version="[^"]+"\} 1$`)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + srv.HTTPAddress() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return err == nil && buildInfo.Match(raw)
	}, 30*time.Second, 50*time.Millisecond, "vigil_build_info is exported with the build's labels")
}
