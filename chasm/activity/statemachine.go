package activity

import (
	"fmt"
	"math"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// The activity lifecycle (README.md draws it):
//
//	(new) ─start─► SCHEDULED ─poll─► STARTED ─completed─► COMPLETED
//	STARTED ─failed / start-to-close / heartbeat timeout, retry allowed─► SCHEDULED (attempt+1, after backoff)
//	STARTED ─worker lost (reschedule, bind refused)─► SCHEDULED (attempt+1, at once)
//	STARTED ─failed, no retry / worker lost, attempts exhausted─► FAILED
//	SCHEDULED, STARTED ─schedule-to-close; SCHEDULED ─schedule-to-start─► TIMED_OUT
//	SCHEDULED ─cancel requested─► CANCELED;  STARTED ─cancel requested─► STARTED ─canceled─► CANCELED
//	SCHEDULED, STARTED ─terminated─► TERMINATED (at once; the running attempt is fenced and unbound)
//	SCHEDULED ─pause─► PAUSED ─unpause / reset─► SCHEDULED (new stamp); STARTED ─pause─► STARTED
//	(paused: its heartbeats say so) ─attempt failed, retry allowed / worker lost─► PAUSED
//	STARTED ─reset─► STARTED (reset requested) ─attempt failed / worker lost─► SCHEDULED, attempt 1
//	(see pause.go)

// Destinations of the outbound tasks that do not go to a history shard.
const (
	// DispatchDestination is where DispatchTask goes: matching.
	DispatchDestination = "matching"
	// CommandDestination is where CancelActivity worker commands go (through matching's
	// control queues); kept apart from dispatches so a slow command path delays no dispatch.
	CommandDestination = "worker-commands"
)

// WorkerLostFailureType is the ApplicationFailure type of an attempt whose worker was declared
// lost (its lease expired or it shut down with the attempt still running).
const WorkerLostFailureType = "WorkerLost"

// failureSource marks failures the server made up (timeouts, cancellation, worker lost).
const failureSource = "vigil"

// EventScheduled is a validated, normalised start request.
type EventScheduled struct {
	Request    *activitypb.StartActivityRequest
	StartDelay time.Duration
}

// EventStarted is a worker's poll taking the current attempt.
type EventStarted struct {
	Stamp             int64
	Identity          string
	WorkerInstanceKey string
	ControlQueue      string
	PollRequestID     string
	// WorkerDestination is the outbound destination of the worker's shard (bind, unbind).
	WorkerDestination string
}

// EventHeartbeat is an accepted RecordActivityTaskHeartbeat.
type EventHeartbeat struct {
	Details *commonpb.Payloads
}

// EventCompleted is an accepted RespondActivityTaskCompleted.
type EventCompleted struct {
	Result *commonpb.Payloads
}

// EventAttemptFailed ends the current attempt with a failure. Retry is the backoff decided by
// retryDelay; the transition taken (retry or close) follows from it.
type EventAttemptFailed struct {
	Failure *failurepb.Failure
	Retry   time.Duration
}

// EventCanceled closes the activity as CANCELED (a SCHEDULED activity's cancel request, or the
// worker acknowledging one).
type EventCanceled struct {
	Details   *commonpb.Payloads
	RequestID string
	Reason    string
}

// EventTerminated closes the activity as TERMINATED (TerminateActivityExecution).
type EventTerminated struct {
	Reason   string
	Identity string
}

// EventCancelRequested asks the worker running the current attempt to stop.
type EventCancelRequested struct {
	RequestID string
	Reason    string
}

// EventTimedOut closes the activity as TIMED_OUT.
type EventTimedOut struct {
	Failure *failurepb.Failure
}

// EventWorkerLost takes the current attempt away from a worker that was declared lost (or that
// was no longer active when the attempt was bound to it).
type EventWorkerLost struct {
	Reason string
	// DetectedTime is when the worker was declared INACTIVE (zero: now). Re-dispatch latency
	// is measured from it.
	DetectedTime time.Time
	// NeverRan is set when the attempt was handed to a worker that was already dead (its
	// poll was still open when its lease ran out): the attempt never ran, so it does not count
	// against maximum_attempts and the next dispatch keeps its number.
	NeverRan bool
	// HandOff, when set, is the caller's promise to hand the new attempt to matching itself
	// right after this transaction commits (Handler.RescheduleActivities explains why that is
	// safe). The transaction then records the dispatch (and its RedispatchTask) instead of
	// adding a DispatchTask. Nil: a DispatchTask dispatches the attempt, as any other.
	HandOff *HandOff
}

// HandOff is what a transaction needs to record a dispatch its caller makes after the commit.
type HandOff struct {
	// RedispatchAfter is how long after the transaction the attempt is queued again should it
	// still wait: the backstop for a hand-off that matching lost or that never happened.
	RedispatchAfter time.Duration
}

var (
	// TransitionScheduled creates the activity with its first attempt.
	TransitionScheduled = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusUnspecified}, statusScheduled,
		func(a *Activity, ctx chasm.MutableContext, ev EventScheduled) error {
			req := ev.Request
			now := ctx.Now()
			a.Namespace = req.GetNamespace()
			a.ActivityType = req.GetActivityType()
			a.TaskQueue = req.GetTaskQueue()
			a.Input = req.GetInput()
			a.Header = req.GetHeader()
			a.ScheduleToCloseTimeout = req.GetScheduleToCloseTimeout()
			a.ScheduleToStartTimeout = req.GetScheduleToStartTimeout()
			a.StartToCloseTimeout = req.GetStartToCloseTimeout()
			a.HeartbeatTimeout = req.GetHeartbeatTimeout()
			a.RetryPolicy = req.GetRetryPolicy()
			a.RequestId = req.GetRequestId()
			a.StarterIdentity = req.GetIdentity()
			a.Priority = req.GetPriority()
			a.SearchAttributes = req.GetSearchAttributes()
			a.UserMetadata = req.GetUserMetadata()
			a.ScheduleTime = timestamppb.New(now)
			if ev.StartDelay > 0 {
				a.StartDelay = durationpb.New(ev.StartDelay)
			}
			first := now.Add(ev.StartDelay)
			if s2c := a.ScheduleToCloseTimeout.AsDuration(); s2c > 0 {
				expiration := first.Add(s2c)
				a.ExpirationTime = timestamppb.New(expiration)
				ctx.AddTask(chasm.TaskAttributes{ScheduledTime: expiration}, &activitypb.ScheduleToCloseTimeoutTask{})
			}
			a.Attempt = 1
			scheduleAttempt(a, ctx, first)
			return nil
		})

	// TransitionStarted hands the current attempt to the worker whose poll matched it.
	TransitionStarted = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled}, statusStarted,
		func(a *Activity, ctx chasm.MutableContext, ev EventStarted) error {
			if ev.Stamp != a.Stamp {
				return fmt.Errorf("activity: start of stamp %d, current is %d", ev.Stamp, a.Stamp)
			}
			now := ctx.Now()
			key := ctx.ExecutionKey()
			token, err := EncodeTaskToken(&activitypb.TaskToken{
				NamespaceId: key.NamespaceID, ActivityId: key.BusinessID, RunId: key.RunID, Stamp: a.Stamp, Attempt: a.Attempt,
			})
			if err != nil {
				return err
			}
			a.TaskToken = token
			a.StartedTime = timestamppb.New(now)
			a.CurrentRetryInterval = nil
			a.WorkerIdentity = ev.Identity
			a.WorkerInstanceKey = ev.WorkerInstanceKey
			a.WorkerControlTaskQueue = ev.ControlQueue
			a.PollRequestId = ev.PollRequestID
			a.WorkerDestination = ev.WorkerDestination
			a.LastHeartbeatTime = nil
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: now.Add(a.StartToCloseTimeout.AsDuration())},
				&activitypb.StartToCloseTimeoutTask{Stamp: a.Stamp})
			if hb := a.HeartbeatTimeout.AsDuration(); hb > 0 {
				ctx.AddTask(chasm.TaskAttributes{ScheduledTime: now.Add(hb)}, &activitypb.HeartbeatTimeoutTask{Stamp: a.Stamp})
			}
			a.RebindTime = nil // a wait of an earlier attempt's bind
			if ev.WorkerInstanceKey != "" {
				ctx.AddTask(chasm.TaskAttributes{Destination: ev.WorkerDestination},
					&activitypb.BindTask{Stamp: a.Stamp, WorkerInstanceKey: ev.WorkerInstanceKey})
			}
			return nil
		})

	// TransitionHeartbeatRecorded keeps the worker's progress and pushes the heartbeat deadline
	// out: HeartbeatTimeoutTask is a singleton, so there is one pending timer per activity.
	TransitionHeartbeatRecorded = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusStarted,
		func(a *Activity, ctx chasm.MutableContext, ev EventHeartbeat) error {
			now := ctx.Now()
			a.LastHeartbeatTime = timestamppb.New(now)
			a.TotalHeartbeatCount++
			if ev.Details != nil {
				a.HeartbeatDetails = ev.Details
			}
			if hb := a.HeartbeatTimeout.AsDuration(); hb > 0 {
				ctx.AddTask(chasm.TaskAttributes{ScheduledTime: now.Add(hb)}, &activitypb.HeartbeatTimeoutTask{Stamp: a.Stamp})
			}
			return nil
		})

	// TransitionCompleted closes the activity with the worker's result.
	TransitionCompleted = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusCompleted,
		func(a *Activity, ctx chasm.MutableContext, ev EventCompleted) error {
			endAttempt(a, ctx)
			closeActivity(a, ctx, &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Result{Result: ev.Result}})
			return nil
		})

	// TransitionAttemptFailed schedules the next attempt after the retry backoff.
	TransitionAttemptFailed = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusScheduled,
		func(a *Activity, ctx chasm.MutableContext, ev EventAttemptFailed) error {
			endAttempt(a, ctx)
			a.LastFailure = ev.Failure
			a.CurrentRetryInterval = durationpb.New(ev.Retry)
			a.Attempt++
			a.RescheduledTime = nil
			scheduleAttempt(a, ctx, ctx.Now().Add(ev.Retry))
			return nil
		})

	// TransitionFailed closes the activity with the failure of its last attempt.
	TransitionFailed = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusFailed,
		func(a *Activity, ctx chasm.MutableContext, ev EventAttemptFailed) error {
			endAttempt(a, ctx)
			a.LastFailure = ev.Failure
			closeActivity(a, ctx, &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Failure{Failure: ev.Failure}})
			return nil
		})

	// TransitionTimedOut closes the activity with a timeout failure: schedule-to-start or
	// schedule-to-close at any time, start-to-close or heartbeat once no retry is allowed.
	TransitionTimedOut = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled, statusStarted, statusPaused}, statusTimedOut,
		func(a *Activity, ctx chasm.MutableContext, ev EventTimedOut) error {
			if a.Status == statusStarted {
				endAttempt(a, ctx)
			}
			closeActivity(a, ctx, &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Failure{Failure: ev.Failure}})
			return nil
		})

	// TransitionCancelRequested records a cancel request for a running attempt and tells its
	// worker: a CancelActivity command when the poll named a control queue, and
	// cancel_requested on every later heartbeat whatever happens to the command.
	TransitionCancelRequested = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusStarted,
		func(a *Activity, ctx chasm.MutableContext, ev EventCancelRequested) error {
			a.CancelRequested = true
			a.CancelRequestId = ev.RequestID
			a.CancelReason = ev.Reason
			sendCancelCommand(a, ctx)
			return nil
		})

	// TransitionCanceled closes the activity as CANCELED: at once while it waits for a worker,
	// on the worker's acknowledgement once started.
	TransitionCanceled = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled, statusStarted, statusPaused}, statusCanceled,
		func(a *Activity, ctx chasm.MutableContext, ev EventCanceled) error {
			if a.Status == statusStarted {
				endAttempt(a, ctx)
			} else {
				a.CancelRequested = true
				a.CancelRequestId = ev.RequestID
				a.CancelReason = ev.Reason
			}
			closeActivity(a, ctx, &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Failure{Failure: &failurepb.Failure{
				Message: "activity canceled",
				Source:  failureSource,
				FailureInfo: &failurepb.Failure_CanceledFailureInfo{CanceledFailureInfo: &failurepb.CanceledFailureInfo{
					Details: ev.Details, Identity: a.WorkerIdentity,
				}},
			}}})
			return nil
		})

	// TransitionTerminated closes the activity at once, whatever its worker does: a running
	// attempt is unbound from its worker and sent a CancelActivity command (its worker should
	// stop), and its late completion, failure or heartbeat is refused as stale (the activity is
	// no longer STARTED). A queued task of a SCHEDULED activity is refused when polled.
	TransitionTerminated = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled, statusStarted, statusPaused}, statusTerminated,
		func(a *Activity, ctx chasm.MutableContext, ev EventTerminated) error {
			if a.Status == statusStarted {
				sendCancelCommand(a, ctx)
				endAttempt(a, ctx)
			}
			reason := ev.Reason
			if reason == "" {
				reason = "activity terminated"
			}
			closeActivity(a, ctx, &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Failure{Failure: &failurepb.Failure{
				Message:     reason,
				Source:      failureSource,
				FailureInfo: &failurepb.Failure_TerminatedFailureInfo{TerminatedFailureInfo: &failurepb.TerminatedFailureInfo{Identity: ev.Identity}},
			}}})
			return nil
		})

	// TransitionRescheduled takes the attempt from a lost worker and dispatches the next one at
	// once, without backoff: the worker failed, not the activity. With a HandOff the caller
	// queues it in matching right after the commit; without, a DispatchTask does. The old
	// worker is sent a CancelActivity command in case it is only cut off and still running the
	// attempt.
	TransitionRescheduled = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusScheduled,
		func(a *Activity, ctx chasm.MutableContext, ev EventWorkerLost) error {
			sendCancelCommand(a, ctx)
			// No unbind: a worker that lost its attempts dropped their bindings itself when it
			// became INACTIVE, and a refused bind bound nothing. Unbinding 10,000 attempts one
			// by one through the dead worker's lock would only delay the re-dispatch.
			a.LastFailure = workerLostFailure(a, ev.Reason, false)
			if !ev.NeverRan {
				a.Attempt++
			}
			if ev.HandOff != nil {
				// The caller measures the re-dispatch latency when it hands the attempt over.
				a.RescheduledTime = nil
				scheduleAttemptHandedOff(a, ctx, ev.HandOff.RedispatchAfter)
				return nil
			}
			a.RescheduledTime = timestamppb.New(detectedTime(ev.DetectedTime, ctx.Now()))
			scheduleAttempt(a, ctx, ctx.Now())
			return nil
		})

	// TransitionWorkerLostExhausted fails the activity when its worker was lost on the last
	// attempt the retry policy allows.
	TransitionWorkerLostExhausted = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusFailed,
		func(a *Activity, ctx chasm.MutableContext, ev EventWorkerLost) error {
			sendCancelCommand(a, ctx) // no unbind, as in TransitionRescheduled
			failure := workerLostFailure(a, ev.Reason, true)
			a.LastFailure = failure
			closeActivity(a, ctx, &activitypb.ActivityOutcome{Value: &activitypb.ActivityOutcome_Failure{Failure: failure}})
			return nil
		})
)

