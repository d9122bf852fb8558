package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/chasm/worker/watch"
	"github.com/vigilhq/vigil/common/buildinfo"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/gcpacer"
	"github.com/vigilhq/vigil/common/log"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/auth"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/matching"
	"github.com/vigilhq/vigil/persistence"
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
	engine   *history.Engine
	stopMode *history.StopMode
	cfg      Config
	// dbLock is held from New to Stop on a SQLite database.
	dbLock *dbLock

	authEnabled bool
	// historyUnauthenticated is the history address when it is reachable beyond loopback
	// without a cluster secret.
	historyUnauthenticated string
}

// frontendAuth is what the frontend gets of auth: the interceptor exists only when auth is on.
type frontendAuth struct {
	fx.In
	Interceptor *auth.Interceptor `optional:"true"`
	APIKeys     auth.APIKeyStore
	TaskTokens  *auth.TaskTokenSigner
	TokenKeys   *taskTokenKeys
}

// authModule provides the auth interceptor when auth is on; replace its ClaimMapper or
// Authorizer with WithFxOptions(fx.Decorate(...)).
func authModule(cfg auth.Config) fx.Option {
	if !cfg.Enabled {
		return fx.Options()
	}
	return auth.Module
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
	if _, real := o.timeSource.(clock.RealTimeSource); real {
		ts, err := testHookTimeSource(o.timeSource, o.logger)
		if err != nil {
			return nil, err
		}
		o.timeSource = ts
	}
	if err := cfg.Metrics.OTLP.Validate(); err != nil {
		return nil, err
	}
	if err := checkAddressesFree(cfg); err != nil {
		return nil, err
	}
	namespaces, err := namespace.NewRegistry(cfg.Namespaces)
	if err != nil {
		return nil, err
	}
	s := &Server{logger: o.logger, authEnabled: cfg.Auth.Enabled, cfg: cfg}
	if cfg.Persistence.Driver == "" || cfg.Persistence.Driver == "sqlite" {
		if err := os.MkdirAll(filepath.Dir(cfg.Persistence.SQLite.Path), 0o750); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
		if s.dbLock, err = lockDatabase(cfg.Persistence.SQLite.Path); err != nil {
			return nil, err
		}
	}
	built := false
	defer func() {
		if !built {
			s.dbLock.release()
		}
	}()
	if a := cfg.HistoryServer.Address; a != "" && !isLoopback(a) && cfg.HistoryServer.ClusterSecretFile == "" && cfg.HistoryServer.ClusterSecretValue == "" {
		s.historyUnauthenticated = a
	}
	dcClient := o.dcClient
	if dcClient == nil {
		if dcClient, s.dcFile, err = newDynamicConfigClient(cfg, o.logger, o.timeSource); err != nil {
			return nil, err
		}
	}
	scope, metricsHandler, metricsCloser, err := metrics.NewScope(metrics.Prefix, cfg.Metrics, metrics.WithLogger(o.logger))
	if err != nil {
		return nil, err
	}
	bi := buildinfo.Get()
	metrics.BuildInfo.With(scope, metrics.Tag{Key: metrics.TagVersion, Value: bi.Version}, metrics.Tag{Key: metrics.TagCommit, Value: bi.Commit},
		metrics.Tag{Key: metrics.TagBuildDate, Value: bi.Date}, metrics.Tag{Key: metrics.TagGoVersion, Value: bi.GoVersion}).Update(1)

	s.app = fx.New(
		// fx reports a failed constructor or hook in the error New, Start and Stop return
		// (startupError keeps its cause); logging it as well would bury that one line.
		fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger }),
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
		fx.Supply(cfg.History, cfg.HistoryServer, cfg.Cluster, cfg.Persistence, namespaces),
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
		namespaceModule(namespaces),
		activityModule,
		fx.Supply(cfg.Auth),
		fx.Provide(func(store persistence.Store) auth.APIKeyStore { return apiKeyStore{store: store} }, newTaskTokenKeys),
		authModule(cfg.Auth),
		// The live view: worker changes committed on this host feed its hub, which the history
		// port serves to every frontend of the cluster (WorkerWatchService); WatchWorkers and the
		// web page read the cluster's log (newLiveLog).
		fx.Provide(
			func(ts clock.TimeSource) *watch.Hub { return watch.NewHub(watch.Options{TimeSource: ts}) },
			func(h *watch.Hub) worker.ChangeSink { return h },
			watch.NewServer,
			history.AsService(func(ws *watch.Server) history.ServiceRegistration {
				return func(s grpc.ServiceRegistrar) { workerpb.RegisterWorkerWatchServiceServer(s, ws) }
			}),
			newLiveLog,
		),
		// The streams end before the history server stops (they would hold its graceful stop),
		// and after the engine stopped committing in a cluster (clusterModule): a graceful stop
		// sends every change first, a crash does not.
		fx.Invoke(func(lc fx.Lifecycle, _ *history.Server, ws *watch.Server, mode *history.StopMode) {
			lc.Append(fx.StopHook(func() { ws.Stop(!mode.Crashed()) }))
		}),
		fx.Provide(func(lc fx.Lifecycle, router *history.Router, m *matching.Client, dc *dynamicconfig.Collection, a frontendAuth, live liveLog, pressure overload.Pressure) (*frontend.Server, *frontend.LivenessHandler, error) {
			deps := frontend.Deps{
				Auth:          a.Interceptor,
				APIKeys:       a.APIKeys,
				TaskTokens:    a.TaskTokens,
				TaskTokenKeys: a.TokenKeys,
				Watch:         live.hub,
				History:       frontend.NewHistoryClient(router),
				Matching:      m,
				Namespaces:    namespaces,
				DynamicConfig: dc,
				TimeSource:    o.timeSource,
				Logger:        o.logger,
				MetricsScope:  scope.SubScope("frontend"),
				Cluster:       (*clusterDescriber)(s),
				Pressure:      pressure,
			}
			workflow := frontend.NewWorkflowHandler(deps)
			var tlsConfig *tls.Config
			if cfg.TLS.Enabled() {
				var err error
				if tlsConfig, err = auth.NewServerTLSConfig(cfg.TLS, o.logger); err != nil {
					return nil, nil, err
				}
			}
			liveness := frontend.NewLivenessHandler(deps)
			fs, err := frontend.NewServer(frontend.ServerConfig{
				Address: cfg.Frontend.Address, MaxMessageSize: cfg.Frontend.MaxMessageSize, TLS: tlsConfig,
				KeepaliveTime: cfg.Frontend.KeepaliveTime, KeepaliveTimeout: cfg.Frontend.KeepaliveTimeout,
				MaxConnectionAge: cfg.Frontend.MaxConnectionAge, MaxConnectionAgeGrace: cfg.Frontend.MaxConnectionAgeGrace,
				DisableConnectionSuspicion: cfg.Frontend.DisableConnectionSuspicion,
			},
				deps, workflow, liveness)
			if err != nil {
				return nil, nil, err
			}
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error { fs.Start(); return nil },
				OnStop: func(ctx context.Context) error {
					workflow.Stop() // answer open long polls first, so graceful stop does not wait on them
					fs.Stop(ctx)
					return nil
				},
			})
			return fs, liveness, nil
		}),
		fx.Provide(func(lc fx.Lifecycle, a frontendAuth, liveness *frontend.LivenessHandler) (*frontend.HTTPServer, error) {
			var adminGuard func(*http.Request) (int, error) // auth off: open (profiles: loopback only)
			if a.Interceptor != nil {
				adminGuard = a.Interceptor.HTTPAdminGuard
			}
			httpOpts := []frontend.HTTPOption{frontend.WithLiveView(liveness, namespaces, adminGuard)}
			if cfg.Frontend.Pprof {
				httpOpts = append(httpOpts, frontend.WithPprof(adminGuard)) // nil: loopback callers only
			}
			if cfg.TLS.Enabled() {
				httpTLS := cfg.TLS
				httpTLS.RequireClientCert = false
				tlsConfig, err := auth.NewServerTLSConfig(httpTLS, o.logger)
				if err != nil {
					return nil, err
				}
				httpOpts = append(httpOpts, frontend.WithHTTPTLS(tlsConfig))
			}
			httpOpts = append(httpOpts, frontend.WithReadiness(s.ready))
			hs, err := frontend.NewHTTPServer(cfg.Frontend.HTTPAddress, metricsHandler, nil, o.logger, httpOpts...)
			if err != nil {
				return nil, err
			}
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error { hs.Start(); return nil },
				OnStop: func(ctx context.Context) error {
					liveness.Stop() // the page's event streams would hold a graceful stop
					hs.Stop(ctx)
					return metricsCloser.Close()
				},
			})
			return hs, nil
		}),
		fx.Invoke(func(lc fx.Lifecycle, e *history.Engine, r *chasm.Registry, ts clock.TimeSource, dc *dynamicconfig.Collection, brake *worker.Brake, h *worker.Handler, counts *worker.StateCounts) {
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
			g.CountFrom(counts, dynamicconfig.StateRecountInterval.Get(dc))
			g.ReportTotalTo(h.SetWorkerCount)
			lc.Append(fx.StartStopHook(g.Start, g.Stop))
		}),
		// The collector's pacing follows the allocation rate (common/gcpacer); one pacer per
		// process, whichever server starts first.
		fx.Invoke(func(lc fx.Lifecycle, ts clock.TimeSource, dc *dynamicconfig.Collection) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			cfg := gcpacer.Config{
				TargetInterval: dynamicconfig.GCTargetInterval.Get(dc),
				MaxExtra:       dynamicconfig.GCMaxExtraBytes.Get(dc),
				MinExtra:       dynamicconfig.GCMinExtraBytes.Get(dc),
			}
			lc.Append(fx.StartStopHook(
				func() { go func() { defer close(done); gcpacer.Run(ctx, cfg, ts, scope) }() },
				func() { cancel(); <-done },
			))
		}),
		clusterModule,
		fx.Options(o.fxOptions...),
		fx.Populate(&s.frontend, &s.http, &s.engine, &s.stopMode),
	)
	if err := s.app.Err(); err != nil {
		_ = metricsCloser.Close()
		return nil, startupError(err, cfg)
	}
	built = true
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
		s.dbLock.release()
		return startupError(err, s.cfg)
	}
	if s.dcFile != nil {
		s.dcFile.Start()
	}
	bi := buildinfo.Get()
	s.logger.Info("vigil is serving", zap.String("frontend", s.frontend.Address()), zap.String("http", s.http.Address()),
		zap.Bool("auth", s.authEnabled), zap.String("version", bi.Version), zap.String("commit", bi.Commit),
		zap.String("build_date", bi.Date), zap.String("go_version", bi.GoVersion), zap.Int64("go_memory_limit", debug.SetMemoryLimit(-1)))
	warnIfOpen(s.logger, s.authEnabled, s.frontend.Address(), s.http.Address())
	if s.historyUnauthenticated != "" {
		s.logger.Warn("the history port listens on a non-loopback address without a cluster secret: anyone who reaches it can change any worker; set historyServer.clusterSecretFile on every host",
			zap.String("address", s.historyUnauthenticated))
	}
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
	s.dbLock.release()
	_ = s.logger.Sync()
	return err
}

