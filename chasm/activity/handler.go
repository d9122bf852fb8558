package activity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uber-go/tally/v4"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/log/tag"
	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/common/visibility"
)

// Handler is the history side of standalone activities (ActivityHistoryService), and the
// receiving end of the Worker component's reschedules (worker.RescheduleReceiver).
type Handler struct {
	activitypb.UnimplementedActivityHistoryServiceServer

	engine chasm.Engine
	config *Config
	// dispatcher, when set, receives rescheduled attempts straight after their transaction
	// commits (see RescheduleActivities); nil sends them through a DispatchTask each.
	dispatcher Dispatcher
	timeSource clock.TimeSource
	scope      tally.Scope
	logger     *zap.Logger
}

var (
	_ activitypb.ActivityHistoryServiceServer = (*Handler)(nil)
	_ worker.RescheduleReceiver               = (*Handler)(nil)
)

// HandlerOption configures a Handler.
type HandlerOption func(*Handler)

// WithDispatcher lets RescheduleActivities queue each new attempt in matching itself, as soon
// as the attempt's transaction commits, instead of through one DispatchTask per attempt
// (RescheduleActivities says why that is safe). It must be the library's Dispatcher: the
// in-process matching that RequeueDispatched refills after a restart.
func WithDispatcher(d Dispatcher) HandlerOption { return func(h *Handler) { h.dispatcher = d } }

// WithTimeSource sets the clock re-dispatch latency is measured with (default: the real one).
func WithTimeSource(ts clock.TimeSource) HandlerOption { return func(h *Handler) { h.timeSource = ts } }

// NewHandler returns the handler. Without WithDispatcher, rescheduled attempts are dispatched
// by DispatchTasks, like every other attempt.
func NewHandler(engine chasm.Engine, config *Config, scope tally.Scope, logger *zap.Logger, opts ...HandlerOption) *Handler {
	h := &Handler{engine: engine, config: config, scope: scope, logger: logger.With(zap.String("component", "activity"))}
	for _, opt := range opts {
		opt(h)
	}
	if h.timeSource == nil {
		h.timeSource = clock.NewRealTimeSource()
	}
	return h
}

// StartActivity starts a run of the activity ID. A retry of the same start (same request_id)
// returns the run it created; a start that conflicts with an existing run is AlreadyExists
// with ActivityExecutionAlreadyStartedFailure details.
func (h *Handler) StartActivity(ctx context.Context, req *activitypb.StartActivityRequest) (*activitypb.StartActivityResponse, error) {
	normalized, startDelay, err := normalizeStart(req)
	if err != nil {
		return nil, err
	}
	key := chasm.ExecutionKey{NamespaceID: req.GetNamespaceId(), BusinessID: req.GetActivityId()}
	runID, deduplicated, err := h.runStartedBy(ctx, key, req.GetRequestId())
	if err != nil {
		return nil, err
	}
	if deduplicated {
		return &activitypb.StartActivityResponse{RunId: runID}, nil
	}
	res, err := chasm.StartExecution(ctx, h.engine, key, func(mctx chasm.MutableContext) (*Activity, error) {
		a := &Activity{ActivityState: &activitypb.ActivityState{}}
		return a, TransitionScheduled.Apply(a, mctx, EventScheduled{Request: normalized, StartDelay: startDelay})
	}, startOptions(req))
	var already *chasm.ExecutionAlreadyStartedError
	if errors.As(err, &already) {
		// A concurrent retry of this very start may have won the race.
		if runID, ok, _ := h.runStartedBy(ctx, key, req.GetRequestId()); ok {
			return &activitypb.StartActivityResponse{RunId: runID}, nil
		}
		existingRequestID, _ := h.requestIDOf(ctx, key, already.CurrentRunID)
		return nil, serviceerror.NewActivityExecutionAlreadyStarted(
			fmt.Sprintf("activity %s is already started (run %s)", req.GetActivityId(), already.CurrentRunID),
			existingRequestID, already.CurrentRunID)
	}
	if err != nil {
		return nil, err
	}
	if res.Created {
		ActivitiesStarted.With(h.scope).Inc(1)
	}
	return &activitypb.StartActivityResponse{RunId: res.RunID, Started: res.Created}, nil
}

// runStartedBy returns the current run if the start with requestID created it.
func (h *Handler) runStartedBy(ctx context.Context, key chasm.ExecutionKey, requestID string) (string, bool, error) {
	if requestID == "" {
		return "", false, nil
	}
	ref, err := chasm.NewRef[*Activity](h.engine, key)
	if err != nil {
		return "", false, err
	}
	runID, err := chasm.ReadComponent(ctx, h.engine, ref, func(rctx chasm.Context, a *Activity) (string, error) {
		if a.RequestId != requestID {
			return "", nil
		}
		return rctx.ExecutionKey().RunID, nil
	})
	if isNotFound(err) {
		return "", false, nil
	}
	return runID, runID != "", err
}

