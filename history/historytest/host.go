// Package historytest runs a real history host, on a real SQLite file, inside a test.
package historytest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/sqlite"
	"github.com/vigilhq/vigil/tasks"
)

// Options configure a test host. Zero values pick test-friendly defaults.
type Options struct {
	// Path of the SQLite file; default a file in t.TempDir(). Reuse it to restart a host.
	Path      string
	NumShards int32
	Libraries []chasm.Library
	// Services are registered on the host's gRPC server (started only if non-empty).
	Services      func(engine *history.Engine) []history.ServiceRegistration
	DynamicConfig dynamicconfig.Client
	// WrapStore, if set, wraps the store the engine writes through (to observe writes).
	WrapStore  func(persistence.Store) persistence.Store
	TimeSource clock.TimeSource
	Logger     *zap.Logger
	Scope      tally.Scope
	// CacheDecodedSize bounds the executions each shard keeps decoded (0: the default).
	CacheDecodedSize int
	// CacheSize bounds the business IDs each shard keeps cached (0: the default).
	CacheSize int
}

// Host is a running history host.
type Host struct {
	Engine    *history.Engine
	Store     persistence.Store
	Committer *persistence.GroupCommitter
	Scheduler *tasks.Scheduler
	Server    *history.Server
	Path      string
	Scope     tally.Scope
	stopped   bool
}

// Start builds and starts a host, stopping it at the end of the test.
func Start(t testing.TB, opts Options) *Host {
	t.Helper()
	h, err := StartE(t, opts)
	if err != nil {
		t.Fatalf("start history host: %v", err)
	}
	t.Cleanup(h.Stop)
	return h
}

// StartE is Start that returns the error instead of failing the test (and registers no
// cleanup).
func StartE(t testing.TB, opts Options) (*Host, error) {
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "vigil.db")
	}
	if opts.NumShards == 0 {
		opts.NumShards = 4
	}
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	if opts.Scope == nil {
		opts.Scope = tally.NewTestScope("", nil)
	}
	if opts.DynamicConfig == nil {
		opts.DynamicConfig = dynamicconfig.NewMemoryClient()
	}
	dc := dynamicconfig.NewCollection(opts.DynamicConfig, opts.Logger)

	registry := chasm.NewRegistry()
	for _, lib := range opts.Libraries {
		if err := registry.Register(lib); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var store persistence.Store
	store, err := sqlite.Open(ctx, sqlite.Config{Path: opts.Path}, opts.Logger)
	if err != nil {
		return nil, err
	}
	if opts.WrapStore != nil {
		store = opts.WrapStore(store)
	}
	committer := persistence.NewGroupCommitter(store, persistence.GroupCommitOptions{
		MaxBatchSize: dynamicconfig.GroupCommitMaxBatchSize.Get(dc),
		MaxWait:      dynamicconfig.GroupCommitMaxWait.Get(dc),
	}, opts.Logger, opts.Scope)
	committer.Start()
	scheduler := tasks.NewScheduler(tasks.SchedulerOptions{})
	scheduler.Start()

	engine, err := history.NewEngine(history.EngineParams{
		Config: history.Config{NumShards: opts.NumShards,
			ExecutionCacheSize: opts.CacheSize, ExecutionCacheDecodedSize: opts.CacheDecodedSize},
		Registry:      registry,
		Store:         store,
		Committer:     committer,
		Scheduler:     scheduler,
		TimeSource:    opts.TimeSource,
		DynamicConfig: dc,
		Logger:        opts.Logger,
		MetricsScope:  opts.Scope,
	})
	if err == nil {
		err = engine.Start(ctx)
	}
	if err != nil {
		scheduler.Stop()
		committer.Stop()
		_ = store.Close()
		return nil, err
	}
	h := &Host{Engine: engine, Store: store, Committer: committer, Scheduler: scheduler, Path: opts.Path, Scope: opts.Scope}
	if opts.Services != nil {
		h.Server, err = history.NewServer("127.0.0.1:0", opts.Services(engine), opts.Logger)
		if err != nil {
			h.Stop()
			return nil, err
		}
		h.Server.Start()
	}
	return h, nil
}

// Stop stops the host in dependency order. It is idempotent.
func (h *Host) Stop() {
	if h.stopped {
		return
	}
	h.stopped = true
	if h.Server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.Server.Stop(ctx)
		cancel()
	}
	h.Engine.Stop()
	h.Scheduler.Stop()
	h.Committer.Stop()
	_ = h.Store.Close()
}
