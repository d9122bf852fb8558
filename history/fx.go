package history

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks"
)

// ServiceGroup is the fx value group of ServiceRegistration values served by the history host.
const ServiceGroup = chasm.ServiceGroup

// ServerConfig is where the history gRPC server listens.
type ServerConfig struct {
	// Address defaults to 127.0.0.1:0 (a free port, reached through the Router). In a cluster
	// it must be fixed, and reachable from the other hosts (or see ClusterConfig.HistoryAddress).
	Address string `yaml:"address"`
	// ClusterSecretFile (first line) or ClusterSecretValue authenticates calls between hosts:
	// the server refuses a call without it, the Router sends it. Every host of a cluster
	// needs the same one. Empty: no check.
	ClusterSecretFile  string `yaml:"clusterSecretFile"`
	ClusterSecretValue string `yaml:"clusterSecret"`
}

// Module provides the durable *Engine (also as chasm.Engine), the history gRPC *Server with
// every registration of ServiceGroup, a *Router to it, and the cluster's membership.Monitor: a
// StoreMonitor when the store is shared (PostgreSQL), a membership.Static of this host
// otherwise. It needs a Config, a ServerConfig, persistence, tasks, a chasm.Registry, a
// clock.TimeSource, a *dynamicconfig.Collection, a *zap.Logger and a tally.Scope; a
// ClusterConfig is optional.
var Module = fx.Module("history",
	fx.Provide(
		newListenerFx,
		newMonitorFx,
		newEngineFx,
		func(e *Engine) chasm.Engine { return e },
		func(e *Engine) chasm.Lister { return e },
		func(c Config) chasm.ShardCount { return chasm.ShardCount(c.ShardCount()) },
		func(r *Router) chasm.ShardConnector { return r },
		newOverloadFx,
		func(c *overload.Controller) overload.Admitter { return c },
		func(c *overload.Controller) overload.Signal { return c },
		func(c *overload.Controller) overload.Pressure { return c },
		newServerFx,
		func() *LocalMembership { return &LocalMembership{} },
		func() *StopMode { return &StopMode{} },
		NewLocalConn,
		newRouterFx,
	),
	// Nothing in the host depends on the server: ask for it so that it exists and serves.
	fx.Invoke(func(*Server) {}),
	// Group commit waits for the writes of admitted calls to batch them (PostgreSQL's
	// commit_siblings): under load, one commit for many heartbeats instead of a few.
	fx.Invoke(func(c *persistence.GroupCommitter, o *overload.Controller) { c.ExpectWritesFrom(o.WritersInFlight) }),
)

// StopMode lets a test stop a host as a crash would look to the others: no shard handoff, no
// membership leave.
type StopMode struct{ crash atomic.Bool }

// Crash makes the next stop leave shards and membership for the others to take over.
func (m *StopMode) Crash() { m.crash.Store(true) }

// Crashed says whether Crash was called.
func (m *StopMode) Crashed() bool { return m.crash.Load() }

// historyListener is the history server's socket, opened before anything else so that the
// membership can advertise its address.
type historyListener struct{ net.Listener }

func newListenerFx(cfg ServerConfig) (*historyListener, error) {
	address := cfg.Address
	if address == "" {
		address = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("history: listen on %s: %w", address, err)
	}
	return &historyListener{lis}, nil
}

type monitorParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    Config
	Cluster   ClusterConfig `optional:"true"`
	Store     persistence.Store
	Listener  *historyListener
	StopMode  *StopMode
	Overload  *overload.Controller
	Logger    *zap.Logger
	Scope     tally.Scope
}