// scheduleAttempt makes the current attempt dispatchable at `at` under a new stamp: at once
// (DispatchTask to matching) or after a backoff (the same task as a timer). The new stamp is
// what fences every call about the previous attempt.
func scheduleAttempt(a *Activity, ctx chasm.MutableContext, at time.Time) {
	newAttempt(a, ctx, at)
	task := &activitypb.DispatchTask{Stamp: a.Stamp}
	if at.After(ctx.Now()) {
		ctx.AddTask(chasm.TaskAttributes{ScheduledTime: at}, task)
	} else {
		ctx.AddTask(chasm.TaskAttributes{Destination: DispatchDestination}, task)
	}
}

// scheduleAttemptHandedOff makes the current attempt dispatchable now under a new stamp, and
// records it as dispatched: the caller hands it to matching once this transaction commits.
func scheduleAttemptHandedOff(a *Activity, ctx chasm.MutableContext, redispatchAfter time.Duration) {
	newAttempt(a, ctx, ctx.Now())
	recordDispatch(a, ctx, redispatchAfter)
}

// newAttempt gives the current attempt a new stamp, dispatchable at `at`, and clears what
// belonged to the previous one.
func newAttempt(a *Activity, ctx chasm.MutableContext, at time.Time) {
	clearAttempt(a, at)
	if s2s := a.ScheduleToStartTimeout.AsDuration(); s2s > 0 {
		ctx.AddTask(chasm.TaskAttributes{ScheduledTime: at.Add(s2s)}, &activitypb.ScheduleToStartTimeoutTask{Stamp: a.Stamp})
	}
}

