package activity

import (
	"time"

	failurepb "go.temporal.io/api/failure/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// Pause, unpause and reset: the operator's commands (PauseActivityExecution,
// UnpauseActivityExecution, ResetActivityExecution), with Temporal's semantics.
//
//	SCHEDULED ─pause─► PAUSED: a new stamp, so the attempt's queued matching task is refused
//	                   and nothing more is dispatched; schedule-to-close still runs.
//	STARTED   ─pause─► STARTED with pause set: the running attempt is not disturbed (it may
//	                   still complete), but its heartbeats answer activity_paused, which makes the
//	                   SDK stop it. If it ends without closing the activity (failure with a retry
//	                   left, timeout, worker lost), the next attempt waits PAUSED.
//	PAUSED    ─unpause─► SCHEDULED: a new stamp, dispatched at once (after the jitter delay),
//	                   or when a pending retry backoff ends unless attempts are reset.
//	STARTED+pause ─unpause─► STARTED: the pause is withdrawn.
//	SCHEDULED, PAUSED ─reset─► SCHEDULED (PAUSED with keep_paused): attempt 1, a new stamp,
//	                   dispatched at once: the backoff is dropped.
//	STARTED   ─reset─► STARTED with reset_requested: heartbeats answer activity_reset; when the
//	                   attempt ends without closing the activity, the next is attempt 1, at once.

// EventPaused is a PauseActivityExecution request.
type EventPaused struct {
	Identity  string
	Reason    string
	RequestID string
}

// EventUnpaused is an UnpauseActivityExecution request.
type EventUnpaused struct {
	ResetAttempts  bool
	ResetHeartbeat bool
	// Delay is the request's jitter, drawn by the caller.
	Delay time.Duration
}

// EventReset is a ResetActivityExecution request.
type EventReset struct {
	KeepPaused     bool
	ResetHeartbeat bool
	Delay          time.Duration
}

var (
	// TransitionPaused stops a waiting activity from being dispatched.
	TransitionPaused = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled}, statusPaused,
		func(a *Activity, ctx chasm.MutableContext, ev EventPaused) error {
			a.Pause = pauseInfo(ctx, ev)
			// A new stamp fences the matching task already queued; the attempt keeps its due
			// time, so a retry backoff still counts when it is unpaused.
			clearAttempt(a, attemptDueTime(a, ctx.Now()))
			return nil
		})

	// TransitionPauseRequested pauses an activity whose attempt runs: the attempt goes on, its
	// heartbeats answer activity_paused.
	TransitionPauseRequested = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusStarted,
		func(a *Activity, ctx chasm.MutableContext, ev EventPaused) error {
			a.Pause = pauseInfo(ctx, ev)
			return nil
		})

	// TransitionUnpaused dispatches a paused activity's attempt under a new stamp.
	TransitionUnpaused = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusPaused}, statusScheduled,
		func(a *Activity, ctx chasm.MutableContext, ev EventUnpaused) error {
			a.Pause = nil
			at := ctx.Now().Add(ev.Delay)
			if ev.ResetAttempts {
				a.Attempt = 1
			} else if due := attemptDueTime(a, at); due.After(at) {
				at = due // the retry backoff the attempt was paused in
			}
			if ev.ResetHeartbeat {
				a.HeartbeatDetails = nil
			}
			scheduleAttempt(a, ctx, at)
			return nil
		})

	// TransitionUnpausedWhileRunning withdraws the pause of a running attempt.
	TransitionUnpausedWhileRunning = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusStarted,
		func(a *Activity, _ chasm.MutableContext, ev EventUnpaused) error {
			a.Pause = nil
			if ev.ResetAttempts {
				a.Attempt = 1 // as Temporal: the running attempt now counts as the first
			}
			if ev.ResetHeartbeat {
				// The details only: last_heartbeat_time keeps the heartbeat timer's deadline.
				a.HeartbeatDetails = nil
			}
			return nil
		})

	// TransitionReset starts the activity over at attempt 1, dispatched at once (after the
	// jitter delay), and unpauses it.
	TransitionReset = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusScheduled, statusPaused}, statusScheduled,
		func(a *Activity, ctx chasm.MutableContext, ev EventReset) error {
			a.Pause = nil
			a.Attempt = 1
			if ev.ResetHeartbeat {
				a.HeartbeatDetails = nil
			}
			scheduleAttempt(a, ctx, ctx.Now().Add(ev.Delay))
			return nil
		})

	// TransitionResetKeepPaused resets a paused activity to attempt 1 and leaves it paused:
	// unpaused, it is dispatched at once.
	TransitionResetKeepPaused = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusPaused}, statusPaused,
		func(a *Activity, ctx chasm.MutableContext, ev EventReset) error {
			a.Attempt = 1
			if ev.ResetHeartbeat {
				a.HeartbeatDetails = nil
			}
			clearAttempt(a, ctx.Now())
			return nil
		})

	// TransitionResetRequested resets an activity whose attempt runs: the attempt goes on, its
	// heartbeats answer activity_reset, and the reset applies when it ends without closing the
	// activity. Without keep_paused it also withdraws a pause.
	TransitionResetRequested = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusStarted,
		func(a *Activity, _ chasm.MutableContext, ev EventReset) error {
			a.ResetRequested = true
			a.ResetHeartbeat = ev.ResetHeartbeat
			if !ev.KeepPaused {
				a.Pause = nil
			}
			return nil
		})

	// TransitionAttemptFailedWhilePaused ends a paused activity's running attempt without
	// closing it: the next attempt waits PAUSED, under a new stamp (attempt 1 if a reset was
	// requested, else the next number, due after the retry backoff).
	TransitionAttemptFailedWhilePaused = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusPaused,
		func(a *Activity, ctx chasm.MutableContext, ev EventAttemptFailed) error {
			endAttempt(a, ctx)
			a.LastFailure = ev.Failure
			a.RescheduledTime = nil
			at := ctx.Now()
			if !applyPendingReset(a) {
				a.Attempt++
				at = at.Add(ev.Retry)
			}
			clearAttempt(a, at)
			return nil
		})

	// TransitionAttemptFailedAfterReset ends a reset activity's running attempt: attempt 1 is
	// dispatched at once.
	TransitionAttemptFailedAfterReset = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusScheduled,
		func(a *Activity, ctx chasm.MutableContext, ev EventAttemptFailed) error {
			endAttempt(a, ctx)
			a.LastFailure = ev.Failure
			a.RescheduledTime = nil
			applyPendingReset(a)
			scheduleAttempt(a, ctx, ctx.Now())
			return nil
		})

	// TransitionWorkerLostWhilePaused takes a paused activity's attempt from a lost worker:
	// the next attempt waits PAUSED. The old worker is sent a CancelActivity command.
	TransitionWorkerLostWhilePaused = chasm.NewTransition(
		[]activitypb.ActivityStatus{statusStarted}, statusPaused,
		func(a *Activity, ctx chasm.MutableContext, ev EventWorkerLost) error {
			sendCancelCommand(a, ctx) // no unbind, as in TransitionRescheduled
			a.LastFailure = workerLostFailure(a, ev.Reason, false)
			a.RescheduledTime = nil
			if !applyPendingReset(a) && !ev.NeverRan {
				a.Attempt++
			}
			clearAttempt(a, ctx.Now())
			return nil
		})
)