// FrontendAddress is where SDKs connect.
func (s *Server) FrontendAddress() string { return s.frontend.Address() }

// HTTPAddress serves /metrics and /healthz.
func (s *Server) HTTPAddress() string { return s.http.Address() }

// StopTimeoutDefault bounds a graceful stop.
const StopTimeoutDefault = 10 * time.Second

// liveLog is the hub the frontend's watchers (WatchWorkers, the web page) subscribe to: the
// cluster's change log.
type liveLog struct{ hub *watch.Hub }

// newLiveLog returns the cluster's change log as this frontend sees it. A cluster of one
// (SQLite, a static membership of this host alone) has one log, this host's hub, and its
// watchers subscribe to it directly: a relay of it would keep a second copy of every worker's
// bookkeeping (about 200 bytes a worker) and redo it for every change. A frontend of a larger
// cluster merges every member's log into a hub of its own (frontend.WatchFanin).
func newLiveLog(lc fx.Lifecycle, local *watch.Hub, m membership.Monitor, router *history.Router, ts clock.TimeSource, logger *zap.Logger) liveLog {
	if static, ok := m.(*membership.Static); ok && len(static.Members()) == 1 {
		return liveLog{local}
	}
	f := frontend.NewWatchFanin(watch.NewHub(watch.Options{TimeSource: ts}), local, m, router.ConnForHost, logger)
	lc.Append(fx.StartStopHook(f.Start, f.Stop))
	return liveLog{f.Hub()}
}