// clearAttempt gives the current attempt a new stamp, due at `at`, and clears what belonged
// to the previous one; it sets no timer (a paused attempt waits for no deadline but
// schedule-to-close).
func clearAttempt(a *Activity, at time.Time) {
	a.Stamp++
	a.AttemptScheduledTime = timestamppb.New(at)
	a.StartedTime = nil
	a.WorkerIdentity = ""
	a.WorkerInstanceKey = ""
	a.WorkerControlTaskQueue = ""
	a.WorkerDestination = ""
	a.PollRequestId = ""
	a.LastHeartbeatTime = nil
	a.TaskToken = nil
	a.RedispatchTime = nil
	a.DispatchCount = 0
}

// recordDispatch records that the current attempt reached (or, in the same breath as this
// transaction's commit, will reach) matching, and sets the RedispatchTask that queues it again
// after redispatchAfter should it still wait then: matching keeps its queues in memory only.
func recordDispatch(a *Activity, ctx chasm.MutableContext, redispatchAfter time.Duration) {
	a.DispatchedStamp = a.Stamp
	a.DispatchCount++
	next := ctx.Now().Add(redispatchAfter)
	a.RedispatchTime = timestamppb.New(next)
	ctx.AddTask(chasm.TaskAttributes{ScheduledTime: next}, &activitypb.RedispatchTask{Stamp: a.Stamp})
}

