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
	"github.com/vigilhq/vigil/frontend"
	"github.com/vigilhq/vigil/frontend/namespace"
	"github.com/vigilhq/vigil/history"
	"github.com/vigilhq/vigil/matching"
)

// activityModule runs standalone activities: matching's in-memory queues, the Activity
// component, and the adapters between them.
var activityModule = fx.Options(
	fx.Provide(
		func(lc fx.Lifecycle, ts clock.TimeSource, logger *zap.Logger, scope tally.Scope) *matching.Matcher {
			m := matching.New(ts, matching.Options{}, logger, scope.SubScope("matching"))
			lc.Append(fx.StartStopHook(m.Start, m.Stop))
			return m
		},
		func(m *matching.Matcher) activity.Dispatcher { return matchingDispatcher{m} },
		func(m *matching.Matcher) activity.CommandSender { return matchingCommandSender{m} },
	),
	activity.Module,
	// Matching forgets its queues on a restart; history does not. Once the engine serves, hand
	// matching every attempt it had been given.
	fx.Invoke(func(lc fx.Lifecycle, e *history.Engine, r *chasm.Registry, m *matching.Matcher, ns *namespace.Registry, logger *zap.Logger) {
		lc.Append(fx.StartHook(func(ctx context.Context) error {
			n, err := activity.RequeueDispatched(ctx, e, r, namespaceIDs(ns), matchingDispatcher{m})
			if err != nil {
				return fmt.Errorf("re-queue dispatched activities: %w", err)
			}
			if n > 0 {
				logger.Info("re-queued dispatched activities in matching", zap.Int("activities", n))
			}
			return nil
		}))
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

// matchingDispatcher queues activity tasks in the in-process matcher.
type matchingDispatcher struct{ m *matching.Matcher }

func (d matchingDispatcher) AddActivityTask(_ context.Context, ref activity.ActivityTaskRef) error {
	err := d.m.AddActivityTask(matching.ActivityTaskRef{
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
type matchingCommandSender struct{ m *matching.Matcher }

func (s matchingCommandSender) SendCancelActivity(_ context.Context, namespaceID, controlQueue string, taskToken []byte) error {
	// The command's ID derives from the token, so a retried send is deduplicated by matching.
	cmd, err := frontend.NewCancelActivityCommand(taskToken)
	if err != nil {
		return err
	}
	return s.m.AddWorkerCommand(namespaceID, controlQueue, cmd)
}
