package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
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
		TimerTaskLag.With(scope, Tag{Key: TagQueue, Value: "timer"}).Record(40 * time.Millisecond)

		tm := scope.Snapshot().Timers()["timer_task_lag+queue=timer"]
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

func TestDeclarationsRefuseMistakes(t *testing.T) {
	t.Parallel()

	for name, declare := range map[string]func(){
		"TagKeyWhereHelpGoes": func() { NewCounterDef("test_tag_as_help", TagOperation) },
		"NoHelp":              func() { NewGaugeDef("test_no_help", "") },
		"UnitSuffix":          func() { NewCounterDef("test_things_total", "Things that happened.") },
		"SecondsSuffix":       func() { NewTimerDef("test_wait_seconds", "Time things waited.") },
		"UnknownTag":          func() { NewCounterDef("test_unknown_tag", "Things that happened.", "worker_id") },
		"Duplicate":           func() { NewCounterDef(WorkerHeartbeats.Name(), "Heartbeats once more.") },
		// Not declared: a declaration that succeeds would stay in Declared() for the other tests.
		"ValuesOfUndeclared": func() { CounterDef{&def{name: "test_values"}}.WithValues(TagKind, "a") },
		"BadName":            func() { NewCounterDef("Test-Name", "Things that happened.") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Panics(t, declare)
		})
	}
}

func TestDefinitionsAreDeclaredOnceWithKnownTags(t *testing.T) {
	t.Parallel()

	seen := map[string]bool{}
	for _, d := range Declared() {
		require.False(t, seen[d.ExportedName()], "duplicate metric name %q", d.ExportedName())
		seen[d.ExportedName()] = true
		for _, tag := range d.Tags() {
			require.True(t, slices.Contains(KnownTags, tag), "metric %q uses undeclared tag %q", d.Name(), tag)
		}
	}
	require.True(t, seen["vigil_worker_heartbeats_total"])
}

func TestExportedNamesFollowPrometheusConventions(t *testing.T) {
	t.Parallel()

	require.Equal(t, "vigil_worker_heartbeats_total", WorkerHeartbeats.ExportedName())
	require.Equal(t, "vigil_rpc_latency_seconds", RPCLatency.ExportedName())
	require.Equal(t, "vigil_workers_by_state", WorkersByState.ExportedName())
	require.Equal(t, "vigil_group_commit_batch_size", GroupCommitBatchSize.ExportedName())
	for _, d := range Declared() {
		switch d.Type() {
		case TypeCounter:
			require.True(t, strings.HasSuffix(d.ExportedName(), "_total"), d.ExportedName())
		case TypeTimer:
			require.True(t, strings.HasSuffix(d.ExportedName(), "_seconds"), d.ExportedName())
		}
		require.True(t, strings.HasPrefix(d.ExportedName(), "vigil_"), d.ExportedName())
	}
}

func scrape(t *testing.T, handler interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request)
}) string {
	t.Helper()
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return string(body)
}