// detectedTime is when a lost worker was declared INACTIVE, as far as re-dispatch latency is
// concerned: now when unknown, and never later than now.
func detectedTime(detected, now time.Time) time.Time {
	if detected.IsZero() || detected.After(now) {
		return now
	}
	return detected
}

// endAttempt is what every way out of STARTED shares: an attempt bound to its worker is
// unbound, so that worker's later death does not name it (it would be refused as stale
// anyway; this keeps the worker's record true).
func endAttempt(a *Activity, ctx chasm.MutableContext) {
	a.LastAttemptCompleteTime = timestamppb.New(ctx.Now())
	if a.BoundStamp != a.Stamp || a.WorkerInstanceKey == "" {
		return
	}
	addUnbind(a, ctx, a.WorkerInstanceKey, a.Stamp, a.WorkerDestination)
}

// rebind binds the current attempt to its worker again (a BindTask for the same stamp): the
// worker dropped the binding when it suspected an orphan that turned out to run.
func rebind(a *Activity, ctx chasm.MutableContext) {
	if a.WorkerInstanceKey == "" || a.WorkerDestination == "" {
		return
	}
	a.BindCheckedStamp = a.Stamp - 1
	a.BoundStamp = 0
	a.RebindTime = nil
	ctx.AddTask(chasm.TaskAttributes{Destination: a.WorkerDestination},
		&activitypb.BindTask{Stamp: a.Stamp, WorkerInstanceKey: a.WorkerInstanceKey})
}