func (h *Handler) requestIDOf(ctx context.Context, key chasm.ExecutionKey, runID string) (string, error) {
	key.RunID = runID
	ref, err := chasm.NewRef[*Activity](h.engine, key)
	if err != nil {
		return "", err
	}
	return chasm.ReadComponent(ctx, h.engine, ref, func(_ chasm.Context, a *Activity) (string, error) { return a.RequestId, nil })
}

func startOptions(req *activitypb.StartActivityRequest) chasm.StartOptions {
	var opts chasm.StartOptions
	switch req.GetIdReusePolicy() {
	case enumspb.ACTIVITY_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY:
		opts.ReusePolicy = chasm.IDReuseAllowDuplicateFailedOnly
	case enumspb.ACTIVITY_ID_REUSE_POLICY_REJECT_DUPLICATE:
		opts.ReusePolicy = chasm.IDReuseRejectDuplicate
	default:
		opts.ReusePolicy = chasm.IDReuseAllowDuplicate
	}
	if req.GetIdConflictPolicy() == enumspb.ACTIVITY_ID_CONFLICT_POLICY_USE_EXISTING {
		opts.ConflictPolicy = chasm.IDConflictUseExisting
	}
	return opts
}

// normalizeStart validates a start and fills the defaults Temporal applies to a standalone
// activity: the timeouts of normalizeTimeouts and the retry policy's defaults.
func normalizeStart(req *activitypb.StartActivityRequest) (*activitypb.StartActivityRequest, time.Duration, error) {
	switch {
	case req.GetNamespaceId() == "" || req.GetNamespace() == "":
		return nil, 0, invalidArgument("namespace_id and namespace are required")
	case req.GetActivityId() == "":
		return nil, 0, invalidArgument("activity_id is required")
	case req.GetActivityType().GetName() == "":
		return nil, 0, invalidArgument("activity_type.name is required")
	case req.GetTaskQueue() == "":
		return nil, 0, invalidArgument("task_queue is required")
	}
	if d := req.GetStartDelay(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
		return nil, 0, invalidArgument("start_delay must be a valid, non-negative duration")
	}
	t, err := normalizeTimeouts(req.GetScheduleToCloseTimeout(), req.GetScheduleToStartTimeout(),
		req.GetStartToCloseTimeout(), req.GetHeartbeatTimeout())
	if err != nil {
		return nil, 0, err
	}
	policy, err := normalizeRetryPolicy(req.GetRetryPolicy())
	if err != nil {
		return nil, 0, err
	}
	out := proto.Clone(req).(*activitypb.StartActivityRequest)
	out.ScheduleToCloseTimeout = t.scheduleToClose
	out.ScheduleToStartTimeout = t.scheduleToStart
	out.StartToCloseTimeout = t.startToClose
	out.HeartbeatTimeout = t.heartbeat
	out.RetryPolicy = policy
	return out, req.GetStartDelay().AsDuration(), nil
}

// RecordActivityTaskStarted gives the attempt a matching task names to the poll that got it.
// Only the current stamp of a SCHEDULED activity can start: a stale matching task (the
// attempt was cancelled, timed out, rescheduled or already started) is NotFound, and the
// frontend polls matching again. A retry of the call for the same poll gets the same answer.
func (h *Handler) RecordActivityTaskStarted(ctx context.Context, req *activitypb.RecordActivityTaskStartedRequest) (*activitypb.RecordActivityTaskStartedResponse, error) {
	if req.GetRunId() == "" || req.GetStamp() <= 0 {
		return nil, invalidArgument("run_id and stamp are required")
	}
	ref, err := h.ref(req.GetNamespaceId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	var destination string
	if req.GetWorkerInstanceKey() != "" {
		if destination, err = h.config.workerDestination(req.GetNamespaceId(), req.GetWorkerInstanceKey()); err != nil {
			return nil, err
		}
	}
	started := false
	resp, err := chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (*activitypb.RecordActivityTaskStartedResponse, error) {
		if a.Status == statusStarted && a.Stamp == req.GetStamp() && req.GetPollRequestId() != "" && a.PollRequestId == req.GetPollRequestId() {
			return taskStartedResponse(mctx, a), nil
		}
		if a.Status != statusScheduled || a.Stamp != req.GetStamp() {
			return nil, errStaleAttempt(req.GetActivityId(), req.GetStamp(), a)
		}
		err := TransitionStarted.Apply(a, mctx, EventStarted{
			Stamp: req.GetStamp(), Identity: req.GetIdentity(), WorkerInstanceKey: req.GetWorkerInstanceKey(),
			ControlQueue: req.GetWorkerControlTaskQueue(), PollRequestID: req.GetPollRequestId(), WorkerDestination: destination,
		})
		if err != nil {
			return nil, err
		}
		started = true
		return taskStartedResponse(mctx, a), nil
	})
	if err != nil {
		return nil, err
	}
	if started {
		ActivityAttemptsStarted.With(h.scope).Inc(1)
	}
	return resp, nil
}

