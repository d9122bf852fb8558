package history

import (
	"context"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks"
)

// ServiceGroup is the fx value group of ServiceRegistration values served by the history host.
const ServiceGroup = "history.services"

// ServerConfig is where the history gRPC server listens.
type ServerConfig struct {
	// Address defaults to 127.0.0.1:0 (a free port, reached through the Router).
	Address string `yaml:"address"`
}

// Module provides the durable *Engine (also as chasm.Engine), the history gRPC *Server with
// every registration of ServiceGroup, and a *Router to it. It needs a Config, a ServerConfig,
// persistence, tasks, a chasm.Registry, a clock.TimeSource, a *dynamicconfig.Collection, a
// *zap.Logger and a tally.Scope.
var Module = fx.Module("history",
	fx.Provide(
		newEngineFx,
		func(e *Engine) chasm.Engine { return e },
		newServerFx,
		func() *LocalMembership { return &LocalMembership{} },
		NewLocalConn,
		newRouterFx,
		func(dc *dynamicconfig.Collection, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Admission {
			return NewAdmission(NewAdmissionConfig(dc), ts, scope.SubScope("history"), logger)
		},
	),
	// Nothing in the host depends on the server: ask for it so that it exists and serves.
	fx.Invoke(func(*Server) {}),
)

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
	Logger        *zap.Logger
	Scope         tally.Scope
}

func newEngineFx(p engineParams) (*Engine, error) {
	e, err := NewEngine(EngineParams{
		Config: p.Config, Registry: p.Registry, Store: p.Store, Committer: p.Committer, Scheduler: p.Scheduler,
		TimeSource: p.TimeSource, DynamicConfig: p.DynamicConfig, Logger: p.Logger, MetricsScope: p.Scope,
	})
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.Hook{
		OnStart: e.Start,
		OnStop:  func(context.Context) error { e.Stop(); return nil },
	})
	return e, nil
}

type serverParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Config     ServerConfig
	Services   []ServiceRegistration `group:"history.services"`
	Membership *LocalMembership
	Local      *LocalConn
	Logger     *zap.Logger
	// The engine must serve before the server accepts calls, and stop after it stops.
	Engine *Engine
}

func newServerFx(p serverParams) (*Server, error) {
	address := p.Config.Address
	if address == "" {
		address = "127.0.0.1:0"
	}
	s, err := NewServer(address, p.Services, p.Logger)
	if err != nil {
		return nil, err
	}
	p.Membership.SetAddress(s.Address())
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
func newRouterFx(lc fx.Lifecycle, cfg Config, m *LocalMembership, local *LocalConn) *Router {
	r := NewRouter(cfg.ShardCount(), m, WithLocalConn(local, m.Address))
	lc.Append(fx.StopHook(r.Close))
	return r
}

// AsService annotates a constructor of a ServiceRegistration for ServiceGroup.
func AsService(constructor any) any {
	return fx.Annotate(constructor, fx.ResultTags(`group:"`+ServiceGroup+`"`))
}
