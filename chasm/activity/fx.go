package activity

import (
	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// Module plugs standalone activities into a history host: the library, the
// ActivityHistoryService handler, and the handler as the receiving end of the Worker
// component's reschedules (it replaces worker.NotFoundRescheduler).
//
// The app provides a Dispatcher and a CommandSender (matching, through small adapters in the
// server). The WorkerBinder is RemoteWorkerBinder unless the app decorates it. The Handler gets
// the same Dispatcher, to queue rescheduled attempts directly (Handler.RescheduleActivities).
//
// Module is a plain fx.Options, not an fx.Module, on purpose: the decoration of
// worker.RescheduleReceiver has to sit at the app's root to reach the worker module, because
// an fx.Decorate applies only to its own module and the modules inside it.
var Module = fx.Options(
	fx.Module("activity",
		fx.Provide(
			func(dc *dynamicconfig.Collection, shards chasm.ShardCount) *Config {
				return NewConfig(dc, int32(shards))
			},
			func(r chasm.ShardConnector) WorkerBinder { return &RemoteWorkerBinder{Router: r} },
			chasm.AsLibrary(func(c *Config, d Dispatcher, b WorkerBinder, s CommandSender, scope tally.Scope, logger *zap.Logger) *Library {
				return NewLibrary(c, d, b, s, scope.SubScope("activity"), logger)
			}),
			func(e chasm.Engine, c *Config, d Dispatcher, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Handler {
				return NewHandler(e, c, scope.SubScope("activity"), logger, WithDispatcher(d), WithTimeSource(ts))
			},
			chasm.AsService(func(h *Handler) chasm.ServiceRegistration {
				return func(s grpc.ServiceRegistrar) { activitypb.RegisterActivityHistoryServiceServer(s, h) }
			}),
		),
	),
	fx.Decorate(func(_ worker.RescheduleReceiver, h *Handler) worker.RescheduleReceiver { return h }),
)