func taskStartedResponse(ctx chasm.Context, a *Activity) *activitypb.RecordActivityTaskStartedResponse {
	key := ctx.ExecutionKey()
	return &activitypb.RecordActivityTaskStartedResponse{
		TaskToken:                   a.TaskToken,
		ActivityId:                  key.BusinessID,
		ActivityRunId:               key.RunID,
		ActivityType:                a.ActivityType,
		Input:                       a.Input,
		Header:                      a.Header,
		Namespace:                   a.Namespace,
		ScheduledTime:               a.ScheduleTime,
		CurrentAttemptScheduledTime: a.AttemptScheduledTime,
		StartedTime:                 a.StartedTime,
		Attempt:                     a.Attempt,
		ScheduleToCloseTimeout:      a.ScheduleToCloseTimeout,
		StartToCloseTimeout:         a.StartToCloseTimeout,
		HeartbeatTimeout:            a.HeartbeatTimeout,
		HeartbeatDetails:            a.HeartbeatDetails,
		RetryPolicy:                 a.RetryPolicy,
		Priority:                    a.Priority,
	}
}

// RespondActivityTaskCompleted closes the activity with the worker's result.
func (h *Handler) RespondActivityTaskCompleted(ctx context.Context, req *activitypb.RespondActivityTaskCompletedRequest) (*activitypb.RespondActivityTaskCompletedResponse, error) {
	_, err := updateAttempt(h, ctx, "RespondActivityTaskCompleted", req.GetNamespaceId(), req.GetTaskToken(),
		func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
			return struct{}{}, TransitionCompleted.Apply(a, mctx, EventCompleted{Result: req.GetResult()})
		})
	if err != nil {
		return nil, err
	}
	ActivitiesClosed.With(h.scope, metrics.StateTag(StatusName(statusCompleted))).Inc(1)
	return &activitypb.RespondActivityTaskCompletedResponse{}, nil
}

// RespondActivityTaskFailed fails the attempt: the next one after the retry backoff if the
// policy allows it, else the activity closes FAILED with this failure.
func (h *Handler) RespondActivityTaskFailed(ctx context.Context, req *activitypb.RespondActivityTaskFailedRequest) (*activitypb.RespondActivityTaskFailedResponse, error) {
	if req.GetFailure() == nil {
		return nil, invalidArgument("failure is required")
	}
	status, err := updateAttempt(h, ctx, "RespondActivityTaskFailed", req.GetNamespaceId(), req.GetTaskToken(),
		func(mctx chasm.MutableContext, a *Activity) (activitypb.ActivityStatus, error) {
			if req.GetLastHeartbeatDetails() != nil {
				a.HeartbeatDetails = req.GetLastHeartbeatDetails()
			}
			err := failAttempt(a, mctx, req.GetFailure())
			return a.Status, err
		})
	if err != nil {
		return nil, err
	}
	if status == statusScheduled {
		ActivityRetries.With(h.scope).Inc(1)
	} else {
		ActivitiesClosed.With(h.scope, metrics.StateTag(StatusName(status))).Inc(1)
	}
	return &activitypb.RespondActivityTaskFailedResponse{}, nil
}

// RespondActivityTaskCanceled acknowledges a cancel request: the activity closes CANCELED. A
// worker may only report cancellation that was requested (FailedPrecondition otherwise), as
// Temporal does.
func (h *Handler) RespondActivityTaskCanceled(ctx context.Context, req *activitypb.RespondActivityTaskCanceledRequest) (*activitypb.RespondActivityTaskCanceledResponse, error) {
	_, err := updateAttempt(h, ctx, "RespondActivityTaskCanceled", req.GetNamespaceId(), req.GetTaskToken(),
		func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
			if !a.CancelRequested {
				return struct{}{}, serviceerror.NewFailedPrecondition(
					"activity cannot be reported canceled: no cancellation was requested")
			}
			return struct{}{}, TransitionCanceled.Apply(a, mctx, EventCanceled{Details: req.GetDetails()})
		})
	if err != nil {
		return nil, err
	}
	ActivitiesClosed.With(h.scope, metrics.StateTag(StatusName(statusCanceled))).Inc(1)
	return &activitypb.RespondActivityTaskCanceledResponse{}, nil
}

// RecordActivityTaskHeartbeat keeps the details, pushes the heartbeat deadline out, and tells
// the worker whether a cancel was requested.
func (h *Handler) RecordActivityTaskHeartbeat(ctx context.Context, req *activitypb.RecordActivityTaskHeartbeatRequest) (*activitypb.RecordActivityTaskHeartbeatResponse, error) {
	return updateAttempt(h, ctx, "RecordActivityTaskHeartbeat", req.GetNamespaceId(), req.GetTaskToken(),
		func(mctx chasm.MutableContext, a *Activity) (*activitypb.RecordActivityTaskHeartbeatResponse, error) {
			// Paused or reset: the SDK stops the attempt, and reports it failed; the pause or
			// reset then applies (pause.go).
			resp := &activitypb.RecordActivityTaskHeartbeatResponse{
				CancelRequested: a.CancelRequested, ActivityPaused: a.Pause != nil, ActivityReset: a.ResetRequested,
			}
			return resp, TransitionHeartbeatRecorded.Apply(a, mctx, EventHeartbeat{Details: req.GetDetails()})
		})
}

