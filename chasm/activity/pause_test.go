package activity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	activityv1 "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

const (
	statusScheduled = activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED
	statusStarted   = activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED
	statusPaused    = activitypb.ActivityStatus_ACTIVITY_STATUS_PAUSED
	statusCompleted = activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED
	statusFailed    = activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED
	statusTimedOut  = activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT
)

func (b *bundle) pause(activityID, requestID string) error {
	_, err := b.handler.PauseActivity(b.ctx, &activitypb.PauseActivityRequest{
		NamespaceId: testNamespaceID, ActivityId: activityID, Identity: "ops", Reason: "maintenance", RequestId: requestID,
	})
	return err
}

func (b *bundle) unpause(req *activitypb.UnpauseActivityRequest) error {
	req.NamespaceId = testNamespaceID
	_, err := b.handler.UnpauseActivity(b.ctx, req)
	return err
}

func (b *bundle) reset(req *activitypb.ResetActivityRequest) error {
	req.NamespaceId = testNamespaceID
	_, err := b.handler.ResetActivity(b.ctx, req)
	return err
}

func TestPauseScheduledActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	queued := b.dispatcher.last(t)

	require.NoError(t, b.pause("a1", "p1"))
	state := b.describe("a1")
	require.Equal(t, statusPaused, state.Status)
	require.Equal(t, "ops", state.Pause.GetIdentity())
	require.Equal(t, "maintenance", state.Pause.GetReason())
	require.Equal(t, b.engine.Now(), state.Pause.GetPauseTime().AsTime())
	require.Equal(t, enumspb.PENDING_ACTIVITY_STATE_PAUSED, activity.ToActivityExecutionInfo("a1", "", state).GetRunState())

	// The task matching already holds is refused, and nothing new is dispatched while paused,
	// however long it waits (the re-dispatch timer is no longer valid).
	_, err := b.recordStarted(queued, testWorkerKey, "poll-late")
	requireNotFound(t, err)
	before := len(b.dispatcher.dispatched())
	b.engine.AdvanceTime(time.Hour)
	b.runSideEffects()
	require.Len(t, b.dispatcher.dispatched(), before)
	require.Equal(t, statusPaused, b.describe("a1").Status)

	// A retry of the same request is a no-op; another pause is FailedPrecondition.
	require.NoError(t, b.pause("a1", "p1"))
	requireFailedPrecondition(t, b.pause("a1", "p2"))

	// Unpaused: dispatched at once under a new stamp, and a worker can start it.
	require.NoError(t, b.unpause(&activitypb.UnpauseActivityRequest{ActivityId: "a1"}))
	b.runSideEffects()
	state = b.describe("a1")
	require.Equal(t, statusScheduled, state.Status)
	require.Nil(t, state.Pause)
	next := b.dispatcher.last(t)
	require.Greater(t, next.Stamp, queued.Stamp)
	task := b.poll(next)
	require.NoError(t, b.complete(task.TaskToken, "done"))
	require.Equal(t, statusCompleted, b.describe("a1").Status)

	// A closed activity cannot be paused; unpausing an activity that is not paused is a no-op.
	requireFailedPrecondition(t, b.pause("a1", "p3"))
	requireFailedPrecondition(t, b.unpause(&activitypb.UnpauseActivityRequest{ActivityId: "a1"}))
}

func TestPauseRunningAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1", withRetry(time.Second, 2, 0))

	require.NoError(t, b.pause("a1", ""))
	require.Equal(t, statusStarted, b.describe("a1").Status, "the running attempt is not disturbed")
	hb, err := b.heartbeat(task.TaskToken, "half")
	require.NoError(t, err)
	require.True(t, hb.ActivityPaused, "the heartbeat tells the worker")
	require.False(t, hb.ActivityReset)

	// The SDK stops the attempt and reports it failed: the next attempt waits PAUSED.
	require.NoError(t, b.fail(task.TaskToken, appFailure("context canceled", false)))
	state := b.describe("a1")
	require.Equal(t, statusPaused, state.Status)
	require.EqualValues(t, 2, state.Attempt)
	require.Equal(t, "half", string(state.HeartbeatDetails.Payloads[0].Data[1:5]))
	before := len(b.dispatcher.dispatched())
	b.engine.AdvanceTime(time.Hour)
	b.runSideEffects()
	require.Len(t, b.dispatcher.dispatched(), before, "nothing dispatched while paused")

	// Unpause with reset attempts and heartbeat: attempt 1 at once, no details.
	require.NoError(t, b.unpause(&activitypb.UnpauseActivityRequest{ActivityId: "a1", ResetAttempts: true, ResetHeartbeat: true}))
	b.runSideEffects()
	next := b.poll(b.dispatcher.last(t))
	require.EqualValues(t, 1, next.Attempt)
	require.Nil(t, next.HeartbeatDetails)
}

func TestPauseRunningAttemptThatCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1")
	require.NoError(t, b.pause("a1", ""))
	require.NoError(t, b.complete(task.TaskToken, "done anyway"))
	require.Equal(t, statusCompleted, b.describe("a1").Status)
}

func TestUnpauseRunningAttemptWithdrawsThePause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1")
	require.NoError(t, b.pause("a1", ""))
	require.NoError(t, b.unpause(&activitypb.UnpauseActivityRequest{ActivityId: "a1"}))
	hb, err := b.heartbeat(task.TaskToken, "x")
	require.NoError(t, err)
	require.False(t, hb.ActivityPaused)
	// A failure now retries as usual.
	require.NoError(t, b.fail(task.TaskToken, appFailure("oops", false)))
	require.Equal(t, statusScheduled, b.describe("a1").Status)
}

func TestPausedAttemptTimesOutIntoPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAndPoll("a1", withTimeouts(0, 0, time.Minute, 0))
	require.NoError(t, b.pause("a1", ""))
	b.engine.AdvanceTime(time.Minute) // start-to-close fires
	state := b.describe("a1")
	require.Equal(t, statusPaused, state.Status)
	require.EqualValues(t, 2, state.Attempt)
	require.NotNil(t, state.LastFailure.GetTimeoutFailureInfo())
}

func TestPausedActivityStillTimesOutScheduleToClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1", withTimeouts(10*time.Minute, 0, time.Minute, 0))
	require.NoError(t, b.pause("a1", ""))
	b.engine.AdvanceTime(10 * time.Minute)
	require.Equal(t, statusTimedOut, b.describe("a1").Status)
}

func TestPausedAttemptOfLostWorkerWaitsPaused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1")
	require.NoError(t, b.pause("a1", ""))
	ref := b.dispatcher.last(t)
	before := len(b.dispatcher.dispatched())
	outcomes := b.reschedule(testWorkerKey, entry("a1", ref.RunID, ref.Stamp))
	require.Equal(t, "RESCHEDULE_OUTCOME_RESCHEDULED", outcomes[0].String())
	b.runSideEffects()
	state := b.describe("a1")
	require.Equal(t, statusPaused, state.Status)
	require.EqualValues(t, 2, state.Attempt)
	require.Len(t, b.dispatcher.dispatched(), before, "not handed to matching while paused")
	requireNotFound(t, b.complete(task.TaskToken, "late"))
	require.NotEmpty(t, b.sender.sent(), "the old worker is told to stop")
}

func TestResetScheduledActivityDropsBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1", withRetry(time.Hour, 2, 5))
	require.NoError(t, b.fail(task.TaskToken, appFailure("oops", false)))
	require.EqualValues(t, 2, b.describe("a1").Attempt)
	before := len(b.dispatcher.dispatched())

	require.NoError(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1"}))
	b.runSideEffects()
	require.Len(t, b.dispatcher.dispatched(), before+1, "dispatched at once, not after the hour of backoff")
	next := b.poll(b.dispatcher.last(t))
	require.EqualValues(t, 1, next.Attempt)
}

func TestResetPausedActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1", withRetry(time.Second, 2, 0))
	require.NoError(t, b.fail(task.TaskToken, appFailure("oops", false)))
	require.NoError(t, b.pause("a1", ""))

	// keep_paused: attempt 1, still paused.
	require.NoError(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1", KeepPaused: true}))
	state := b.describe("a1")
	require.Equal(t, statusPaused, state.Status)
	require.EqualValues(t, 1, state.Attempt)

	// Without: unpaused and dispatched.
	require.NoError(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1"}))
	b.runSideEffects()
	require.Equal(t, statusScheduled, b.describe("a1").Status)
	require.EqualValues(t, 1, b.poll(b.dispatcher.last(t)).Attempt)
}

func TestResetRunningAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1", withRetry(time.Minute, 2, 3))
	// Two failed attempts: the third is the last the policy allows.
	for range 2 {
		task := b.poll(b.dispatcher.last(t))
		require.NoError(t, b.fail(task.TaskToken, appFailure("oops", false)))
		b.engine.AdvanceTime(10 * time.Minute)
		b.runSideEffects()
	}
	task := b.poll(b.dispatcher.last(t))
	require.EqualValues(t, 3, task.Attempt)
	_, err := b.heartbeat(task.TaskToken, "progress")
	require.NoError(t, err)

	require.NoError(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1", ResetHeartbeat: true}))
	require.Equal(t, statusStarted, b.describe("a1").Status, "the running attempt is not disturbed")
	hb, err := b.heartbeat(task.TaskToken, "more")
	require.NoError(t, err)
	require.True(t, hb.ActivityReset)
	requireFailedPrecondition(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1"}))

	// The worker stops the attempt: it was the last allowed, but the reset makes the next
	// attempt 1, dispatched at once under a new stamp, without the details.
	before := len(b.dispatcher.dispatched())
	require.NoError(t, b.fail(task.TaskToken, appFailure("reset", false)))
	b.runSideEffects()
	state := b.describe("a1")
	require.Equal(t, statusScheduled, state.Status)
	require.False(t, state.ResetRequested)
	require.Nil(t, state.HeartbeatDetails)
	require.Len(t, b.dispatcher.dispatched(), before+1)
	next := b.poll(b.dispatcher.last(t))
	require.EqualValues(t, 1, next.Attempt)
	requireNotFound(t, b.complete(task.TaskToken, "late"))
}

func TestResetRunningAttemptOfLostWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1", withRetry(time.Minute, 2, 2))
	task := b.poll(b.dispatcher.last(t))
	require.NoError(t, b.fail(task.TaskToken, appFailure("oops", false)))
	b.engine.AdvanceTime(10 * time.Minute)
	b.runSideEffects()
	ref := b.dispatcher.last(t)
	b.poll(ref) // attempt 2 of 2
	require.NoError(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1"}))

	// Its worker is lost on the last attempt: the reset keeps the activity alive, at attempt 1.
	outcomes := b.reschedule(testWorkerKey, entry("a1", ref.RunID, ref.Stamp))
	require.Equal(t, "RESCHEDULE_OUTCOME_RESCHEDULED", outcomes[0].String())
	next := b.poll(b.dispatcher.last(t))
	require.EqualValues(t, 1, next.Attempt)
}

func TestResetAndPauseRefusedAfterCancelRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAndPoll("a1")
	_, err := b.handler.RequestCancelActivity(b.ctx, &activitypb.RequestCancelActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	requireFailedPrecondition(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1"}))
	requireFailedPrecondition(t, b.pause("a1", ""))
}

func TestCancelAndTerminatePausedActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	b.start("a2")
	require.NoError(t, b.pause("a1", ""))
	require.NoError(t, b.pause("a2", ""))
	_, err := b.handler.RequestCancelActivity(b.ctx, &activitypb.RequestCancelActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_CANCELED, b.describe("a1").Status)
	_, err = b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a2"})
	require.NoError(t, err)
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TERMINATED, b.describe("a2").Status)
}

func updateOptions(b *bundle, activityID string, o *activityv1.ActivityOptions, paths ...string) (*activitypb.UpdateActivityOptionsResponse, error) {
	return b.handler.UpdateActivityOptions(b.ctx, &activitypb.UpdateActivityOptionsRequest{
		NamespaceId: testNamespaceID, ActivityId: activityID, Options: o, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
	})
}

func TestUpdateOptionsOfWaitingActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	queued := b.dispatcher.last(t)

	// The paths `temporal activity update-options` sends (snake_case, task_queue_name).
	resp, err := updateOptions(b, "a1", &activityv1.ActivityOptions{
		TaskQueue:        &taskqueuepb.TaskQueue{Name: "other"},
		HeartbeatTimeout: durationpb.New(10 * time.Second),
		RetryPolicy:      &commonpb.RetryPolicy{MaximumAttempts: 7},
	}, "task_queue_name", "heartbeat_timeout", "retry_policy.maximum_attempts")
	require.NoError(t, err)
	require.Equal(t, "other", resp.Options.GetTaskQueue().GetName())
	require.Equal(t, 10*time.Second, resp.Options.GetHeartbeatTimeout().AsDuration())
	require.EqualValues(t, 7, resp.Options.GetRetryPolicy().GetMaximumAttempts())
	require.Equal(t, time.Second, resp.Options.GetRetryPolicy().GetInitialInterval().AsDuration(), "other fields kept")

	// Queued again, in the new task queue, under a new stamp; the old task is refused.
	b.runSideEffects()
	next := b.dispatcher.last(t)
	require.Equal(t, "other", next.TaskQueue)
	require.Greater(t, next.Stamp, queued.Stamp)
	_, err = b.recordStarted(queued, testWorkerKey, "poll-old")
	requireNotFound(t, err)

	// restore_original brings back what it was started with.
	restored, err := b.handler.UpdateActivityOptions(b.ctx, &activitypb.UpdateActivityOptionsRequest{
		NamespaceId: testNamespaceID, ActivityId: "a1", RestoreOriginal: true})
	require.NoError(t, err)
	require.Equal(t, testTaskQueue, restored.Options.GetTaskQueue().GetName())
	require.NotNil(t, restored.Options.GetHeartbeatTimeout(), "an unset timeout is a zero duration, as in Temporal")
	require.Zero(t, restored.Options.GetHeartbeatTimeout().AsDuration())
}

