package metrics

import (
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestDefinitionsRecordUnderDeclaredNameAndTags(t *testing.T) {
	t.Parallel()

	t.Run("Counter", func(t *testing.T) {
		t.Parallel()
		scope := tally.NewTestScope("", nil)
		RPCErrors.With(scope, OperationTag("RecordWorkerHeartbeat"), CodeTag("Unavailable")).Inc(2)

		c, ok := scope.Snapshot().Counters()["rpc_errors+code=Unavailable,operation=RecordWorkerHeartbeat"]
		require.True(t, ok, "counters: %v", scope.Snapshot().Counters())
		require.Equal(t, "rpc_errors", c.Name())
		require.Equal(t, map[string]string{"operation": "RecordWorkerHeartbeat", "code": "Unavailable"}, c.Tags())
		require.EqualValues(t, 2, c.Value())
	})

	t.Run("CounterWithoutTags", func(t *testing.T) {
		t.Parallel()
		scope := tally.NewTestScope("", nil)
		WorkerHeartbeats.With(scope).Inc(1)

		c := scope.Snapshot().Counters()["worker_heartbeats+"]
		require.NotNil(t, c)
		require.EqualValues(t, 1, c.Value())
	})

	t.Run("Gauge", func(t *testing.T) {
		t.Parallel()
		scope := tally.NewTestScope("", nil)
		WorkersByState.With(scope, StateTag("ACTIVE")).Update(7)

		g := scope.Snapshot().Gauges()["workers_by_state+state=ACTIVE"]
		require.NotNil(t, g)
		require.InDelta(t, 7, g.Value(), 0)
	})

	t.Run("Timer", func(t *testing.T) {
		t.Parallel()
		scope := tally.NewTestScope("", nil)
		TimerTaskLag.With(scope, TaskTypeTag("LeaseExpiryTask")).Record(40 * time.Millisecond)

		tm := scope.Snapshot().Timers()["timer_task_lag+task_type=LeaseExpiryTask"]
		require.NotNil(t, tm)
		require.Equal(t, []time.Duration{40 * time.Millisecond}, tm.Values())
	})

	t.Run("ValueHistogram", func(t *testing.T) {
		t.Parallel()
		scope := tally.NewTestScope("", nil)
		GroupCommitBatchSize.With(scope).RecordValue(3)

		h := scope.Snapshot().Histograms()["group_commit_batch_size+"]
		require.NotNil(t, h)
		require.EqualValues(t, 1, h.Values()[4], "3 falls in the (2,4] bucket")
	})

	t.Run("ShardTagFormatsNumber", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, Tag{Key: "shard", Value: "12"}, ShardTag(12))
	})
}

func TestDefinitionsAreUniqueAndUseKnownTags(t *testing.T) {
	t.Parallel()

	known := []string{TagNamespace, TagOperation, TagTaskType, TagState, TagKind, TagShard, TagCode, TagQueue, TagReason, TagOutcome}
	seen := map[string]bool{}
	for _, d := range All {
		require.False(t, seen[d.Name()], "duplicate metric name %q", d.Name())
		seen[d.Name()] = true
		for _, tag := range d.Tags() {
			require.True(t, slices.Contains(known, tag), "metric %q uses undeclared tag %q", d.Name(), tag)
		}
	}
}

func TestPrometheusScopeServesMetrics(t *testing.T) {
	t.Parallel()

	scope, handler, closer := NewPrometheusScope("vigil", WithReportInterval(time.Hour))
	RPCRequests.With(scope, OperationTag("ShutdownWorker")).Inc(3)
	RPCLatency.With(scope, OperationTag("ShutdownWorker")).Record(5 * time.Millisecond)
	// Closing flushes the last report into the collectors.
	require.NoError(t, closer.Close())

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `vigil_rpc_requests{operation="ShutdownWorker"} 3`)
	require.Contains(t, string(body), `vigil_rpc_latency_bucket{operation="ShutdownWorker",le="0.008"} 1`)
	require.Contains(t, string(body), "go_goroutines")
}

func TestPrometheusScopesDoNotCollide(t *testing.T) {
	t.Parallel()

	for range 2 {
		scope, _, closer := NewPrometheusScope("vigil")
		WorkerHeartbeats.With(scope).Inc(1)
		require.NoError(t, closer.Close())
	}
}

func TestNoopScopeAcceptsEverything(t *testing.T) {
	t.Parallel()

	WorkerHeartbeats.With(NoopScope).Inc(1)
	GroupCommitLatency.With(NoopScope).Record(time.Millisecond)
}

// TestEveryDefinitionIsExportedOnce records every declared metric, with every declared tag, on
// one Prometheus scope, as a server does, and reads /metrics back: each name is exported once,
// and the reporter never refuses one (it does when a name comes with two label sets).
func TestEveryDefinitionIsExportedOnce(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zap.ErrorLevel)
	scope, handler, closer := NewPrometheusScope("vigil", WithReportInterval(time.Hour), WithLogger(zap.New(core)))
	for _, d := range All {
		tags := make([]Tag, 0, len(d.Tags()))
		for _, k := range d.Tags() {
			tags = append(tags, Tag{Key: k, Value: "x"})
		}
		switch d := d.(type) {
		case CounterDef:
			d.With(scope, tags...).Inc(1)
		case GaugeDef:
			d.With(scope, tags...).Update(1)
		case TimerDef:
			d.With(scope, tags...).Record(time.Millisecond)
		case HistogramDef:
			d.With(scope, tags...).RecordValue(1)
		default:
			t.Fatalf("metric %q has an unknown definition type %T", d.Name(), d)
		}
	}
	require.NoError(t, closer.Close())
	require.Zero(t, logs.Len(), "the reporter refused metrics: %v", logs.All())

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	for _, d := range All {
		require.Equal(t, 1, strings.Count(string(body), "# TYPE vigil_"+d.Name()+" "),
			"metric %q is not exported exactly once", d.Name())
	}
}