// updateAttempt runs fn on the attempt a task token names, if it is still the running one.
// This is the fence: a token of any other attempt (the worker was declared lost and the
// attempt rescheduled, or it timed out) is NotFound and changes nothing.
func updateAttempt[R any](
	h *Handler, ctx context.Context, operation, namespaceID string, taskToken []byte,
	fn func(chasm.MutableContext, *Activity) (R, error),
) (R, error) {
	var zero R
	token, err := DecodeTaskToken(taskToken)
	if err != nil {
		return zero, err
	}
	if namespaceID != "" && token.NamespaceId != namespaceID {
		return zero, invalidArgument("task token belongs to another namespace")
	}
	ref, err := h.ref(token.NamespaceId, token.ActivityId, token.RunId)
	if err != nil {
		return zero, err
	}
	stale := false
	result, err := chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (R, error) {
		if a.Status != statusStarted || a.Stamp != token.Stamp {
			stale = true
			return zero, errStaleAttempt(token.ActivityId, token.Stamp, a)
		}
		return fn(mctx, a)
	})
	if stale {
		ActivityStaleResponsesRefused.With(h.scope, metrics.OperationTag(operation)).Inc(1)
		h.logger.Debug("stale activity attempt refused", tag.NamespaceID(token.NamespaceId), tag.BusinessID(token.ActivityId),
			tag.RunID(token.RunId), zap.Int64("stamp", token.Stamp), zap.String("operation", operation))
	}
	return result, err
}

// PollActivityExecution waits until the run closes and returns its outcome. It answers
// without an outcome LongPollDeadlineMargin before the caller's deadline, or after
// activity.longPollMaxWait, whichever comes first: the SDK then polls again.
func (h *Handler) PollActivityExecution(ctx context.Context, req *activitypb.PollActivityExecutionRequest) (*activitypb.PollActivityExecutionResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	type snapshot struct {
		runID   string
		outcome *activitypb.ActivityOutcome
		closed  bool
	}
	check := func(rctx chasm.Context, a *Activity) (snapshot, bool, error) {
		return snapshot{runID: rctx.ExecutionKey().RunID, outcome: a.Outcome, closed: a.IsClosed()}, a.IsClosed(), nil
	}
	// Read first: it resolves the current run (so the wait follows this run, not a later one
	// started under the same ID) and answers a closed run even if no time is left to wait.
	now, err := chasm.ReadComponent(ctx, h.engine, ref, func(rctx chasm.Context, a *Activity) (snapshot, error) {
		s, _, err := check(rctx, a)
		return s, err
	})
	if err != nil {
		return nil, err
	}
	if now.closed {
		return &activitypb.PollActivityExecutionResponse{RunId: now.runID, Outcome: now.outcome}, nil
	}
	ref.Key.RunID = now.runID
	waitCtx, cancel := context.WithTimeout(ctx, h.config.LongPollMaxWait())
	defer cancel()
	if deadline, ok := ctx.Deadline(); ok {
		var cancelMargin context.CancelFunc
		waitCtx, cancelMargin = context.WithDeadline(waitCtx, deadline.Add(-h.config.LongPollDeadlineMargin))
		defer cancelMargin()
	}
	closed, err := chasm.PollComponent(waitCtx, h.engine, ref, check)
	switch {
	case err == nil:
		return &activitypb.PollActivityExecutionResponse{RunId: closed.runID, Outcome: closed.outcome}, nil
	case waitCtx.Err() != nil && ctx.Err() == nil:
		return &activitypb.PollActivityExecutionResponse{RunId: now.runID}, nil
	}
	return nil, err
}

// DescribeActivity returns the run's full state.
func (h *Handler) DescribeActivity(ctx context.Context, req *activitypb.DescribeActivityRequest) (*activitypb.DescribeActivityResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	return chasm.ReadComponent(ctx, h.engine, ref, func(rctx chasm.Context, a *Activity) (*activitypb.DescribeActivityResponse, error) {
		return &activitypb.DescribeActivityResponse{
			RunId: rctx.ExecutionKey().RunID,
			State: proto.Clone(a.ActivityState).(*activitypb.ActivityState),
		}, nil
	})
}

