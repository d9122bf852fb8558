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

const (
	// StateGaugeIntervalDefault is how often workers_by_state is reported.
	StateGaugeIntervalDefault = 15 * time.Second
	// StateRecountIntervalDefault is how often counts kept from transitions (CountFrom) are
	// recounted from the store.
	StateRecountIntervalDefault = 5 * time.Minute
	// stateGaugeIntervalMin bounds how often the loop wakes, whatever the settings say.
	stateGaugeIntervalMin = 100 * time.Millisecond
)

// StateGauges reports workers_by_state{state} (summed over namespaces), and passes each
// namespace's count to worker.maxWorkersPerNamespace (ReportTotalTo), at an interval.
//
// Without CountFrom it counts executions in the store at every report. With it, reports read
// the counts the library keeps from committed transitions (StateCounts), which cost nothing to
// read, and the store is counted only at Start and every recount interval, to take in what
// this host did not see commit. Counting reads indexes only; it takes no execution lock.
type StateGauges struct {
	lister       chasm.Lister
	registry     *chasm.Registry
	namespaceIDs func() []string
	interval     func() time.Duration
	ts           clock.TimeSource
	scope        tally.Scope
	logger       *zap.Logger
	// totalSink, when set, receives each namespace's count of worker records in any state
	// (the base of worker.maxWorkersPerNamespace).
	totalSink func(namespaceID string, n int64)
	// counts, when set (CountFrom), are kept from transitions and recounted every
	// recountInterval.
	counts          *StateCounts
	recountInterval func() time.Duration

	stop chan struct{}
	done chan struct{}
}

// NewStateGauges returns a reporter over the namespaces namespaceIDs lists, reporting every
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

// ReportTotalTo passes every namespace's count of worker records (every state) to sink at
// each report; call before Start.
func (g *StateGauges) ReportTotalTo(sink func(namespaceID string, n int64)) { g.totalSink = sink }

// CountFrom makes reports read counts (kept by the library, WithStateCounts) and recount them
// from the store every recountInterval() (nil: StateRecountIntervalDefault); call before Start.
func (g *StateGauges) CountFrom(counts *StateCounts, recountInterval func() time.Duration) {
	if recountInterval == nil {
		recountInterval = func() time.Duration { return StateRecountIntervalDefault }
	}
	g.counts, g.recountInterval = counts, recountInterval
}

// Start recounts and reports once, then reports at every interval (recounting when due),
// until Stop.
func (g *StateGauges) Start() {
	go func() {
		defer close(g.done)
		g.Recount(context.Background())
		lastRecount := g.ts.Now()
		for {
			timerC, timer := g.ts.NewTimer(max(g.interval(), stateGaugeIntervalMin))
			select {
			case <-timerC:
			case <-g.stop:
				timer.Stop()
				return
			}
			if g.counts == nil || g.ts.Now().Sub(lastRecount) >= g.recountInterval() {
				g.Recount(context.Background())
				lastRecount = g.ts.Now()
				continue
			}
			g.Report()
		}
	}()
}

// Stop ends reporting and waits for the reporter to exit.
func (g *StateGauges) Stop() {
	close(g.stop)
	<-g.done
}

// Recount counts workers in each state in the store and reports the counts (with CountFrom,
// they replace the counts kept from transitions). A failed count reports nothing.
func (g *StateGauges) Recount(ctx context.Context) {
	if g.counts == nil {
		if counted, ok := g.countStore(ctx); ok {
			g.report(counted)
		}
		return
	}
	g.counts.beginRecount()
	counted, ok := g.countStore(ctx)
	g.counts.endRecount(counted, ok)
	g.Report()
}

// Report reports the counts kept from transitions (CountFrom); without them it recounts.
func (g *StateGauges) Report() {
	if g.counts == nil {
		g.Recount(context.Background())
		return
	}
	counts := make(map[string]StateCount)
	for _, ns := range g.namespaceIDs() {
		counts[ns] = g.counts.Get(ns)
	}
	g.report(counts)
}

// countStore counts each namespace's workers by state in the store.
func (g *StateGauges) countStore(ctx context.Context) (map[string]StateCount, bool) {
	archetype, err := chasm.ArchetypeOf[*Worker](g.registry)
	if err != nil {
		return nil, false
	}
	counted := make(map[string]StateCount)
	for _, ns := range g.namespaceIDs() {
		var c StateCount
		for _, state := range countedStates {
			n, err := g.lister.CountExecutions(ctx, chasm.ListRequest{
				Archetype: archetype, NamespaceID: ns, Filter: chasm.IndexedFields{Status: StatusName(state)},
			})
			if err != nil {
				g.logger.Warn("count workers for workers_by_state", tag.NamespaceID(ns), tag.Error(err))
				return nil, false
			}
			*c.field(state) = n
		}
		counted[ns] = c
	}
	return counted, true
}

// report updates the gauges and passes each namespace's counts to the sinks.
func (g *StateGauges) report(counts map[string]StateCount) {
	var sum StateCount
	for ns, c := range counts {
		sum.Active += c.Active
		sum.Inactive += c.Inactive
		sum.CleanedUp += c.CleanedUp
		if g.totalSink != nil {
			g.totalSink(ns, c.Total())
		}
	}
	for _, state := range countedStates {
		metrics.WorkersByState.With(g.scope, metrics.StateTag(StatusName(state))).Update(float64(*sum.field(state)))
	}
}