func TestPrometheusScopeServesMetrics(t *testing.T) {
	t.Parallel()

	scope, handler, closer := NewPrometheusScope("vigil", WithReportInterval(time.Hour))
	// Sub-scopes add nothing to a name.
	RPCRequests.With(scope.SubScope("frontend"), OperationTag("ShutdownWorker")).Inc(3)
	RPCLatency.With(scope.SubScope("frontend"), OperationTag("ShutdownWorker")).Record(5 * time.Millisecond)
	WorkerHeartbeats.With(scope.SubScope("worker")).Inc(2)
	// Closing flushes the last report into the collectors.
	require.NoError(t, closer.Close())

	body := scrape(t, handler)
	require.Contains(t, body, `vigil_rpc_requests_total{operation="ShutdownWorker"} 3`)
	require.Contains(t, body, `vigil_rpc_latency_seconds_bucket{operation="ShutdownWorker",le="0.008"} 1`)
	require.Contains(t, body, `vigil_rpc_latency_seconds_bucket{operation="ShutdownWorker",le="0.004"} 0`)
	require.Contains(t, body, "vigil_worker_heartbeats_total 2")
	require.Contains(t, body, "# HELP vigil_worker_heartbeats_total "+WorkerHeartbeats.Help())
	require.NotContains(t, body, "vigil_worker_worker")
	require.NotContains(t, body, "vigil_frontend_")
	require.Contains(t, body, "go_goroutines")
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

var family = regexp.MustCompile(`(?m)^# TYPE (vigil_\w+) (\w+)$`)

// expectedFamilies is what a fresh scrape must list for defs: the exported name and Prometheus
// type of every metric whose labels are a fixed set (none, or declared values). A metric with an
// open label (operation, shard, ...) has no series, so no family, until code creates one.
func expectedFamilies(defs []Definition) map[string]string {
	want := map[string]string{}
	for _, d := range defs {
		if labelCombinations(d) == nil {
			continue
		}
		typ := map[Type]string{TypeCounter: "counter", TypeGauge: "gauge", TypeTimer: "histogram", TypeHistogram: "histogram"}[d.Type()]
		want[d.ExportedName()] = typ
	}
	return want
}

// TestMetricsEndpointListsEveryDeclaredMetricFromTheStart scrapes a fresh scope on which
// nothing was recorded: every declared metric with fixed labels is there with its help, each of
// its series at 0.
func TestMetricsEndpointListsEveryDeclaredMetricFromTheStart(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zap.WarnLevel)
	_, handler, closer := NewPrometheusScope("vigil", WithReportInterval(time.Hour), WithLogger(zap.New(core)))
	defer closer.Close()
	body := scrape(t, handler)
	require.Zero(t, logs.Len(), "the reporter refused metrics: %v", logs.All())

	got := map[string]string{}
	for _, m := range family.FindAllStringSubmatch(body, -1) {
		got[m[1]] = m[2]
	}
	require.Equal(t, expectedFamilies(Declared()), got)
	for name := range got {
		d, ok := lookup(strings.TrimSuffix(strings.TrimSuffix(name, "_total"), "_seconds"))
		require.True(t, ok, name)
		require.Contains(t, body, "# HELP "+name+" "+d.Help()+"\n")
	}
	require.Contains(t, body, "vigil_worker_heartbeats_total 0\n")
	require.Contains(t, body, "vigil_cluster_hosts_alive 0\n")
	require.Contains(t, body, `vigil_workers_by_state{state="INACTIVE"} 0`)
	require.Contains(t, body, `vigil_long_poll_ends_total{kind="empty",operation="PollActivityTaskQueue"} 0`)
	require.Contains(t, body, `vigil_timer_task_lag_seconds_count{queue="timer"} 0`)
	require.Contains(t, body, `vigil_worker_lease_expiries_deferred_total{kind="mass_expiry"} 0`)
}

// TestEveryDefinitionIsExportedOnce records every declared metric, with every declared tag, on
// one Prometheus scope, as a server does, and reads /metrics back: each name is exported once,
// and the reporter never refuses one (it does when a name comes with two label sets).
func TestEveryDefinitionIsExportedOnce(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zap.WarnLevel)
	scope, handler, closer := NewPrometheusScope("vigil", WithReportInterval(time.Hour), WithLogger(zap.New(core)))
	for _, d := range Declared() {
		tags := make([]Tag, 0, len(d.Tags()))
		for _, k := range d.Tags() {
			tags = append(tags, Tag{Key: k, Value: "x"})
		}
		switch dd := d.(*def); d.Type() {
		case TypeCounter:
			CounterDef{dd}.With(scope, tags...).Inc(1)
		case TypeGauge:
			GaugeDef{dd}.With(scope, tags...).Update(1)
		case TypeTimer:
			TimerDef{dd}.With(scope, tags...).Record(time.Millisecond)
		case TypeHistogram:
			HistogramDef{dd}.With(scope, tags...).RecordValue(1)
		default:
			t.Fatalf("metric %q has an unknown type %v", d.Name(), d.Type())
		}
	}
	require.NoError(t, closer.Close())
	require.Zero(t, logs.Len(), "the reporter refused metrics: %v", logs.All())

	body := scrape(t, handler)
	for _, d := range Declared() {
		require.Equal(t, 1, strings.Count(body, "# TYPE "+d.ExportedName()+" "),
			"metric %q is not exported exactly once", d.Name())
	}
}

// TestUndeclaredTagsAreDroppedNotLost: a metric recorded on a scope that carries a tag the
// definition does not declare is still exported, under its declared labels.
func TestUndeclaredTagsAreDroppedNotLost(t *testing.T) {
	t.Parallel()

	core, logs := observer.New(zap.WarnLevel)
	scope, handler, closer := NewPrometheusScope("vigil", WithReportInterval(time.Hour), WithLogger(zap.New(core)))
	TimerTasksFired.With(scope.Tagged(map[string]string{TagShard: "3"}), Tag{Key: TagQueue, Value: "timer"}).Inc(4)
	require.NoError(t, closer.Close())
	require.Contains(t, scrape(t, handler), `vigil_timer_tasks_fired_total{queue="timer"} 4`)
	require.Equal(t, 1, logs.FilterMessageSnippet("other tags than declared").Len())
}