// RequestCancelActivity cancels a SCHEDULED activity at once (its matching task, if queued,
// is refused when a poll tries to start it), and asks the worker of a STARTED one to stop: a
// CancelActivity command plus cancel_requested on its heartbeats; the activity closes when the
// worker acknowledges. Repeating a request, or cancelling a CANCELED activity, is a no-op;
// cancelling an activity that closed otherwise is FailedPrecondition.
func (h *Handler) RequestCancelActivity(ctx context.Context, req *activitypb.RequestCancelActivityRequest) (*activitypb.RequestCancelActivityResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	canceled := false
	_, err = chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		switch a.Status {
		case statusScheduled, statusPaused:
			canceled = true
			return struct{}{}, TransitionCanceled.Apply(a, mctx, EventCanceled{RequestID: req.GetRequestId(), Reason: req.GetReason()})
		case statusStarted:
			if a.CancelRequested {
				return struct{}{}, nil
			}
			return struct{}{}, TransitionCancelRequested.Apply(a, mctx, EventCancelRequested{RequestID: req.GetRequestId(), Reason: req.GetReason()})
		case statusCanceled:
			return struct{}{}, nil
		}
		return struct{}{}, serviceerror.NewFailedPrecondition(fmt.Sprintf(
			"activity %s is already closed (%s)", req.GetActivityId(), StatusName(a.Status)))
	})
	if err != nil {
		return nil, err
	}
	if canceled {
		ActivitiesClosed.With(h.scope, metrics.StateTag(StatusName(statusCanceled))).Inc(1)
	}
	return &activitypb.RequestCancelActivityResponse{}, nil
}

// rescheduleConcurrency bounds the transactions one reschedule batch runs at a time. Their
// writes wait on the store's group commit together, so they share its commits, and the Worker
// component sends several chunks of a shard at once, so a host has a multiple of this in
// flight. At 16, a lone 10,000-entry batch went out in small commits squeezed between other
// writers (9 s on 2 cores, SQLite); at 64, 1.5 s. More gains a lone batch little and lengthens
// the commit queue that heartbeats wait in too.
const rescheduleConcurrency = 64

// errNothingToWrite ends a transaction that changed nothing, so that it writes nothing.
var errNothingToWrite = errors.New("activity: nothing to write")

// RescheduleActivities implements worker.RescheduleReceiver: the Worker component hands back
// the attempts of a worker it declared lost. Each entry is its own transaction and applies
// only if the activity is still STARTED by that worker with that stamp, so a duplicate or late
// batch never takes an activity from its new owner (STALE, and nothing is written). The
// entries' transactions run concurrently and share group commits; the answer, which is what
// the Worker component records as the batch's acknowledgement, is sent only once every entry's
// write is durable. A failure other than NotFound fails the batch, which the worker retries;
// entries already applied then answer STALE.
//
// Direct hand-off. With WithDispatcher, the transaction that takes an attempt back also records
// its successor as dispatched (dispatched_stamp, dispatch_count, redispatch_time and the
// RedispatchTask timer), and the new attempt is queued in matching as soon as that transaction
// commits: no DispatchTask to write, run and delete, no read and no second write per attempt.
// That is as safe as a DispatchTask because matching keeps its queues in memory, in this
// process:
//   - Crash before the commit: nothing changed; the worker's shard still holds the batch
//     unacknowledged and sends it again.
//   - Crash after the commit, before or after the hand-off: matching's queues die with the
//     process either way. At the next start RequeueDispatched queues every SCHEDULED attempt
//     whose dispatched_stamp is its stamp, which includes this one.
//   - Matching refuses the hand-off (backlog full): the attempt is put back on the DispatchTask
//     path, which retries with backoff. Should that write fail too, or matching lose a task it
//     took, the RedispatchTask queues the attempt again after activity.redispatchInterval.
//   - The write commits but the caller saw an error (it stopped waiting for the group commit):
//     the batch fails and comes again; the entry answers STALE, and its attempt is queued again
//     (a duplicate is harmless: matching holds one task per attempt, and a stamp starts once).
//
// The hand-off ignores the caller's cancellation: once the write has committed, only a crash
// may skip it.
func (h *Handler) RescheduleActivities(ctx context.Context, req *workerpb.RescheduleActivitiesRequest) (*workerpb.RescheduleActivitiesResponse, error) {
	if req.GetNamespaceId() == "" || req.GetWorkerInstanceKey() == "" {
		return nil, invalidArgument("namespace_id and worker_instance_key are required")
	}
	entries := req.GetActivities()
	outcomes := make([]workerpb.RescheduleOutcome, len(entries))
	errs := make([]error, len(entries))
	sem := make(chan struct{}, rescheduleConcurrency)
	var detected time.Time // zero: unknown (an older sender)
	if req.GetInactiveTime() != nil {
		detected = req.GetInactiveTime().AsTime()
	}
	var wg sync.WaitGroup
	for i, entry := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			outcomes[i], errs[i] = h.rescheduleOne(ctx, req, entry, detected)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	counts := make(map[workerpb.RescheduleOutcome]int)
	for _, o := range outcomes {
		counts[o]++
	}
	// Debug, like the worker side's line for the same batch: one per destination shard.
	h.logger.Debug("attempts of a lost worker taken back", tag.NamespaceID(req.GetNamespaceId()),
		tag.WorkerID(req.GetWorkerInstanceKey()), zap.Int("batch", len(entries)),
		zap.Int("rescheduled", counts[workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_RESCHEDULED]),
		zap.Int("failed", counts[workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_FAILED]),
		zap.Int("stale", counts[workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_STALE]),
		zap.Int("not-found", counts[workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_NOT_FOUND]),
		zap.Bool("orphans", req.GetOrphan()), zap.Int("alive", counts[workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_ALIVE]))
	return &workerpb.RescheduleActivitiesResponse{Outcomes: outcomes}, nil
}

