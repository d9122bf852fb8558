package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/membership"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/matching"
)

// activityModule runs standalone activities: matching's in-memory queues, the Activity
// component, and the adapters between them.
var activityModule = fx.Options(
	matchingModule,
	fx.Provide(
		func(m *matching.Client) activity.Dispatcher { return matchingDispatcher{m} },
		func(m *matching.Client) activity.CommandSender { return matchingCommandSender{m} },
	),
	activity.Module,
	// Matching forgets its queues on a restart, and a queue's owner changes with the cluster's
	// members; history forgets nothing. Once the engine serves, and again after every change of
	// members, hand matching every attempt it had been given, for the shards this host owns.
	fx.Invoke(func(lc fx.Lifecycle, e *history.Engine, r *chasm.Registry, m *matching.Client, ns *namespace.Registry,
		monitor membership.Monitor, cfg history.Config, ts clock.TimeSource, logger *zap.Logger, scope tally.Scope,
	) {
		requeuer := activity.NewMembershipRequeuer(activity.MembershipRequeuerParams{
			Lister: e, Registry: r, NamespaceIDs: func() []string { return namespaceIDs(ns) }, NumShards: cfg.ShardCount(),
			Monitor: monitor, Dispatcher: matchingDispatcher{m}, TimeSource: ts, Logger: logger, Scope: scope.SubScope("activity"),
		})
		lc.Append(fx.Hook{
			OnStart: func(ctx context.Context) error {
				requeuer.Start()
				n, err := activity.RequeueDispatchedWhere(ctx, e, r, namespaceIDs(ns), activity.OwnedShards(cfg.ShardCount(), monitor), matchingDispatcher{m})
				activity.ActivityAttemptsRequeued.With(scope.SubScope("activity"), metrics.KindTag("start")).Inc(int64(n))
				var refused *activity.RequeueError
				if errors.As(err, &refused) {
					// Another host's queue may be unreachable while members settle: not a
					// reason to refuse to start. The requeuer tries again.
					logger.Warn("re-queue of dispatched activities incomplete; retrying", zap.Error(err))
					requeuer.Retry()
				} else if err != nil {
					return fmt.Errorf("re-queue dispatched activities: %w", err)
				}
				if n > 0 {
					logger.Info("re-queued dispatched activities in matching", zap.Int("activities", n))
				}
				return nil
			},
			OnStop: func(context.Context) error { requeuer.Stop(); return nil },
		})
	}),
)

func namespaceIDs(ns *namespace.Registry) []string {
	var out []string
	for _, name := range ns.Names() {
		if n, err := ns.GetByName(name); err == nil {
			out = append(out, n.ID)
		}
	}
	return out
}

// matchingDispatcher queues activity tasks on their queue's owner.
type matchingDispatcher struct{ m *matching.Client }

func (d matchingDispatcher) AddActivityTask(ctx context.Context, ref activity.ActivityTaskRef) error {
	err := d.m.AddActivityTask(ctx, matching.ActivityTaskRef{
		NamespaceID: ref.NamespaceID, TaskQueue: ref.TaskQueue, ActivityID: ref.ActivityID, RunID: ref.RunID,
		Stamp: ref.Stamp, ScheduledTime: ref.ScheduledTime,
	})
	if errors.Is(err, matching.ErrBacklogFull) {
		// The dispatch task retries with backoff: the activity waits, it is not lost.
		return serviceerror.NewResourceExhausted(0, err.Error())
	}
	return err
}

// matchingCommandSender puts a CancelActivity worker command on the worker's control queue,
// encoded as the frontend delivers it to the SDK's command poller.
type matchingCommandSender struct{ m *matching.Client }

func (s matchingCommandSender) SendCancelActivity(ctx context.Context, namespaceID, controlQueue string, taskToken []byte) error {
	// The command's ID derives from the token, so a retried send is deduplicated by matching.
	cmd, err := frontend.NewCancelActivityCommand(taskToken)
	if err != nil {
		return err
	}
	return s.m.AddWorkerCommand(ctx, namespaceID, controlQueue, cmd)
}
