package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/matching"
	"github.com/vigilhq/vigil/persistence/persistencefx"
	"github.com/vigilhq/vigil/tasks"
)

// Server is one vigil process: frontend, history and the component libraries.
type Server struct {
	app      *fx.App
	logger   *zap.Logger
	frontend *frontend.Server
	http     *frontend.HTTPServer
	dcFile   *dynamicconfig.FileClient
}

// Option adjusts a server being built (tests use them).
type Option func(*options)

type options struct {
	logger     *zap.Logger
	timeSource clock.TimeSource
	dcClient   dynamicconfig.Client
	fxOptions  []fx.Option
}

// WithLogger replaces the logger built from Config.Log.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithDynamicConfigClient replaces the file and flag clients (tests use a MemoryClient).
func WithDynamicConfigClient(c dynamicconfig.Client) Option {
	return func(o *options) { o.dcClient = c }
}

// WithFxOptions adds fx options, for example extra libraries.
func WithFxOptions(opts ...fx.Option) Option {
	return func(o *options) { o.fxOptions = append(o.fxOptions, opts...) }
}

// New builds a server; nothing listens until Start.
func New(cfg Config, opts ...Option) (*Server, error) {
	cfg = cfg.withDefaults()
	o := options{timeSource: clock.NewRealTimeSource()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		l, err := log.NewLogger(cfg.Log)
		if err != nil {
			return nil, err
		}
		o.logger = l
	}
	if cfg.Persistence.Driver == "" || cfg.Persistence.Driver == "sqlite" {
		if err := os.MkdirAll(filepath.Dir(cfg.Persistence.SQLite.Path), 0o750); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	namespaces, err := namespace.NewRegistry(cfg.Namespaces)
	if err != nil {
		return nil, err
	}

	s := &Server{logger: o.logger}
	dcClient := o.dcClient
	if dcClient == nil {
		if dcClient, s.dcFile, err = newDynamicConfigClient(cfg, o.logger, o.timeSource); err != nil {
			return nil, err
		}
	}
	scope, metricsHandler, metricsCloser := metrics.NewPrometheusScope("vigil", metrics.WithLogger(o.logger))

	s.app = fx.New(
		fx.WithLogger(func() fxevent.Logger {
			return &fxevent.ZapLogger{Logger: o.logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))}
		}),
		// First of all start hooks: serve the port (bound when the frontend is built) with an
		// Unavailable to every call until the frontend's own hook, which runs after everything
		// it depends on has started. A bound port that does not serve would hold clients'
		// calls until their deadline instead (frontend.Server.Serve).
		fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.StartHook(func() {
				if s.frontend != nil {
					s.frontend.Serve()
				}
			}))
		}),
		fx.Supply(cfg.History, cfg.HistoryServer, cfg.Persistence, namespaces),
		fx.Provide(
			func() *zap.Logger { return o.logger },
			func() clock.TimeSource { return o.timeSource },
			func() tally.Scope { return scope },
			func() *dynamicconfig.Collection { return dynamicconfig.NewCollection(dcClient, o.logger) },
		),
		chasm.Module,
		persistencefx.Module,
		tasks.Module,
		history.Module,
		worker.Module,
		activityModule,
		fx.Provide(func(lc fx.Lifecycle, router *history.Router, m *matching.Matcher, dc *dynamicconfig.Collection) (*frontend.Server, error) {
			deps := frontend.Deps{
				History:       frontend.NewHistoryClient(router),
				Matching:      m,
				Namespaces:    namespaces,
				DynamicConfig: dc,
				TimeSource:    o.timeSource,
				Logger:        o.logger,
				MetricsScope:  scope.SubScope("frontend"),
			}
			workflow := frontend.NewWorkflowHandler(deps)
			fs, err := frontend.NewServer(frontend.ServerConfig{Address: cfg.Frontend.Address, MaxMessageSize: cfg.Frontend.MaxMessageSize},
				deps, workflow, frontend.NewLivenessHandler(deps))
			if err != nil {
				return nil, err
			}
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error { fs.Start(); return nil },
				OnStop: func(ctx context.Context) error {
					workflow.Stop() // answer open long polls first, so graceful stop does not wait on them
					fs.Stop(ctx)
					return nil
				},
			})
			return fs, nil
		}),
		fx.Provide(func(lc fx.Lifecycle) (*frontend.HTTPServer, error) {
			var httpOpts []frontend.HTTPOption
			if cfg.Frontend.Pprof {
				httpOpts = append(httpOpts, frontend.WithPprof())
			}
			hs, err := frontend.NewHTTPServer(cfg.Frontend.HTTPAddress, metricsHandler, nil, o.logger, httpOpts...)
			if err != nil {
				return nil, err
			}
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error { hs.Start(); return nil },
				OnStop:  func(ctx context.Context) error { hs.Stop(ctx); return metricsCloser.Close() },
			})
			return hs, nil
		}),
		fx.Invoke(func(lc fx.Lifecycle, e *history.Engine, r *chasm.Registry, ts clock.TimeSource, dc *dynamicconfig.Collection) {
			ids := func() []string {
				var out []string
				for _, name := range namespaces.Names() {
					if ns, err := namespaces.GetByName(name); err == nil {
						out = append(out, ns.ID)
					}
				}
				return out
			}
			g := worker.NewStateGauges(e, r, ids, dynamicconfig.StateGaugeInterval.Get(dc), ts, scope.SubScope("worker"), o.logger)
			lc.Append(fx.StartStopHook(g.Start, g.Stop))
		}),
		fx.Options(o.fxOptions...),
		fx.Populate(&s.frontend, &s.http),
	)
	if err := s.app.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func newDynamicConfigClient(cfg Config, logger *zap.Logger, ts clock.TimeSource) (dynamicconfig.Client, *dynamicconfig.FileClient, error) {
	overrides, err := dynamicconfig.ParseKeyValueFlags(cfg.DynamicConfigValues)
	if err != nil {
		return nil, nil, err
	}
	if cfg.DynamicConfigFile == "" {
		return overrides, nil, nil
	}
	file, err := dynamicconfig.NewFileClient(dynamicconfig.FileClientConfig{Filepath: cfg.DynamicConfigFile}, logger, ts)
	if err != nil {
		return nil, nil, err
	}
	return dynamicconfig.NewOverlayClient(overrides, file), file, nil
}

// Start starts every component and the listeners.
func (s *Server) Start(ctx context.Context) error {
	if err := s.app.Start(ctx); err != nil {
		return err
	}
	if s.dcFile != nil {
		s.dcFile.Start()
	}
	s.logger.Info("vigil is serving", zap.String("frontend", s.frontend.Address()), zap.String("http", s.http.Address()))
	return nil
}

// Stop stops everything, letting in-flight calls finish until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	if s.dcFile != nil {
		s.dcFile.Stop()
	}
	err := s.app.Stop(ctx)
	if err != nil {
		s.logger.Warn("stop", tag.Error(err))
	}
	_ = s.logger.Sync()
	return err
}

// FrontendAddress is where SDKs connect.
func (s *Server) FrontendAddress() string { return s.frontend.Address() }

// HTTPAddress serves /metrics and /healthz.
func (s *Server) HTTPAddress() string { return s.http.Address() }

// StopTimeoutDefault bounds a graceful stop.
const StopTimeoutDefault = 10 * time.Second