func (h *Handler) rescheduleOne(
	ctx context.Context, req *workerpb.RescheduleActivitiesRequest, entry *workerpb.BoundActivity, detected time.Time,
) (workerpb.RescheduleOutcome, error) {
	namespaceID, workerInstanceKey := req.GetNamespaceId(), req.GetWorkerInstanceKey()
	orphan := req.GetOrphan()
	reason, kind := "its worker was declared inactive", "worker_inactive"
	if orphan {
		reason = fmt.Sprintf("its live worker's heartbeats showed it was not running it (orphan, %s)", entry.GetOrphanReason())
		kind = "orphaned"
	}
	if entry.GetActivityId() == "" || entry.GetRunId() == "" {
		return workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_NOT_FOUND, nil
	}
	ref, err := h.ref(namespaceID, entry.GetActivityId(), entry.GetRunId())
	if err != nil {
		return 0, err
	}
	var (
		lost lostAttempt
		// handOff is the attempt to queue in matching once the transaction has committed;
		// fresh says this transaction created it (rather than an earlier delivery of the batch).
		handOff    *ActivityTaskRef
		fresh      bool
		detectedAt time.Time
	)
	outcome, err := chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (workerpb.RescheduleOutcome, error) {
		if a.Status != statusStarted || a.Stamp != entry.GetStamp() || a.WorkerInstanceKey != workerInstanceKey {
			if h.dispatcher != nil && a.Status == statusScheduled && a.Stamp == entry.GetStamp()+1 && a.DispatchedStamp == a.Stamp {
				// Perhaps applied by an earlier delivery of this batch whose hand-off never
				// happened (its caller stopped waiting): queue it again, to be sure.
				task := activityTaskRef(mctx.ExecutionKey(), a)
				handOff = &task
			}
			return 0, errNothingToWrite
		}
		if orphan && req.GetSuspectSince() != nil && a.LastHeartbeatTime != nil &&
			!a.LastHeartbeatTime.AsTime().Before(req.GetSuspectSince().AsTime()) {
			// It heartbeats, so something runs it (the worker, or an asynchronous completer
			// the SDK released the slot for): leave it, and bind it to its worker again, whose
			// reconciliation dropped the binding.
			rebind(a, mctx)
			return workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_ALIVE, nil
		}
		var direct *HandOff
		if h.dispatcher != nil {
			direct = &HandOff{RedispatchAfter: h.config.redispatchAfter(a.Namespace, 1)}
		}
		var err error
		// An orphan's attempt does not count against maximum_attempts: the server lost it (a
		// poll response or a completion), the activity did not fail.
		if lost, err = loseWorker(a, mctx, kind, reason, orphan, detected, direct); err != nil {
			return 0, err
		}
		if lost == lostPaused {
			return workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_RESCHEDULED, nil // taken back, waits PAUSED
		}
		if lost == lostRescheduled {
			if direct != nil {
				task := activityTaskRef(mctx.ExecutionKey(), a)
				handOff, fresh, detectedAt = &task, true, detectedTime(detected, mctx.Now())
			}
			return workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_RESCHEDULED, nil
		}
		// Closed instead (FAILED, or CANCELED after a cancel request): nothing left to run.
		return workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_FAILED, nil
	})
	switch {
	case errors.Is(err, errNothingToWrite):
		outcome = workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_STALE
	case isNotFound(err):
		return workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_NOT_FOUND, nil
	case err != nil:
		return 0, err
	}
	if handOff != nil {
		h.handOff(context.WithoutCancel(ctx), ref, *handOff, fresh, detectedAt)
	}
	if lost != 0 {
		recordLost(h.scope, lost, kind)
		if orphan {
			ActivityOrphansRescheduled.With(h.scope, metrics.ReasonTag(entry.GetOrphanReason()), metrics.StateTag(lost.String())).Inc(1)
		}
	}
	if outcome == workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_ALIVE {
		ActivityOrphansRescheduled.With(h.scope, metrics.ReasonTag(entry.GetOrphanReason()), metrics.StateTag("alive")).Inc(1)
	}
	if orphan && outcome != workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_STALE {
		h.logger.Info("orphaned attempt of a live worker", tag.NamespaceID(namespaceID), tag.BusinessID(entry.GetActivityId()),
			tag.RunID(entry.GetRunId()), tag.WorkerID(workerInstanceKey), zap.Int64("stamp", entry.GetStamp()),
			zap.String("reason", entry.GetOrphanReason()), zap.String("outcome", outcome.String()))
	}
	if !orphan && outcome != workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_STALE {
		// Debug: a lost worker may hold thousands; RescheduleActivities logs the batch.
		h.logger.Debug("attempt of a lost worker taken back", tag.NamespaceID(namespaceID), tag.BusinessID(entry.GetActivityId()),
			tag.RunID(entry.GetRunId()), tag.WorkerID(workerInstanceKey), zap.Int64("stamp", entry.GetStamp()),
			zap.String("outcome", lost.String()))
	}
	return outcome, nil
}

