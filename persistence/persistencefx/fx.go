// Package persistencefx opens the configured store and its group committer for an fx app.
package persistencefx

import (
	"context"
	"fmt"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"

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

func newStore(lc fx.Lifecycle, cfg Config, logger *zap.Logger) (persistence.Store, error) {
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
	return store, nil
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