func addUnbind(a *Activity, ctx chasm.MutableContext, workerInstanceKey string, stamp int64, destination string) {
	if slices.ContainsFunc(a.PendingUnbinds, func(p *activitypb.PendingUnbind) bool {
		return p.WorkerInstanceKey == workerInstanceKey && p.Stamp == stamp
	}) {
		return
	}
	a.PendingUnbinds = append(a.PendingUnbinds, &activitypb.PendingUnbind{WorkerInstanceKey: workerInstanceKey, Stamp: stamp})
	ctx.AddTask(chasm.TaskAttributes{Destination: destination}, &activitypb.UnbindTask{WorkerInstanceKey: workerInstanceKey, Stamp: stamp})
}

// sendCancelCommand queues a CancelActivity command for the current attempt on the control
// queue its poll named. Without one (or before the attempt started) there is nobody to tell;
// the heartbeat's cancel_requested remains.
func sendCancelCommand(a *Activity, ctx chasm.MutableContext) {
	if a.Status != statusStarted || a.WorkerControlTaskQueue == "" || len(a.TaskToken) == 0 {
		return
	}
	if slices.ContainsFunc(a.PendingCancelCommands, func(p *activitypb.PendingCancelCommand) bool { return p.Stamp == a.Stamp }) {
		return
	}
	a.PendingCancelCommands = append(a.PendingCancelCommands, &activitypb.PendingCancelCommand{
		Stamp: a.Stamp, ControlQueue: a.WorkerControlTaskQueue, TaskToken: a.TaskToken,
	})
	ctx.AddTask(chasm.TaskAttributes{Destination: CommandDestination}, &activitypb.CancelCommandTask{
		Stamp: a.Stamp, ControlQueue: a.WorkerControlTaskQueue, TaskToken: a.TaskToken,
	})
}