func newMonitorFx(p monitorParams) (membership.Monitor, error) {
	cfg, err := p.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	self := membership.Host{
		ID:              cmp.Or(p.Cluster.HostID, cfg.HostID),
		HistoryAddress:  cmp.Or(p.Cluster.HistoryAddress, p.Listener.Addr().String()),
		FrontendAddress: p.Cluster.FrontendAddress,
	}
	store, shared := p.Store.(persistence.MembershipStore)
	if !shared {
		return membership.NewStatic(self), nil
	}
	m, err := NewStoreMonitor(store, p.Cluster, self, p.Logger, p.Scope.SubScope("history"))
	if err != nil {
		return nil, err
	}
	m.SetLoadExchange(p.Overload)
	stopHooks := installTestHooks(m, p.Logger)
	p.Lifecycle.Append(fx.Hook{
		OnStart: m.Start,
		OnStop: func(ctx context.Context) error {
			stopHooks()
			m.Stop(ctx, !p.StopMode.crash.Load())
			return nil
		},
	})
	return m, nil
}

type engineParams struct {
	fx.In
	Lifecycle     fx.Lifecycle
	Config        Config
	Registry      *chasm.Registry
	Store         persistence.Store
	Committer     *persistence.GroupCommitter
	Scheduler     *tasks.Scheduler
	TimeSource    clock.TimeSource
	DynamicConfig *dynamicconfig.Collection
	Monitor       membership.Monitor
	StopMode      *StopMode
	Overload      *overload.Controller
	Logger        *zap.Logger
	Scope         tally.Scope
}

func newEngineFx(p engineParams) (*Engine, error) {
	cfg := p.Config
	cfg.HostID = p.Monitor.Self().ID
	e, err := NewEngine(EngineParams{
		Config: cfg, Registry: p.Registry, Store: p.Store, Committer: p.Committer, Scheduler: p.Scheduler,
		TimeSource: p.TimeSource, DynamicConfig: p.DynamicConfig, Logger: p.Logger, MetricsScope: p.Scope,
		Membership: p.Monitor,
		YieldToCalls: func(ctx context.Context) {
			p.Overload.YieldToCalls(ctx, dynamicconfig.OutboundYieldMax.Get(p.DynamicConfig)())
		},
	})
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: e.Start,
		OnStop: func(context.Context) error {
			if p.StopMode.crash.Load() {
				e.Abandon()
			} else {
				e.Stop()
			}
			return nil
		},
	})
	return e, nil
}

type serverParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Config     ServerConfig
	Listener   *historyListener
	Services   []ServiceRegistration `group:"history.services"`
	Membership *LocalMembership
	Monitor    membership.Monitor
	Local      *LocalConn
	Router     *Router
	Logger     *zap.Logger
	// The engine must serve before the server accepts calls, and stop after it stops.
	Engine *Engine
}

func newServerFx(p serverParams) (*Server, error) {
	secret, err := p.Config.ClusterSecret()
	if err != nil {
		return nil, err
	}
	s := NewServerOnListener(p.Listener.Listener, p.Services, p.Logger, WithClusterSecret(secret), WithRelay(p.Router))
	p.Membership.SetAddress(p.Monitor.Self().HistoryAddress)
	for _, register := range p.Services {
		register(p.Local)
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error { s.Start(); return nil },
		OnStop:  func(ctx context.Context) error { s.Stop(ctx); return nil },
	})
	return s, nil
}

// newRouterFx depends on the membership, not on the server or engine, so that libraries can
// call history through it without a dependency cycle (library → registry → engine → server).
func newRouterFx(lc fx.Lifecycle, cfg Config, serverCfg ServerConfig, m membership.Monitor, local *LocalConn, scope tally.Scope, logger *zap.Logger) (*Router, error) {
	secret, err := serverCfg.ClusterSecret()
	if err != nil {
		return nil, err
	}
	r := NewRouter(cfg.ShardCount(), NewMonitorMembership(cfg.ShardCount(), m),
		WithLocalConn(local, func() string { return m.Self().HistoryAddress }),
		WithMetricsScope(scope.SubScope("history")), WithRouterClusterSecret(secret), WithRouterLogger(logger.Named("router")))
	lc.Append(fx.StopHook(r.Close))
	return r, nil
}

// AsService annotates a constructor of a ServiceRegistration for ServiceGroup.
func AsService(constructor any) any { return chasm.AsService(constructor) }