func TestUpdateOptionsMovesRunningAttemptsTimers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1", withTimeouts(0, 0, time.Minute, 0), withRetry(time.Second, 2, 0))
	_, err := updateOptions(b, "a1", &activityv1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Hour)}, "startToCloseTimeout")
	require.NoError(t, err)

	b.engine.AdvanceTime(2 * time.Minute) // the old deadline passes: nothing happens
	require.Equal(t, statusStarted, b.describe("a1").Status)
	require.NoError(t, b.complete(task.TaskToken, "done"), "the running attempt keeps its token")
}

func TestUpdateOptionsShortensScheduleToClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1", withTimeouts(time.Hour, 0, time.Minute, 0))
	_, err := updateOptions(b, "a1", &activityv1.ActivityOptions{ScheduleToCloseTimeout: durationpb.New(5 * time.Minute)}, "schedule_to_close_timeout")
	require.NoError(t, err)
	b.engine.AdvanceTime(5 * time.Minute)
	require.Equal(t, statusTimedOut, b.describe("a1").Status)
}

func TestUpdateOptionsRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	for name, tc := range map[string]struct {
		options *activityv1.ActivityOptions
		paths   []string
	}{
		"NoMask":          {&activityv1.ActivityOptions{}, nil},
		"UnknownPath":     {&activityv1.ActivityOptions{}, []string{"input"}},
		"EmptyTaskQueue":  {&activityv1.ActivityOptions{TaskQueue: &taskqueuepb.TaskQueue{}}, []string{"task_queue.name"}},
		"NegativeTimeout": {&activityv1.ActivityOptions{HeartbeatTimeout: durationpb.New(-time.Second)}, []string{"heartbeat_timeout"}},
		"BadRetryPolicy":  {&activityv1.ActivityOptions{RetryPolicy: &commonpb.RetryPolicy{BackoffCoefficient: 0.5}}, []string{"retry_policy.backoff_coefficient"}},
		"NoTimeoutLeft":   {&activityv1.ActivityOptions{}, []string{"start_to_close_timeout"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := updateOptions(b, "a1", tc.options, tc.paths...)
			var invalid *serviceerror.InvalidArgument
			require.ErrorAs(t, err, &invalid)
			require.Equal(t, testTaskQueue, b.describe("a1").TaskQueue, "nothing half-applied")
		})
	}
	task := b.poll(b.dispatcher.last(t))
	require.NoError(t, b.complete(task.TaskToken, "done"))
	_, err := updateOptions(b, "a1", &activityv1.ActivityOptions{HeartbeatTimeout: durationpb.New(time.Second)}, "heartbeat_timeout")
	requireFailedPrecondition(t, err)
}

// A retried command (same request ID) is not applied twice: a retried reset of a running
// attempt is not refused as "a reset is pending", a retried update answers the options.
func TestRetriedCommandsAreAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAndPoll("a1")
	reset := &activitypb.ResetActivityRequest{ActivityId: "a1", RequestId: "reset-1"}
	require.NoError(t, b.reset(reset))
	require.NoError(t, b.reset(reset), "the retry succeeds")
	requireFailedPrecondition(t, b.reset(&activitypb.ResetActivityRequest{ActivityId: "a1", RequestId: "reset-2"}))

	update := &activitypb.UpdateActivityOptionsRequest{
		NamespaceId: testNamespaceID, ActivityId: "a1", RequestId: "update-1",
		Options:    &activityv1.ActivityOptions{HeartbeatTimeout: durationpb.New(10 * time.Second)},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"heartbeat_timeout"}},
	}
	_, err := b.handler.UpdateActivityOptions(b.ctx, update)
	require.NoError(t, err)
	update.Options.HeartbeatTimeout = durationpb.New(20 * time.Second) // a retry must not apply a different body
	resp, err := b.handler.UpdateActivityOptions(b.ctx, update)
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, resp.Options.GetHeartbeatTimeout().AsDuration())

	require.NoError(t, b.pause("a1", "p"))
	unpause := &activitypb.UnpauseActivityRequest{ActivityId: "a1", RequestId: "unpause-1"}
	require.NoError(t, b.unpause(unpause))
	require.NoError(t, b.pause("a1", "p2"))
	require.NoError(t, b.unpause(unpause), "a replay of the old unpause")
	require.NotNil(t, b.describe("a1").Pause, "does not lift the newer pause")
}