// handOff queues in matching an attempt whose transaction has committed. When matching refuses
// a fresh one, the attempt is sent back to the DispatchTask path, which retries until matching
// takes it (as RedispatchTask does: the dispatch it recorded did not happen). A refused
// re-hand-off of an attempt dispatched before needs nothing: its RedispatchTask is pending.
func (h *Handler) handOff(ctx context.Context, ref chasm.ComponentRef, task ActivityTaskRef, fresh bool, detected time.Time) {
	err := h.dispatcher.AddActivityTask(ctx, task)
	if err == nil {
		if fresh {
			ActivityRescheduleDispatchLatency.With(h.scope).Record(h.timeSource.Now().Sub(detected))
		}
		return
	}
	if !fresh {
		return
	}
	_, fallbackErr := chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		if a.Status != statusScheduled || a.Stamp != task.Stamp || a.DispatchedStamp != task.Stamp || a.DispatchCount != 1 {
			return struct{}{}, errNothingToWrite // started, or re-dispatched, meanwhile
		}
		a.DispatchedStamp = 0
		a.DispatchCount = 0
		a.RedispatchTime = nil
		a.RescheduledTime = timestamppb.New(detected) // the DispatchTask measures the latency
		mctx.AddTask(chasm.TaskAttributes{Destination: DispatchDestination}, &activitypb.DispatchTask{Stamp: task.Stamp})
		return struct{}{}, nil
	})
	fields := []zap.Field{tag.NamespaceID(task.NamespaceID), tag.BusinessID(task.ActivityID), tag.RunID(task.RunID),
		zap.Int64("stamp", task.Stamp), tag.Error(err)}
	switch {
	case fallbackErr == nil:
		h.logger.Warn("matching refused a rescheduled attempt: a DispatchTask retries it", fields...)
	case errors.Is(fallbackErr, errNothingToWrite):
		// Started or re-dispatched meanwhile: nothing to do.
	default:
		h.logger.Warn("matching refused a rescheduled attempt: its RedispatchTask will queue it again",
			append(fields, zap.NamedError("fallback-error", fallbackErr))...)
	}
}

func (h *Handler) ref(namespaceID, activityID, runID string) (chasm.ComponentRef, error) {
	if namespaceID == "" || activityID == "" {
		return chasm.ComponentRef{}, invalidArgument("namespace_id and activity_id are required")
	}
	return chasm.NewRef[*Activity](h.engine, chasm.ExecutionKey{NamespaceID: namespaceID, BusinessID: activityID, RunID: runID})
}

func isNotFound(err error) bool {
	var notFound *serviceerror.NotFound
	return errors.As(err, &notFound)
}

// ListActivityPageSizeMax bounds one ListActivities page.
const ListActivityPageSizeMax = 1000

// ListActivities pages through a namespace's activities (every run, open and closed), of one
// status when the request names one. Any host answers it for the whole namespace: it reads the
// store, not the shards' caches, so the page is as of the last commit.
func (h *Handler) ListActivities(ctx context.Context, req *activitypb.ListActivitiesRequest) (*activitypb.ListActivitiesResponse, error) {
	if req.GetNamespaceId() == "" {
		return nil, invalidArgument("namespace_id is required")
	}
	lister, ok := h.engine.(chasm.Lister)
	if !ok {
		return nil, serviceerror.NewUnimplemented("this history engine cannot list activities")
	}
	pageSize := int(req.GetPageSize())
	if pageSize <= 0 || pageSize > ListActivityPageSizeMax {
		pageSize = ListActivityPageSizeMax
	}
	var listed []chasm.Listed[*Activity]
	var next []byte
	var err error
	if len(req.GetVisibilityQuery()) > 0 {
		var resp *activitypb.ListActivitiesResponse
		listed, next, resp, err = h.listVisibility(ctx, req, pageSize)
		if err != nil || resp != nil {
			return resp, err
		}
	} else {
		if req.GetCountOnly() {
			return nil, invalidArgument("count_only needs a visibility_query")
		}
		listed, next, err = chasm.ListComponents[*Activity](ctx, lister, h.engine.Registry(), req.GetNamespaceId(),
			chasm.IndexedFields{Status: StatusName(req.GetStatus()), TaskQueue: req.GetTaskQueue()}, pageSize, req.GetNextPageToken())
	}
	if err != nil {
		return nil, err
	}
	resp := &activitypb.ListActivitiesResponse{NextPageToken: next}
	for _, l := range listed {
		resp.Activities = append(resp.Activities, &activitypb.ListedActivity{
			ActivityId: l.Key.BusinessID, RunId: l.Key.RunID, State: l.Component.ActivityState,
		})
	}
	return resp, nil
}

