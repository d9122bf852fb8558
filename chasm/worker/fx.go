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
	"github.com/vigilhq/vigil/common/overload"
	"github.com/vigilhq/vigil/dynamicconfig"
)

// Module plugs worker liveness into a history host: the library, the WorkerHistoryService
// handler, and both ends of activity rescheduling. The receiving end is whatever
// RescheduleReceiver the app provides; NotFoundRescheduler until the activity component
// replaces it (fx.Decorate).
var Module = fx.Module("worker",
	fx.Provide(
		func(dc *dynamicconfig.Collection, shards chasm.ShardCount) *Config {
			return NewConfig(dc, int32(shards))
		},
		func(r chasm.ShardConnector) ActivityRescheduler { return &RemoteRescheduler{Router: r} },
		NewStateCounts,
		func() RescheduleReceiver { return NotFoundRescheduler{} },
		func(lc fx.Lifecycle, dc *dynamicconfig.Collection, a overload.Signal, ts clock.TimeSource, scope tally.Scope, logger *zap.Logger) *Brake {
			b := NewBrake(NewBrakeConfig(dc), a, ts, scope.SubScope("worker"), logger.With(zap.String("component", "worker")))
			lc.Append(fx.StartStopHook(b.Start, b.Stop))
			return b
		},
		chasm.AsLibrary(func(p libraryParams) *Library {
			return NewLibrary(p.Config, p.Rescheduler, p.Scope.SubScope("worker"), p.Logger, WithExpiryBrake(p.Brake), WithStateCounts(p.Counts)).WithChangeSink(p.Changes)
		}),
		func(e chasm.Engine, l chasm.Lister, c *Config, ts clock.TimeSource, a overload.Admitter, b *Brake, scope tally.Scope, logger *zap.Logger) *Handler {
			return NewHandler(listingEngine{e, l}, c, ts, scope.SubScope("worker"), logger, WithAdmission(a), WithBrakeStatus(b))
		},
		chasm.AsService(func(h *Handler, receiver RescheduleReceiver) chasm.ServiceRegistration {
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
	Counts      *StateCounts
	Changes     ChangeSink `optional:"true"`
}

// RescheduleReceiver applies reschedule batches on the activities' own shard.
type RescheduleReceiver interface {
	ActivityRescheduler
}

// listingEngine is the host's engine and lister as one Engine (the host provides them apart).
type listingEngine struct {
	chasm.Engine
	chasm.Lister
}

// RemoteRescheduler sends a batch to the history host that owns its shard.
type RemoteRescheduler struct {
	Router chasm.ShardConnector
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
