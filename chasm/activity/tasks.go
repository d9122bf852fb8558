package activity

import (
	"context"
	"slices"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
)

// DispatchTaskExecutor hands an attempt to matching: a new activity's, a retry's, a
// re-dispatch's, and a rescheduled one's when no direct hand-off was made (see
// Handler.RescheduleActivities).
type DispatchTaskExecutor struct {
	dispatcher Dispatcher
	config     *Config
	scope      tally.Scope
	logger     *zap.Logger
}

// Validate holds while the attempt with the task's stamp waits for a worker and has not been
// handed to matching yet.
func (e *DispatchTaskExecutor) Validate(_ chasm.Context, a *Activity, _ chasm.TaskAttributes, t *activitypb.DispatchTask) (bool, error) {
	return a.Status == statusScheduled && a.Stamp == t.Stamp && a.DispatchedStamp < t.Stamp, nil
}

// Execute queues the attempt in matching, then records that it did. A crash between the two
// queues it again on redelivery, which is harmless: only the first poll can start it.
func (e *DispatchTaskExecutor) Execute(ctx context.Context, ref chasm.ComponentRef, _ chasm.TaskAttributes, t *activitypb.DispatchTask) error {
	engine := chasm.EngineFromContext(ctx)
	taskRef, err := chasm.ReadComponent(ctx, engine, ref, func(_ chasm.Context, a *Activity) (*ActivityTaskRef, error) {
		if a.Status != statusScheduled || a.Stamp != t.Stamp {
			return nil, nil
		}
		taskRef := activityTaskRef(ref.Key, a)
		return &taskRef, nil
	})
	if err != nil || taskRef == nil {
		return err
	}
	if err := e.dispatcher.AddActivityTask(ctx, *taskRef); err != nil {
		return err
	}
	_, err = chasm.UpdateComponent(ctx, engine, ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		if a.Status == statusScheduled && a.Stamp == t.Stamp {
			recordDispatch(a, mctx, e.config.redispatchAfter(a.Namespace, a.DispatchCount+1))
		} else if a.DispatchedStamp < t.Stamp {
			// A fast poll may have started the attempt already; the stamp is recorded regardless.
			a.DispatchedStamp = t.Stamp
		}
		if a.Stamp == t.Stamp && a.RescheduledTime != nil {
			ActivityRescheduleDispatchLatency.With(e.scope).Record(mctx.Now().Sub(a.RescheduledTime.AsTime()))
			a.RescheduledTime = nil
		}
		return struct{}{}, nil
	})
	return err
}

// RedispatchTaskExecutor queues a waiting attempt in matching again, in case matching lost it:
// matching keeps tasks in memory only. A duplicate is harmless (one poll starts the stamp, the
// other is refused), and matching may drop a ref it already holds.
type RedispatchTaskExecutor struct{}