// listVisibility serves a ListActivities with a visibility query: a page in the query's
// order, or with count_only the counts (a non-nil response).
func (h *Handler) listVisibility(ctx context.Context, req *activitypb.ListActivitiesRequest, pageSize int) (
	[]chasm.Listed[*Activity], []byte, *activitypb.ListActivitiesResponse, error,
) {
	if req.GetStatus() != statusUnspecified || req.GetTaskQueue() != "" {
		return nil, nil, nil, invalidArgument("visibility_query cannot be combined with status or task_queue")
	}
	lister, ok := h.engine.(chasm.VisibilityLister)
	if !ok {
		return nil, nil, nil, serviceerror.NewUnimplemented("this history engine cannot answer visibility queries")
	}
	q, err := visibility.DecodeQuery(req.GetVisibilityQuery())
	if err != nil {
		return nil, nil, nil, invalidArgument("%s", err)
	}
	lr := chasm.ListRequest{NamespaceID: req.GetNamespaceId(), Visibility: q,
		PageSize: pageSize, NextPageToken: req.GetNextPageToken()}
	if req.GetCountOnly() {
		if lr.Archetype, err = chasm.ArchetypeOf[*Activity](h.engine.Registry()); err != nil {
			return nil, nil, nil, err
		}
		total, byStatus, err := lister.CountVisibility(ctx, lr)
		if err != nil {
			return nil, nil, nil, err
		}
		return nil, nil, &activitypb.ListActivitiesResponse{Count: total, StatusCounts: byStatus}, nil
	}
	listed, next, err := chasm.ListComponentsOf[*Activity](ctx, lister, h.engine.Registry(), lr)
	return listed, next, nil, err
}

// TerminateActivity closes a SCHEDULED or STARTED activity as TERMINATED at once (see
// TransitionTerminated). Terminating a TERMINATED activity is a no-op; one that closed
// otherwise is FailedPrecondition.
func (h *Handler) TerminateActivity(ctx context.Context, req *activitypb.TerminateActivityRequest) (*activitypb.TerminateActivityResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	terminated := false
	_, err = chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		switch a.Status {
		case statusScheduled, statusStarted, statusPaused:
			terminated = true
			return struct{}{}, TransitionTerminated.Apply(a, mctx, EventTerminated{Reason: req.GetReason(), Identity: req.GetIdentity()})
		case statusTerminated:
			return struct{}{}, errNothingToWrite
		}
		return struct{}{}, serviceerror.NewFailedPrecondition(fmt.Sprintf(
			"activity %s is already closed (%s)", req.GetActivityId(), StatusName(a.Status)))
	})
	if err != nil && !errors.Is(err, errNothingToWrite) {
		return nil, err
	}
	if terminated {
		ActivitiesClosed.With(h.scope, metrics.StateTag(StatusName(statusTerminated))).Inc(1)
	}
	return &activitypb.TerminateActivityResponse{}, nil
}

// DeleteActivity removes a closed activity run and everything stored for it. A running one
// is FailedPrecondition: terminate (or cancel) it first, so that its worker is unbound and
// told to stop before the record goes. While the unbind is still pending it is Unavailable,
// which clients retry.
func (h *Handler) DeleteActivity(ctx context.Context, req *activitypb.DeleteActivityRequest) (*activitypb.DeleteActivityResponse, error) {
	ref, err := h.ref(req.GetNamespaceId(), req.GetActivityId(), req.GetRunId())
	if err != nil {
		return nil, err
	}
	_, err = chasm.UpdateComponent(ctx, h.engine, ref, func(mctx chasm.MutableContext, a *Activity) (struct{}, error) {
		if !a.IsClosed() {
			return struct{}{}, serviceerror.NewFailedPrecondition(fmt.Sprintf(
				"activity %s is still running (%s): terminate or cancel it before deleting it", req.GetActivityId(), StatusName(a.Status)))
		}
		if len(a.PendingUnbinds) > 0 {
			// Deleting now would drop the UnbindTask, and its worker would keep the binding.
			return struct{}{}, serviceerror.NewUnavailable(fmt.Sprintf(
				"activity %s is still being unbound from its worker: retry", req.GetActivityId()))
		}
		mctx.DeleteExecution()
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return &activitypb.DeleteActivityResponse{}, nil
}
