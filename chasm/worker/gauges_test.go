package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
)

func TestStateGaugesCountWorkersByState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mustBeat("w1")
	b.mustBeat("w2")
	b.mustBeat("w3")
	b.shutdown("w3")

	scope := tally.NewTestScope("", nil)
	g := worker.NewStateGauges(b.engine, b.engine.Registry(), func() []string { return []string{testNamespaceID, "other-ns"} },
		nil, b.engine.Clock(), scope, zap.NewNop())
	g.Recount(context.Background())
	require.Equal(t, map[string]float64{"ACTIVE": 2, "INACTIVE": 1, "CLEANED_UP": 0}, stateGauges(scope))
}

func stateGauges(scope tally.TestScope) map[string]float64 {
	gauges := map[string]float64{}
	for _, gauge := range scope.Snapshot().Gauges() {
		gauges[gauge.Tags()["state"]] = gauge.Value()
	}
	return gauges
}

// countingLister counts the store counts StateGauges asks for.
type countingLister struct {
	chasm.Lister
	calls atomic.Int64
}

func (l *countingLister) CountExecutions(ctx context.Context, req chasm.ListRequest) (int64, error) {
	l.calls.Add(1)
	return l.Lister.CountExecutions(ctx, req)
}

func TestStateCounts(t *testing.T) {
	t.Parallel()

	t.Run("TransitionsKeepTheCountsEqualToTheStore", func(t *testing.T) {
		t.Parallel()
		counts := worker.NewStateCounts()
		b := setupWith(t, worker.WithStateCounts(counts))
		recount := func() worker.StateCount {
			t.Helper()
			scope := tally.NewTestScope("", nil)
			g := worker.NewStateGauges(b.engine, b.engine.Registry(), func() []string { return []string{testNamespaceID} },
				nil, b.engine.Clock(), scope, zap.NewNop())
			g.Recount(context.Background())
			s := stateGauges(scope)
			return worker.StateCount{Active: int64(s["ACTIVE"]), Inactive: int64(s["INACTIVE"]), CleanedUp: int64(s["CLEANED_UP"])}
		}

		for _, key := range []string{"w1", "w2", "w3", "w4"} {
			b.mustBeat(key)
		}
		b.mustBeat("w1") // heartbeats change no state
		require.Equal(t, worker.StateCount{Active: 4}, counts.Get(testNamespaceID))
		b.shutdown("w3")
		require.Equal(t, worker.StateCount{Active: 3, Inactive: 1}, counts.Get(testNamespaceID))
		b.mustBeat("w3") // resurrected
		require.Equal(t, worker.StateCount{Active: 4}, counts.Get(testNamespaceID))
		require.Equal(t, recount(), counts.Get(testNamespaceID))

		// Leases run out, the inactive are cleaned up, the cleaned up deleted: the counts follow
		// every step, as the store sees it.
		b.engine.AdvanceTime(time.Hour)
		require.Equal(t, recount(), counts.Get(testNamespaceID))
		require.Zero(t, counts.Get(testNamespaceID).Active)
		b.engine.AdvanceTime(72 * time.Hour)
		require.Equal(t, recount(), counts.Get(testNamespaceID))
		require.Equal(t, worker.StateCount{}, counts.Get("other-ns"))
	})

	t.Run("ARecountReplacesTheCountsAndKeepsTransitionsCommittedMeanwhile", func(t *testing.T) {
		t.Parallel()
		c := worker.NewStateCounts()
		active := &workerpb.WorkerState{Status: workerpb.WorkerStatus_WORKER_STATUS_ACTIVE}
		inactive := &workerpb.WorkerState{Status: workerpb.WorkerStatus_WORKER_STATUS_INACTIVE}
		c.Observe("ns", nil, active, false)
		c.Observe("ns", active, inactive, false)
		c.Observe("ns", nil, active, false)
		require.Equal(t, worker.StateCount{Active: 1, Inactive: 1}, c.Get("ns"))

		// Another host registered 10 workers: the recount takes them in, and the registration
		// committed here during the count is kept on top.
		worker.BeginRecountForTest(c)
		c.Observe("ns", nil, active, false)
		worker.EndRecountForTest(c, map[string]worker.StateCount{"ns": {Active: 11, Inactive: 1}}, true)
		require.Equal(t, worker.StateCount{Active: 12, Inactive: 1}, c.Get("ns"))

		// A failed count keeps the counts.
		worker.BeginRecountForTest(c)
		c.Observe("ns", inactive, inactive, true) // an inactive worker deleted
		worker.EndRecountForTest(c, nil, false)
		require.Equal(t, worker.StateCount{Active: 12}, c.Get("ns"))
	})

	t.Run("GaugesReportFromTheCountsAndRecountSlowly", func(t *testing.T) {
		t.Parallel()
		counts := worker.NewStateCounts()
		b := setupWith(t, worker.WithStateCounts(counts))
		b.mustBeat("w1")
		b.mustBeat("w2")

		lister := &countingLister{Lister: b.engine}
		ts := clock.NewFakeTimeSource()
		scope := tally.NewTestScope("", nil)
		var total atomic.Int64
		g := worker.NewStateGauges(lister, b.engine.Registry(), func() []string { return []string{testNamespaceID} },
			func() time.Duration { return time.Second }, ts, scope, zap.NewNop())
		g.CountFrom(counts, func() time.Duration { return time.Minute })
		g.ReportTotalTo(func(ns string, n int64) { total.Store(n) })
		g.Start()
		t.Cleanup(g.Stop)
		waitForTimer := func() {
			t.Helper()
			require.Eventually(t, func() bool { return ts.PendingTimers() == 1 }, 10*time.Second, time.Millisecond)
		}

		waitForTimer() // the first report, a recount, is done
		require.Equal(t, int64(3), lister.calls.Load(), "one count per state at start")
		require.Equal(t, map[string]float64{"ACTIVE": 2, "INACTIVE": 0, "CLEANED_UP": 0}, stateGauges(scope))

		b.mustBeat("w3")
		b.shutdown("w1")
		ts.Advance(time.Second)
		waitForTimer()
		require.Equal(t, map[string]float64{"ACTIVE": 2, "INACTIVE": 1, "CLEANED_UP": 0}, stateGauges(scope))
		require.Equal(t, int64(3), total.Load())
		require.Equal(t, int64(3), lister.calls.Load(), "a report reads no store")

		ts.Advance(time.Minute)
		waitForTimer()
		require.Equal(t, int64(6), lister.calls.Load(), "the recount is due")
		require.Equal(t, map[string]float64{"ACTIVE": 2, "INACTIVE": 1, "CLEANED_UP": 0}, stateGauges(scope))
	})
}
