package worker

import (
	"context"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
)

// StateGaugeIntervalDefault is how often workers_by_state is refreshed.
const StateGaugeIntervalDefault = 15 * time.Second

// StateGauges reports workers_by_state{state} (summed over namespaces) by counting executions
// in the store at an interval. Counting reads indexes only; it takes no execution lock.
type StateGauges struct {
	lister       chasm.Lister
	registry     *chasm.Registry
	namespaceIDs func() []string
	interval     func() time.Duration
	ts           clock.TimeSource
	scope        tally.Scope
	logger       *zap.Logger
	// activeSink, when set, receives each namespace's ACTIVE count (the expiry brake's base).
	activeSink func(namespaceID string, n int64)
	// totalSink, when set, receives each namespace's count of worker records in any state
	// (the base of worker.maxWorkersPerNamespace).
	totalSink func(namespaceID string, n int64)

	stop chan struct{}
	done chan struct{}
}

// NewStateGauges returns a reporter over the namespaces namespaceIDs lists, refreshed every
// interval() (nil: StateGaugeIntervalDefault).
func NewStateGauges(
	lister chasm.Lister, registry *chasm.Registry, namespaceIDs func() []string, interval func() time.Duration,
	ts clock.TimeSource, scope tally.Scope, logger *zap.Logger,
) *StateGauges {
	if interval == nil {
		interval = func() time.Duration { return StateGaugeIntervalDefault }
	}
	return &StateGauges{
		lister: lister, registry: registry, namespaceIDs: namespaceIDs, interval: interval,
		ts: ts, scope: scope, logger: logger, stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// ReportActiveTo passes every namespace's ACTIVE count to sink at each report; call before
// Start.
func (g *StateGauges) ReportActiveTo(sink func(namespaceID string, n int64)) { g.activeSink = sink }

// ReportTotalTo passes every namespace's count of worker records (every state) to sink at
// each report; call before Start.
func (g *StateGauges) ReportTotalTo(sink func(namespaceID string, n int64)) { g.totalSink = sink }

// Start reports once, then at every interval, until Stop.
func (g *StateGauges) Start() {
	go func() {
		defer close(g.done)
		for {
			g.Report(context.Background())
			timerC, timer := g.ts.NewTimer(max(g.interval(), 100*time.Millisecond))
			select {
			case <-timerC:
			case <-g.stop:
				timer.Stop()
				return
			}
		}
	}()
}

// Stop ends reporting and waits for the reporter to exit.
func (g *StateGauges) Stop() {
	close(g.stop)
	<-g.done
}

// Report counts workers in each state and updates the gauges.
func (g *StateGauges) Report(ctx context.Context) {
	archetype, err := chasm.ArchetypeOf[*Worker](g.registry)
	if err != nil {
		return
	}
	totals := make(map[string]int64)
	for _, state := range []string{"ACTIVE", "INACTIVE", "CLEANED_UP"} {
		var total int64
		for _, ns := range g.namespaceIDs() {
			n, err := g.lister.CountExecutions(ctx, chasm.ListRequest{
				Archetype: archetype, NamespaceID: ns, Filter: chasm.IndexedFields{Status: state},
			})
			if err != nil {
				g.logger.Warn("count workers for workers_by_state", tag.NamespaceID(ns), tag.Error(err))
				return
			}
			total += n
			totals[ns] += n
			if state == "ACTIVE" && g.activeSink != nil {
				g.activeSink(ns, n)
			}
		}
		metrics.WorkersByState.With(g.scope, metrics.StateTag(state)).Update(float64(total))
	}
	if g.totalSink != nil {
		for ns, n := range totals {
			g.totalSink(ns, n)
		}
	}
}
