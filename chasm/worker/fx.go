package worker

import (
	"context"

	"github.com/uber-go/tally/v4"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/vigilhq/vigil/chasm"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/history"
)

// Module plugs worker liveness into a history host: the library, the WorkerHistoryService
// handler, and both ends of activity rescheduling. The receiving end is whatever
// RescheduleReceiver the app provides; NotFoundRescheduler until the activity component
// replaces it (fx.Decorate).
var Module = fx.Module("worker",
	fx.Provide(
		func(dc *dynamicconfig.Collection, cfg history.Config) *Config { return NewConfig(dc, cfg.ShardCount()) },
		func(r *history.Router) ActivityRescheduler { return &RemoteRescheduler{Router: r} },
		func() RescheduleReceiver { return NotFoundRescheduler{} },
		func(lc fx.Lifecycle, dc *dynamicconfig.Collection, a *history.Admission, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Brake {
			b := NewBrake(NewBrakeConfig(dc), a, ts, scope.SubScope("worker"), logger.With(zap.String("component", "worker")))
			lc.Append(fx.StartStopHook(b.Start, b.Stop))
			return b
		},
		chasm.AsLibrary(func(p libraryParams) *Library {
			return NewLibrary(p.Config, p.Rescheduler, p.Scope.SubScope("worker"), p.Logger, WithExpiryBrake(p.Brake)).WithChangeSink(p.Changes)
		}),
		func(e *history.Engine, c *Config, ts clock.TimeSource, a *history.Admission, b *Brake, scope tally.Scope, logger *zap.Logger) *Handler {
			return NewHandler(e, c, ts, scope.SubScope("worker"), logger, WithAdmission(a), WithBrakeStatus(b))
		},
		history.AsService(func(h *Handler, receiver RescheduleReceiver) history.ServiceRegistration {
			return func(s grpc.ServiceRegistrar) {
				workerpb.RegisterWorkerHistoryServiceServer(s, h)
				workerpb.RegisterActivityReschedulerServiceServer(s, NewRescheduleServer(receiver))
			}
		}),
	),
)

// libraryParams are the library's dependencies; Changes (the live view's hub) is optional.
type libraryParams struct {
	fx.In
	Config      *Config
	Rescheduler ActivityRescheduler
	Scope       tally.Scope
	Logger      *zap.Logger
	Brake       *Brake
	Changes     ChangeSink `optional:"true"`
}

// RescheduleReceiver applies reschedule batches on the activities' own shard.
type RescheduleReceiver interface {
	ActivityRescheduler
}

// RemoteRescheduler sends a batch to the history host that owns its shard.
type RemoteRescheduler struct {
	Router *history.Router
}

// RescheduleActivities implements ActivityRescheduler.
func (r *RemoteRescheduler) RescheduleActivities(ctx context.Context, req *workerpb.RescheduleActivitiesRequest) (*workerpb.RescheduleActivitiesResponse, error) {
	conn, err := r.Router.ConnForShard(req.GetShardId())
	if err != nil {
		return nil, err
	}
	return workerpb.NewActivityReschedulerServiceClient(conn).RescheduleActivities(ctx, req)
}

// NewRescheduleServer serves ActivityReschedulerService with receiver.
func NewRescheduleServer(receiver RescheduleReceiver) workerpb.ActivityReschedulerServiceServer {
	return &rescheduleServer{receiver: receiver}
}

type rescheduleServer struct {
	workerpb.UnimplementedActivityReschedulerServiceServer
	receiver RescheduleReceiver
}

func (s *rescheduleServer) RescheduleActivities(ctx context.Context, req *workerpb.RescheduleActivitiesRequest) (*workerpb.RescheduleActivitiesResponse, error) {
	return s.receiver.RescheduleActivities(ctx, req)
}