func closeActivity(a *Activity, ctx chasm.MutableContext, outcome *activitypb.ActivityOutcome) {
	a.Outcome = outcome
	a.CloseTime = timestamppb.New(ctx.Now())
}

// failAttempt ends the current attempt with failure: the next attempt after the retry backoff
// when the policy allows one, otherwise the activity closes (FAILED, or TIMED_OUT for a
// timeout failure).
func failAttempt(a *Activity, ctx chasm.MutableContext, failure *failurepb.Failure) error {
	if handled, err := failPausedOrResetAttempt(a, ctx, failure); handled {
		return err
	}
	if delay, ok := retryDelay(a, ctx.Now(), failure); ok {
		return TransitionAttemptFailed.Apply(a, ctx, EventAttemptFailed{Failure: failure, Retry: delay})
	}
	if failure.GetTimeoutFailureInfo() != nil {
		a.LastFailure = failure
		return TransitionTimedOut.Apply(a, ctx, EventTimedOut{Failure: failure})
	}
	return TransitionFailed.Apply(a, ctx, EventAttemptFailed{Failure: failure})
}

// lostAttempt is what became of an attempt taken from a lost worker.
type lostAttempt int

const (
	// lostRescheduled: the next attempt is dispatched at once.
	lostRescheduled lostAttempt = iota + 1
	// lostFailed: it was the last attempt the retry policy allows; the activity FAILED.
	lostFailed
	// lostCanceled: a cancel was requested; with nobody left to acknowledge it, the activity is
	// CANCELED, as a SCHEDULED activity's cancel request is.
	lostCanceled
	// lostPaused: the activity was paused; its next attempt waits PAUSED, undispatched.
	lostPaused
)

// loseWorker takes the current attempt from a lost worker. kind says how the loss was learnt
// ("worker_inactive", "orphaned", "bind_refused"); handOff is as in EventWorkerLost. The
// worker, the time and the kind are kept (lost_worker_*) whatever becomes of the activity.
func loseWorker(a *Activity, ctx chasm.MutableContext, kind, reason string, neverRan bool, detected time.Time, handOff *HandOff) (lostAttempt, error) {
	a.LostWorkerInstanceKey = a.WorkerInstanceKey
	a.LostWorkerTime = timestamppb.New(ctx.Now())
	a.LostWorkerReason = kind
	ev := EventWorkerLost{Reason: reason, NeverRan: neverRan, DetectedTime: detected, HandOff: handOff}
	switch {
	case a.CancelRequested:
		sendCancelCommand(a, ctx) // queued already by the request; kept in case it was given up
		return lostCanceled, TransitionCanceled.Apply(a, ctx, EventCanceled{})
	case a.Pause != nil && (a.ResetRequested || neverRan || !attemptsExhausted(a)):
		return lostPaused, TransitionWorkerLostWhilePaused.Apply(a, ctx, ev)
	case a.ResetRequested:
		// The reset applies now: the next attempt is attempt 1, whatever the policy's count.
		ev.NeverRan = true
		if err := TransitionRescheduled.Apply(a, ctx, ev); err != nil {
			return 0, err
		}
		applyPendingReset(a)
		return lostRescheduled, nil
	case !neverRan && attemptsExhausted(a):
		return lostFailed, TransitionWorkerLostExhausted.Apply(a, ctx, ev)
	}
	return lostRescheduled, TransitionRescheduled.Apply(a, ctx, ev)
}

func attemptsExhausted(a *Activity) bool {
	maxAttempts := a.GetRetryPolicy().GetMaximumAttempts()
	return maxAttempts > 0 && a.Attempt >= maxAttempts
}

// retryDelay decides whether a failed attempt is retried, and after how long: never once a
// cancel was requested, past maximum_attempts, for a non-retryable failure, or when the retry
// would start after the schedule-to-close deadline. The delay is the failure's own
// next_retry_delay if it has one, else initial × coefficient^(attempt-1), capped at the
// maximum interval.
func retryDelay(a *Activity, now time.Time, failure *failurepb.Failure) (time.Duration, bool) {
	if a.CancelRequested || attemptsExhausted(a) || nonRetryable(a, failure) {
		return 0, false
	}
	policy := a.GetRetryPolicy()
	initial := policy.GetInitialInterval().AsDuration()
	maxInterval := policy.GetMaximumInterval().AsDuration()
	backoff := float64(initial) * math.Pow(policy.GetBackoffCoefficient(), float64(a.Attempt-1))
	delay := maxInterval
	if backoff < float64(maxInterval) {
		delay = time.Duration(backoff)
	}
	if next := failure.GetApplicationFailureInfo().GetNextRetryDelay(); next != nil && next.AsDuration() > 0 {
		delay = next.AsDuration()
	}
	if exp := a.GetExpirationTime(); exp != nil && !now.Add(delay).Before(exp.AsTime()) {
		return 0, false
	}
	return delay, true
}