// Validate holds while the attempt still waits, was dispatched, and this is its latest timer.
func (e *RedispatchTaskExecutor) Validate(_ chasm.Context, a *Activity, attrs chasm.TaskAttributes, t *activitypb.RedispatchTask) (bool, error) {
	return a.Status == statusScheduled && a.Stamp == t.Stamp && a.DispatchedStamp == t.Stamp &&
		a.RedispatchTime != nil && a.RedispatchTime.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute marks the attempt undispatched and dispatches it again.
func (e *RedispatchTaskExecutor) Execute(ctx chasm.MutableContext, a *Activity, _ chasm.TaskAttributes, t *activitypb.RedispatchTask) error {
	a.DispatchedStamp = 0
	a.RedispatchTime = nil
	ctx.AddTask(chasm.TaskAttributes{Destination: DispatchDestination}, &activitypb.DispatchTask{Stamp: t.Stamp})
	return nil
}

// ScheduleToStartTimeoutTaskExecutor closes an activity whose attempt waited too long for a
// worker. Temporal never retries this timeout: a retry would wait in the same queue.
type ScheduleToStartTimeoutTaskExecutor struct {
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds while the attempt it was set for still waits for a worker.
func (e *ScheduleToStartTimeoutTaskExecutor) Validate(_ chasm.Context, a *Activity, _ chasm.TaskAttributes, t *activitypb.ScheduleToStartTimeoutTask) (bool, error) {
	return a.Status == statusScheduled && a.Stamp == t.Stamp, nil
}

// Execute times the activity out.
func (e *ScheduleToStartTimeoutTaskExecutor) Execute(ctx chasm.MutableContext, a *Activity, _ chasm.TaskAttributes, _ *activitypb.ScheduleToStartTimeoutTask) error {
	kind := enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
	if err := TransitionTimedOut.Apply(a, ctx, EventTimedOut{Failure: timeoutFailure(kind, a, a.LastFailure)}); err != nil {
		return err
	}
	recordTimeout(e.scope, e.logger, ctx, a, kind)
	return nil
}

// StartToCloseTimeoutTaskExecutor fails an attempt that ran too long; it is retried per policy.
type StartToCloseTimeoutTaskExecutor struct {
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds while the attempt it was set for is still running and its deadline is the
// task's time (UpdateActivityExecutionOptions moves it).
func (e *StartToCloseTimeoutTaskExecutor) Validate(_ chasm.Context, a *Activity, attrs chasm.TaskAttributes, t *activitypb.StartToCloseTimeoutTask) (bool, error) {
	return a.Status == statusStarted && a.Stamp == t.Stamp && startToCloseDeadline(a).Equal(attrs.ScheduledTime), nil
}

// Execute fails the attempt with a StartToClose timeout.
func (e *StartToCloseTimeoutTaskExecutor) Execute(ctx chasm.MutableContext, a *Activity, _ chasm.TaskAttributes, _ *activitypb.StartToCloseTimeoutTask) error {
	return attemptTimedOut(e.scope, e.logger, ctx, a, enumspb.TIMEOUT_TYPE_START_TO_CLOSE)
}

// HeartbeatTimeoutTaskExecutor fails an attempt that stopped heartbeating; it is retried per
// policy.
type HeartbeatTimeoutTaskExecutor struct {
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds only for the timer of the latest heartbeat of the attempt it was set for:
// every heartbeat moves the deadline (and replaces the timer).
func (e *HeartbeatTimeoutTaskExecutor) Validate(_ chasm.Context, a *Activity, attrs chasm.TaskAttributes, t *activitypb.HeartbeatTimeoutTask) (bool, error) {
	return a.Status == statusStarted && a.Stamp == t.Stamp && heartbeatDeadline(a).Equal(attrs.ScheduledTime), nil
}

// Execute fails the attempt with a Heartbeat timeout.
func (e *HeartbeatTimeoutTaskExecutor) Execute(ctx chasm.MutableContext, a *Activity, _ chasm.TaskAttributes, _ *activitypb.HeartbeatTimeoutTask) error {
	return attemptTimedOut(e.scope, e.logger, ctx, a, enumspb.TIMEOUT_TYPE_HEARTBEAT)
}

// ScheduleToCloseTimeoutTaskExecutor closes an activity that ran out of its overall time,
// whatever attempt it is on.
type ScheduleToCloseTimeoutTaskExecutor struct {
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds while the activity is open (its expiration never moves).
func (e *ScheduleToCloseTimeoutTaskExecutor) Validate(_ chasm.Context, a *Activity, attrs chasm.TaskAttributes, _ *activitypb.ScheduleToCloseTimeoutTask) (bool, error) {
	return !a.IsClosed() && a.ExpirationTime != nil && a.ExpirationTime.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute times the activity out.
func (e *ScheduleToCloseTimeoutTaskExecutor) Execute(ctx chasm.MutableContext, a *Activity, _ chasm.TaskAttributes, _ *activitypb.ScheduleToCloseTimeoutTask) error {
	kind := enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
	if err := TransitionTimedOut.Apply(a, ctx, EventTimedOut{Failure: timeoutFailure(kind, a, a.LastFailure)}); err != nil {
		return err
	}
	recordTimeout(e.scope, e.logger, ctx, a, kind)
	return nil
}

func attemptTimedOut(scope tally.Scope, logger *zap.Logger, ctx chasm.MutableContext, a *Activity, kind enumspb.TimeoutType) error {
	if err := failAttempt(a, ctx, timeoutFailure(kind, a, nil)); err != nil {
		return err
	}
	recordTimeout(scope, logger, ctx, a, kind)
	return nil
}

func recordTimeout(scope tally.Scope, logger *zap.Logger, ctx chasm.Context, a *Activity, kind enumspb.TimeoutType) {
	ActivitiesTimedOut.With(scope, metrics.KindTag(kind.String())).Inc(1)
	if a.IsClosed() {
		ActivitiesClosed.With(scope, metrics.StateTag(StatusName(a.Status))).Inc(1)
	} else {
		ActivityRetries.With(scope).Inc(1)
	}
	logger.Debug("activity timeout", activityFields(ctx.ExecutionKey(), a,
		zap.String("timeout-type", kind.String()), zap.String("status", StatusName(a.Status)))...)
}

// BindTaskExecutor binds a started attempt to the worker that took it, so that the worker's
// death reschedules it at once instead of after a timeout.
type BindTaskExecutor struct {
	binder WorkerBinder
	config *Config
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds while the attempt runs and its bind has not been answered, nor put off until
// its worker registers (RebindTask then adds another BindTask; binds are idempotent).
func (e *BindTaskExecutor) Validate(_ chasm.Context, a *Activity, _ chasm.TaskAttributes, t *activitypb.BindTask) (bool, error) {
	return a.Status == statusStarted && a.Stamp == t.Stamp && a.BindCheckedStamp < t.Stamp && a.RebindTime == nil, nil
}

// Execute binds, then acts on the answer. The attempt may have ended meanwhile; a binding made
// for an ended attempt is removed again.
func (e *BindTaskExecutor) Execute(ctx context.Context, ref chasm.ComponentRef, _ chasm.TaskAttributes, t *activitypb.BindTask) error {
	outcome, err := e.binder.BindActivity(ctx, ref.Key.NamespaceID, t.WorkerInstanceKey,
		Binding{ActivityID: ref.Key.BusinessID, RunID: ref.Key.RunID, Stamp: t.Stamp})
	if err != nil {
		return err
	}
	var lost lostAttempt
	_, err = chasm.UpdateComponent(ctx, chasm.EngineFromContext(ctx), ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		current := a.Status == statusStarted && a.Stamp == t.Stamp
		if !current {
			if outcome == BindOutcomeBound {
				dest, err := e.config.workerDestination(ref.Key.NamespaceID, t.WorkerInstanceKey)
				if err != nil {
					return struct{}{}, err
				}
				addUnbind(a, mctx, t.WorkerInstanceKey, t.Stamp, dest)
			}
			return struct{}{}, nil
		}
		if outcome == BindOutcomeWorkerUnknown {
			if at, ok := e.rebindAt(mctx, a); ok {
				// The worker has not registered yet: its poll came before its first heartbeat
				// (a worker starting into a backlog). Bind again once it has, or its death
				// would leave the attempt to its timeouts.
				a.RebindTime = timestamppb.New(at)
				mctx.AddTask(chasm.TaskAttributes{ScheduledTime: at}, &activitypb.RebindTask{Stamp: t.Stamp})
				return struct{}{}, nil
			}
		}
		a.BindCheckedStamp = t.Stamp
		a.RebindTime = nil
		switch outcome {
		case BindOutcomeBound:
			a.BoundStamp = t.Stamp
		case BindOutcomeWorkerNotActive:
			var err error
			if lost, err = loseWorker(a, mctx, "bind_refused", "the worker was no longer active when the attempt was bound to it", true, time.Time{}, nil); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if err != nil {
		return err
	}
	if lost != 0 {
		recordLost(e.scope, lost, "bind_refused")
		e.logger.Info("attempt bound to an inactive worker: taken back",
			tag.BusinessID(ref.Key.BusinessID), tag.RunID(ref.Key.RunID), tag.WorkerID(t.WorkerInstanceKey), zap.String("outcome", lost.String()))
	}
	return nil
}

// rebindAt is when to bind the current attempt again after its worker was unknown, and false
// once the worker has had activity.bindRegistrationWait since the attempt started to register:
// a worker whose heartbeats are off never does. The waits double: 250 ms, then the time since
// the start.
func (e *BindTaskExecutor) rebindAt(ctx chasm.Context, a *Activity) (time.Time, bool) {
	if a.StartedTime == nil {
		return time.Time{}, false
	}
	now, started := ctx.Now(), a.StartedTime.AsTime()
	until := started.Add(e.config.BindRegistrationWait(a.Namespace))
	if !now.Before(until) {
		return time.Time{}, false
	}
	at := now.Add(max(rebindFirstDelay, now.Sub(started)))
	if at.After(until) {
		at = until
	}
	return at, true
}

// RebindTaskExecutor binds the attempt again once its worker may have registered.
type RebindTaskExecutor struct{}

// Validate holds while the attempt runs unbound and this is its pending rebind.
func (e *RebindTaskExecutor) Validate(_ chasm.Context, a *Activity, attrs chasm.TaskAttributes, t *activitypb.RebindTask) (bool, error) {
	return a.Status == statusStarted && a.Stamp == t.Stamp && a.BindCheckedStamp < t.Stamp &&
		a.RebindTime != nil && a.RebindTime.AsTime().Equal(attrs.ScheduledTime), nil
}

// Execute adds the BindTask.
func (e *RebindTaskExecutor) Execute(ctx chasm.MutableContext, a *Activity, _ chasm.TaskAttributes, t *activitypb.RebindTask) error {
	a.RebindTime = nil
	ctx.AddTask(chasm.TaskAttributes{Destination: a.WorkerDestination},
		&activitypb.BindTask{Stamp: t.Stamp, WorkerInstanceKey: a.WorkerInstanceKey})
	return nil
}

// UnbindTaskExecutor removes an ended attempt's binding from its worker.
type UnbindTaskExecutor struct {
	binder WorkerBinder
	logger *zap.Logger
}

// Validate holds until the unbind has been delivered.
func (e *UnbindTaskExecutor) Validate(_ chasm.Context, a *Activity, _ chasm.TaskAttributes, t *activitypb.UnbindTask) (bool, error) {
	return pendingUnbindIndex(a, t.WorkerInstanceKey, t.Stamp) >= 0, nil
}

// Execute unbinds, then forgets the pending unbind.
func (e *UnbindTaskExecutor) Execute(ctx context.Context, ref chasm.ComponentRef, _ chasm.TaskAttributes, t *activitypb.UnbindTask) error {
	err := e.binder.UnbindActivity(ctx, ref.Key.NamespaceID, t.WorkerInstanceKey,
		Binding{ActivityID: ref.Key.BusinessID, RunID: ref.Key.RunID, Stamp: t.Stamp})
	if err != nil {
		return err
	}
	_, err = chasm.UpdateComponent(ctx, chasm.EngineFromContext(ctx), ref, func(_ chasm.MutableContext, a *Activity) (struct{}, error) {
		if i := pendingUnbindIndex(a, t.WorkerInstanceKey, t.Stamp); i >= 0 {
			a.PendingUnbinds = slices.Delete(a.PendingUnbinds, i, i+1)
		}
		return struct{}{}, nil
	})
	return err
}

func pendingUnbindIndex(a *Activity, workerInstanceKey string, stamp int64) int {
	return slices.IndexFunc(a.PendingUnbinds, func(p *activitypb.PendingUnbind) bool {
		return p.WorkerInstanceKey == workerInstanceKey && p.Stamp == stamp
	})
}

// CancelCommandTaskExecutor sends a CancelActivity worker command. Best effort: after
// activity.cancelCommandMaxAttempts failed deliveries it is dropped, because heartbeats still
// answer cancel_requested and the activity's timeouts still apply.
type CancelCommandTaskExecutor struct {
	sender CommandSender
	config *Config
	scope  tally.Scope
	logger *zap.Logger
}

// Validate holds until the command was delivered or given up.
func (e *CancelCommandTaskExecutor) Validate(_ chasm.Context, a *Activity, _ chasm.TaskAttributes, t *activitypb.CancelCommandTask) (bool, error) {
	return pendingCancelIndex(a, t.Stamp) >= 0, nil
}

// Execute sends the command and records the delivery, or the failure: a failure below the
// limit is returned so the outbound queue retries it with backoff.
func (e *CancelCommandTaskExecutor) Execute(ctx context.Context, ref chasm.ComponentRef, _ chasm.TaskAttributes, t *activitypb.CancelCommandTask) error {
	sendErr := e.sender.SendCancelActivity(ctx, ref.Key.NamespaceID, t.ControlQueue, t.TaskToken)
	dropped := false
	_, err := chasm.UpdateComponent(ctx, chasm.EngineFromContext(ctx), ref, func(_ chasm.MutableContext, a *Activity) (struct{}, error) {
		i := pendingCancelIndex(a, t.Stamp)
		if i < 0 {
			return struct{}{}, nil
		}
		if sendErr != nil {
			a.PendingCancelCommands[i].FailedAttempts++
			if int(a.PendingCancelCommands[i].FailedAttempts) < e.config.CancelCommandMaxAttempts(a.Namespace) {
				return struct{}{}, nil
			}
			dropped = true
		}
		a.PendingCancelCommands = slices.Delete(a.PendingCancelCommands, i, i+1)
		return struct{}{}, nil
	})
	if err != nil {
		return err
	}
	if dropped {
		ActivityCancelCommandsDropped.With(e.scope).Inc(1)
		e.logger.Warn("CancelActivity worker command dropped after repeated failures",
			tag.BusinessID(ref.Key.BusinessID), tag.RunID(ref.Key.RunID), zap.String("control-queue", t.ControlQueue), tag.Error(sendErr))
		return nil
	}
	return sendErr
}

func pendingCancelIndex(a *Activity, stamp int64) int {
	return slices.IndexFunc(a.PendingCancelCommands, func(p *activitypb.PendingCancelCommand) bool { return p.Stamp == stamp })
}

func (l lostAttempt) String() string {
	switch l {
	case lostRescheduled:
		return "RESCHEDULED"
	case lostFailed:
		return "FAILED"
	case lostCanceled:
		return "CANCELED"
	case lostPaused:
		return "PAUSED"
	}
	return ""
}

// recordLost counts an attempt taken from a lost worker; kind says how the loss was learnt.
func recordLost(scope tally.Scope, lost lostAttempt, kind string) {
	ActivityReschedules.With(scope, metrics.KindTag(kind), metrics.StateTag(lost.String())).Inc(1)
	switch lost {
	case lostFailed:
		ActivitiesClosed.With(scope, metrics.StateTag(StatusName(statusFailed))).Inc(1)
	case lostCanceled:
		ActivitiesClosed.With(scope, metrics.StateTag(StatusName(statusCanceled))).Inc(1)
	}
}

func activityFields(key chasm.ExecutionKey, a *Activity, extra ...zap.Field) []zap.Field {
	return append([]zap.Field{
		tag.NamespaceID(key.NamespaceID), tag.BusinessID(key.BusinessID), tag.RunID(key.RunID),
		tag.Attempt(a.Attempt), zap.Int64("stamp", a.Stamp),
	}, extra...)
}