// failPausedOrResetAttempt ends the running attempt of a paused or reset activity, when the
// failure leaves the activity open (handled is false otherwise, and failAttempt goes on as
// usual: a cancel request, a non-retryable failure or, without a reset, the last attempt
// closes the activity whatever the pause).
func failPausedOrResetAttempt(a *Activity, ctx chasm.MutableContext, failure *failurepb.Failure) (handled bool, err error) {
	if a.Pause == nil && !a.ResetRequested {
		return false, nil
	}
	if a.CancelRequested || nonRetryable(a, failure) {
		return false, nil
	}
	var delay time.Duration
	if !a.ResetRequested {
		var ok bool
		if delay, ok = retryDelay(a, ctx.Now(), failure); !ok {
			return false, nil
		}
	}
	ev := EventAttemptFailed{Failure: failure, Retry: delay}
	if a.Pause != nil {
		return true, TransitionAttemptFailedWhilePaused.Apply(a, ctx, ev)
	}
	return true, TransitionAttemptFailedAfterReset.Apply(a, ctx, ev)
}

// applyPendingReset applies a reset requested while the attempt ran, if any: attempt 1, and
// the heartbeat details dropped if asked. It reports whether there was one.
func applyPendingReset(a *Activity) bool {
	if !a.ResetRequested {
		return false
	}
	a.Attempt = 1
	if a.ResetHeartbeat {
		a.HeartbeatDetails = nil
	}
	a.ResetRequested = false
	a.ResetHeartbeat = false
	return true
}

func pauseInfo(ctx chasm.MutableContext, ev EventPaused) *activitypb.ActivityPauseInfo {
	return &activitypb.ActivityPauseInfo{
		PauseTime: timestamppb.New(ctx.Now()), Identity: ev.Identity, Reason: ev.Reason, RequestId: ev.RequestID,
	}
}

// attemptDueTime is when the current (waiting) attempt becomes dispatchable: the end of its
// retry backoff, or orElse when it has none.
func attemptDueTime(a *Activity, orElse time.Time) time.Time {
	if t := a.GetAttemptScheduledTime(); t != nil {
		return t.AsTime()
	}
	return orElse
}

// IsPaused reports whether a pause is in force (PAUSED, or a running attempt asked to stop).
func (a *Activity) IsPaused() bool { return a.Pause != nil && !a.IsClosed() }