// nonRetryable reports a failure that no retry policy retries: marked non-retryable, of a
// type the policy lists, or the server's own verdict (e.g. a result over limit.blobSize.error).
func nonRetryable(a *Activity, failure *failurepb.Failure) bool {
	if app := failure.GetApplicationFailureInfo(); app != nil {
		if app.GetNonRetryable() || slices.Contains(a.GetRetryPolicy().GetNonRetryableErrorTypes(), app.GetType()) {
			return true
		}
	}
	return failure.GetServerFailureInfo().GetNonRetryable()
}

// timeoutFailure is the failure of a timeout; cause is the last attempt's failure, if any.
func timeoutFailure(kind enumspb.TimeoutType, a *Activity, cause *failurepb.Failure) *failurepb.Failure {
	return &failurepb.Failure{
		Message: fmt.Sprintf("activity %s timeout", kind.String()),
		Source:  failureSource,
		Cause:   cause,
		FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{
			TimeoutType: kind, LastHeartbeatDetails: a.HeartbeatDetails,
		}},
	}
}

func workerLostFailure(a *Activity, reason string, nonRetryable bool) *failurepb.Failure {
	return &failurepb.Failure{
		Message: fmt.Sprintf("worker %s (%s) was lost while running attempt %d: %s",
			a.WorkerInstanceKey, a.WorkerIdentity, a.Attempt, reason),
		Source: failureSource,
		FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{
			Type: WorkerLostFailureType, NonRetryable: nonRetryable,
		}},
	}
}

// heartbeatDeadline is when the current attempt's heartbeat timeout fires, or zero without one.
func heartbeatDeadline(a *Activity) time.Time {
	hb := a.HeartbeatTimeout.AsDuration()
	if hb <= 0 || a.StartedTime == nil {
		return time.Time{}
	}
	last := a.StartedTime
	if a.LastHeartbeatTime != nil {
		last = a.LastHeartbeatTime
	}
	return last.AsTime().Add(hb)
}

// Temporal's retry policy defaults.
const (
	RetryInitialIntervalDefault    = time.Second
	RetryBackoffCoefficientDefault = 2.0
	RetryMaximumIntervalMultiplier = 100
)

// normalizeRetryPolicy fills Temporal's defaults and refuses an inconsistent policy.
func normalizeRetryPolicy(p *commonpb.RetryPolicy) (*commonpb.RetryPolicy, error) {
	out := &commonpb.RetryPolicy{}
	if p != nil {
		out.InitialInterval = p.InitialInterval
		out.BackoffCoefficient = p.BackoffCoefficient
		out.MaximumInterval = p.MaximumInterval
		out.MaximumAttempts = p.MaximumAttempts
		out.NonRetryableErrorTypes = p.NonRetryableErrorTypes
	}
	initial := out.GetInitialInterval().AsDuration()
	switch {
	case initial < 0:
		return nil, invalidArgument("retry_policy.initial_interval must not be negative")
	case initial == 0:
		initial = RetryInitialIntervalDefault
	}
	out.InitialInterval = durationpb.New(initial)
	switch coef := out.GetBackoffCoefficient(); {
	case coef == 0:
		out.BackoffCoefficient = RetryBackoffCoefficientDefault
	case coef < 1:
		return nil, invalidArgument("retry_policy.backoff_coefficient must be at least 1")
	}
	maxInterval := out.GetMaximumInterval().AsDuration()
	switch {
	case maxInterval < 0:
		return nil, invalidArgument("retry_policy.maximum_interval must not be negative")
	case maxInterval == 0:
		maxInterval = RetryMaximumIntervalMultiplier * initial
	case maxInterval < initial:
		return nil, invalidArgument("retry_policy.maximum_interval must not be less than initial_interval")
	}
	out.MaximumInterval = durationpb.New(maxInterval)
	if out.GetMaximumAttempts() < 0 {
		return nil, invalidArgument("retry_policy.maximum_attempts must not be negative")
	}
	return out, nil
}
