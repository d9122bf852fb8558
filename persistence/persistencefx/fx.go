// Package persistencefx opens the configured store and its group committer for an fx app.
package persistencefx

import (
	"context"
	"fmt"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/postgres"
	"github.com/vigilhq/vigil/persistence/sqlite"
)

// Config selects and configures the store.
type Config struct {
	// Driver is "sqlite" (default) or "postgres".
	Driver   string          `yaml:"driver"`
	SQLite   sqlite.Config   `yaml:"sqlite"`
	Postgres postgres.Config `yaml:"postgres"`
}

// Module provides persistence.Store and *persistence.GroupCommitter from a Config, closing
// them when the app stops.
var Module = fx.Module("persistence",
	fx.Provide(newStore, newGroupCommitter),
)

func newStore(lc fx.Lifecycle, cfg Config, logger *zap.Logger, scope tally.Scope) (persistence.Store, error) {
	// Open with a bounded context: migrations run here, before the app serves anything.
	ctx, cancel := context.WithTimeout(context.Background(), fx.DefaultTimeout)
	defer cancel()
	var (
		store persistence.Store
		err   error
	)
	switch cfg.Driver {
	case "", "sqlite":
		store, err = sqlite.Open(ctx, cfg.SQLite, logger)
	case "postgres":
		store, err = postgres.Open(ctx, cfg.Postgres, logger)
	default:
		return nil, fmt.Errorf("persistence: unknown driver %q (want sqlite or postgres)", cfg.Driver)
	}
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(store.Close))
	if s, ok := store.(*sqlite.Store); ok {
		r := newWALReporter(s, scope.SubScope("persistence"))
		lc.Append(fx.StartStopHook(r.start, r.stop))
	}
	return store, nil
}

// walReportInterval is how often the SQLite WAL's gauges are updated.
const walReportInterval = time.Second

// walReporter copies the SQLite WAL's length and backlog into gauges: a backlog that keeps
// growing (the checkpointer outwritten) makes every read and write dearer, so an operator
// watching a host under load wants to see it.
type walReporter struct {
	store           *sqlite.Store
	frames, backlog tally.Gauge
	stopCh, done    chan struct{}
}

func newWALReporter(store *sqlite.Store, scope tally.Scope) *walReporter {
	return &walReporter{store: store,
		frames:  metrics.SQLiteWALFrames.With(scope),
		backlog: metrics.SQLiteWALBacklogFrames.With(scope),
		stopCh:  make(chan struct{}), done: make(chan struct{})}
}

func (r *walReporter) start() {
	go func() {
		defer close(r.done)
		t := time.NewTicker(walReportInterval)
		defer t.Stop()
		for {
			r.report()
			select {
			case <-r.stopCh:
				return
			case <-t.C:
			}
		}
	}()
}

func (r *walReporter) stop() {
	close(r.stopCh)
	<-r.done
}

func (r *walReporter) report() {
	w := r.store.WAL()
	r.frames.Update(float64(w.Frames))
	r.backlog.Update(float64(w.Backlog))
}

func newGroupCommitter(
	lc fx.Lifecycle, store persistence.Store, dc *dynamicconfig.Collection, logger *zap.Logger, scope tally.Scope,
) *persistence.GroupCommitter {
	opts := persistence.GroupCommitOptions{
		MaxBatchSize:  dynamicconfig.GroupCommitMaxBatchSize.Get(dc),
		MaxWait:       dynamicconfig.GroupCommitMaxWait.Get(dc),
		SiblingsWait:  dynamicconfig.GroupCommitSiblingsWait.Get(dc),
		RateWait:      dynamicconfig.GroupCommitRateWait.Get(dc),
		RateBatchSize: dynamicconfig.GroupCommitRateBatchSize.Get(dc),
	}
	if w, ok := store.(persistence.ConcurrentBatchWriter); ok {
		opts.MaxInFlight = w.MaxConcurrentBatches
	}
	c := persistence.NewGroupCommitter(store, opts, logger, scope.SubScope("persistence"))
	lc.Append(fx.StartStopHook(c.Start, c.Stop))
	return c
}
