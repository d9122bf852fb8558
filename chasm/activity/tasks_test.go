package activity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

func TestRetry(t *testing.T) {
	t.Parallel()

	t.Run("BacksOffExponentiallyUpToMaximumAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withRetry(time.Second, 2, 3))
		wantBackoff := []time.Duration{time.Second, 2 * time.Second}
		for i, backoff := range wantBackoff {
			attempt := int32(i + 1)
			require.EqualValues(t, attempt, task.Attempt)
			require.NoError(t, b.fail(task.TaskToken, appFailure("Transient", false)))
			s := b.describe("a1")
			require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, s.Status)
			require.EqualValues(t, attempt+1, s.Attempt)
			require.EqualValues(t, attempt+1, s.Stamp, "a new stamp for the new attempt")
			require.Equal(t, b.engine.Now().Add(backoff), s.AttemptScheduledTime.AsTime())
			require.Equal(t, "Transient", s.LastFailure.GetApplicationFailureInfo().GetType())

			dispatched := len(b.dispatcher.dispatched())
			b.engine.AdvanceTime(backoff - time.Millisecond)
			b.runSideEffects()
			require.Len(t, b.dispatcher.dispatched(), dispatched, "nothing before the backoff has passed")
			b.engine.AdvanceTime(time.Millisecond)
			b.runSideEffects()
			ref := b.dispatcher.last(t)
			require.EqualValues(t, attempt+1, ref.Stamp)
			require.Equal(t, b.engine.Now(), ref.ScheduledTime)
			task = b.poll(ref)
			require.Equal(t, b.engine.Now(), task.CurrentAttemptScheduledTime.AsTime())
		}
		require.EqualValues(t, 3, task.Attempt)
		require.NoError(t, b.fail(task.TaskToken, appFailure("Transient", false)))
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED, s.Status, "maximum_attempts reached")
		require.Equal(t, "Transient", s.Outcome.GetFailure().GetApplicationFailureInfo().GetType())
	})

	t.Run("BackoffIsCappedAtTheMaximumInterval", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", func(r *activitypb.StartActivityRequest) {
			withRetry(time.Second, 10, 0)(r)
			r.RetryPolicy.MaximumInterval = durationpb.New(5 * time.Second)
		})
		for range 3 {
			require.NoError(t, b.fail(task.TaskToken, appFailure("Transient", false)))
			b.engine.AdvanceTime(5 * time.Second)
			b.runSideEffects()
			task = b.poll(b.dispatcher.last(t))
		}
		require.EqualValues(t, 4, task.Attempt, "each backoff fit in the 5s cap")
	})

	t.Run("NonRetryableFailuresCloseAtOnce", func(t *testing.T) {
		t.Parallel()
		for name, failure := range map[string]*failurepb.Failure{
			"TypeListedInThePolicy":    appFailure("BadInput", false),
			"FailureMarkedByTheWorker": appFailure("Other", true),
		} {
			t.Run(name, func(t *testing.T) {
				b := setup(t)
				task := b.startAndPoll("a1", withRetry(time.Second, 2, 0, "BadInput"))
				require.NoError(t, b.fail(task.TaskToken, failure))
				s := b.describe("a1")
				require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED, s.Status)
				require.True(t, proto.Equal(failure, s.Outcome.GetFailure()))
			})
		}
	})

	t.Run("FailuresNextRetryDelayWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withRetry(time.Second, 2, 0))
		failure := appFailure("RateLimited", false)
		failure.GetApplicationFailureInfo().NextRetryDelay = durationpb.New(42 * time.Second)
		require.NoError(t, b.fail(task.TaskToken, failure))
		require.Equal(t, b.engine.Now().Add(42*time.Second), b.describe("a1").AttemptScheduledTime.AsTime())
	})

	t.Run("NoRetryPastScheduleToClose", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withTimeouts(10*time.Second, 0, 5*time.Second, 0), withRetry(20*time.Second, 2, 0))
		require.NoError(t, b.fail(task.TaskToken, appFailure("Transient", false)))
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED, b.describe("a1").Status)
	})
}

func TestTimeouts(t *testing.T) {
	t.Parallel()

	timeoutOf := func(s *activitypb.ActivityState) enumspb.TimeoutType {
		return s.Outcome.GetFailure().GetTimeoutFailureInfo().GetTimeoutType()
	}

	t.Run("ScheduleToStartClosesTheActivity", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1", withTimeouts(0, 30*time.Second, time.Minute, 0), withRetry(time.Second, 2, 0))
		ref := b.dispatcher.last(t)
		b.engine.AdvanceTime(30 * time.Second)
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT, s.Status, "never retried")
		require.Equal(t, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, timeoutOf(s))
		_, err := b.recordStarted(ref, testWorkerKey, "late-poll")
		requireNotFound(t, err)
	})

	t.Run("ScheduleToStartDoesNotFireOnceStarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startAndPoll("a1", withTimeouts(0, 30*time.Second, time.Minute, 0))
		b.engine.AdvanceTime(30 * time.Second)
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, b.describe("a1").Status)
	})

	t.Run("StartToCloseFailsTheAttemptAndRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withTimeouts(0, 0, time.Minute, 0), withRetry(time.Second, 2, 2))
		b.engine.AdvanceTime(time.Minute)
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, s.Status)
		require.EqualValues(t, 2, s.Attempt)
		require.Equal(t, enumspb.TIMEOUT_TYPE_START_TO_CLOSE, s.LastFailure.GetTimeoutFailureInfo().GetTimeoutType())
		requireNotFound(t, b.complete(task.TaskToken, "too late"))

		b.engine.AdvanceTime(time.Second)
		b.runSideEffects()
		b.poll(b.dispatcher.last(t))
		b.engine.AdvanceTime(time.Minute)
		s = b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT, s.Status, "out of attempts")
		require.Equal(t, enumspb.TIMEOUT_TYPE_START_TO_CLOSE, timeoutOf(s))
	})

	t.Run("HeartbeatsKeepTheAttemptAliveUntilTheyStop", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withTimeouts(0, 0, time.Hour, 10*time.Second), withRetry(time.Second, 2, 1))
		for i := range 10 {
			b.engine.AdvanceTime(8 * time.Second)
			_, err := b.heartbeat(task.TaskToken, "progress")
			require.NoError(t, err, "heartbeat %d", i)
		}
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, b.describe("a1").Status)
		require.Equal(t, 1, b.pendingOfType("heartbeatTimeout"), "one timer, replaced by each heartbeat")

		b.engine.AdvanceTime(10 * time.Second)
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT, s.Status)
		require.Equal(t, enumspb.TIMEOUT_TYPE_HEARTBEAT, timeoutOf(s))
		require.True(t, proto.Equal(payloads("progress"),
			s.Outcome.GetFailure().GetTimeoutFailureInfo().GetLastHeartbeatDetails()))
	})

	t.Run("HeartbeatDetailsReachTheNextAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withTimeouts(0, 0, time.Hour, 10*time.Second), withRetry(time.Second, 2, 0))
		_, err := b.heartbeat(task.TaskToken, "checkpoint-7")
		require.NoError(t, err)
		b.engine.AdvanceTime(10 * time.Second)
		b.engine.AdvanceTime(time.Second)
		b.runSideEffects()
		next := b.poll(b.dispatcher.last(t))
		require.EqualValues(t, 2, next.Attempt)
		require.True(t, proto.Equal(payloads("checkpoint-7"), next.HeartbeatDetails))
		_, err = b.heartbeat(task.TaskToken, "from the old attempt")
		requireNotFound(t, err)
	})

	t.Run("ScheduleToCloseEndsWhateverTheAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withTimeouts(time.Minute, 0, 40*time.Second, 0), withRetry(time.Second, 1, 0))
		b.engine.AdvanceTime(40 * time.Second) // attempt 1 times out, attempt 2 after 1s
		b.engine.AdvanceTime(time.Second)
		b.runSideEffects()
		b.poll(b.dispatcher.last(t))
		b.engine.AdvanceTime(19 * time.Second)
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT, s.Status)
		require.Equal(t, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, timeoutOf(s))
		require.Equal(t, enumspb.TIMEOUT_TYPE_START_TO_CLOSE,
			s.Outcome.GetFailure().GetCause().GetTimeoutFailureInfo().GetTimeoutType(), "caused by the last attempt's failure")
		requireNotFound(t, b.complete(task.TaskToken, "late"))
		b.runSideEffects()
		_, unbinds := b.binder.calls()
		require.Len(t, unbinds, 2, "both attempts were bound and both are unbound")
	})
}

func TestStaleAttemptsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.startAndPoll("a1", withTimeouts(0, 0, time.Minute, 0), withRetry(time.Second, 2, 0))
	b.engine.AdvanceTime(time.Minute)
	b.engine.AdvanceTime(time.Second)
	b.runSideEffects()
	current := b.poll(b.dispatcher.last(t))
	before := b.describe("a1")

	requireNotFound(t, b.complete(old.TaskToken, "from the old attempt"))
	requireNotFound(t, b.fail(old.TaskToken, appFailure("x", true)))
	_, err := b.heartbeat(old.TaskToken, "old")
	requireNotFound(t, err)
	_, err = b.handler.RespondActivityTaskCanceled(b.ctx, &activitypb.RespondActivityTaskCanceledRequest{
		NamespaceId: testNamespaceID, TaskToken: old.TaskToken,
	})
	requireNotFound(t, err)
	require.True(t, proto.Equal(before, b.describe("a1")), "nothing changed")

	require.NoError(t, b.complete(current.TaskToken, "ok"))
}

func TestBind(t *testing.T) {
	t.Parallel()

	t.Run("WorkerNotActiveReschedulesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.binder.answer(activity.BindOutcomeWorkerNotActive)
		b.start("a1")
		task := b.poll(b.dispatcher.last(t))
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, s.Status)
		require.EqualValues(t, 1, s.Attempt, "it never ran on a live worker: the attempt is not used up")
		require.EqualValues(t, 2, s.Stamp)
		require.Equal(t, activity.WorkerLostFailureType, s.LastFailure.GetApplicationFailureInfo().GetType())

		b.binder.answer(activity.BindOutcomeBound)
		b.runSideEffects()
		require.EqualValues(t, 2, b.dispatcher.last(t).Stamp, "dispatched again without backoff")
		require.Equal(t, []cancelCommand{{testNamespaceID, testControlQueue, task.TaskToken}}, b.sender.sent())
		_, unbinds := b.binder.calls()
		require.Empty(t, unbinds, "it was never bound")
		requireNotFound(t, b.complete(task.TaskToken, "from the expired worker"))
	})

	// An SDK worker polls before its first heartbeat lands: a worker starting into a backlog
	// gets a task while it has no liveness record yet. Once it registers, the attempt is
	// bound, so its death reschedules it.
	t.Run("WorkerThatRegistersAfterItsPollIsBound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.binder.answer(activity.BindOutcomeWorkerUnknown)
		b.startAndPoll("a1")
		s := b.describe("a1")
		require.Zero(t, s.BindCheckedStamp, "the bind waits for the worker")
		require.Equal(t, 1, b.pendingOfType("rebind"))

		b.binder.answer(activity.BindOutcomeBound) // its first heartbeat landed
		b.engine.AdvanceTime(250 * time.Millisecond)
		b.runSideEffects()
		s = b.describe("a1")
		require.EqualValues(t, 1, s.BoundStamp)
		require.Nil(t, s.RebindTime)
		require.Zero(t, b.pendingOfType("rebind"))
		binds, _ := b.binder.calls()
		require.Len(t, binds, 2)
	})

	t.Run("WorkerThatNeverRegistersIsLeftToItsTimeouts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.binder.answer(activity.BindOutcomeWorkerUnknown) // its heartbeats are off
		task := b.startAndPoll("a1")
		for range 12 {
			b.engine.AdvanceTime(time.Second)
			b.runSideEffects()
		}
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, s.Status)
		require.Zero(t, s.BoundStamp)
		require.EqualValues(t, 1, s.BindCheckedStamp, "given up after activity.bindRegistrationWait")
		require.Zero(t, b.pendingOfType("rebind"))
		binds, _ := b.binder.calls()
		require.LessOrEqual(t, len(binds), 7, "the retries back off")
		require.NoError(t, b.complete(task.TaskToken, "ok"))
		require.Zero(t, b.pendingOfType("unbind"))
	})

	t.Run("IsRetriedUntilTheWorkerShardAnswers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1")
		_, err := b.recordStarted(b.dispatcher.last(t), testWorkerKey, "p")
		require.NoError(t, err)
		b.binder.failWith = errDown
		require.Error(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Equal(t, 1, b.pendingOfType("bind"))
		b.binder.failWith = nil
		b.runSideEffects()
		require.EqualValues(t, 1, b.describe("a1").BoundStamp)
	})

	t.Run("ABindThatLandsAfterTheAttemptEndedIsUndone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1")
		resp, err := b.recordStarted(b.dispatcher.last(t), testWorkerKey, "p")
		require.NoError(t, err)
		binds := b.engine.PendingTasksOfType(activity.LibraryName + ".bind")
		require.Len(t, binds, 1)
		// The bind is in flight (validated, executing) when the attempt completes: emulate by
		// completing first and running the executor regardless of its validator.
		require.NoError(t, b.complete(resp.TaskToken, "fast"))
		require.NoError(t, binds[0].Task.Type.ExecuteSideEffect(chasmEngineContext(b), binds[0].Ref, binds[0].Task))
		s := b.describe("a1")
		require.Len(t, s.PendingUnbinds, 1)
		b.runSideEffects()
		_, unbinds := b.binder.calls()
		require.Len(t, unbinds, 1)
		require.Empty(t, b.describe("a1").PendingUnbinds)
	})
}

func TestDispatchIsRetriedUntilMatchingTakesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dispatcher.failWith = errDown
	_, err := b.handler.StartActivity(b.ctx, startRequest("a1"))
	require.NoError(t, err)
	require.Error(t, b.engine.RunSideEffectTasks(b.ctx))
	require.Equal(t, 1, b.pendingOfType("dispatch"))
	b.dispatcher.failWith = nil
	b.runSideEffects()
	require.Len(t, b.dispatcher.dispatched(), 1)
	require.EqualValues(t, 1, b.describe("a1").DispatchedStamp)
}

func TestRedispatchWhileWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	require.Len(t, b.dispatcher.dispatched(), 1)

	// Matching may have lost the task (it keeps tasks in memory): it is queued again, less
	// and less often, for as long as the attempt waits.
	for i, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		b.engine.AdvanceTime(wait - time.Second)
		b.runSideEffects()
		require.Len(t, b.dispatcher.dispatched(), i+1)
		b.engine.AdvanceTime(time.Second)
		b.runSideEffects()
		require.Len(t, b.dispatcher.dispatched(), i+2, "re-dispatch %d after %v", i+1, wait)
		require.EqualValues(t, 1, b.dispatcher.last(t).Stamp)
	}
	require.Equal(t, 1, b.pendingOfType("redispatch"), "one timer per activity")

	b.poll(b.dispatcher.last(t))
	n := len(b.dispatcher.dispatched())
	b.engine.AdvanceTime(time.Hour)
	b.runSideEffects()
	require.Len(t, b.dispatcher.dispatched(), n, "a started attempt is not dispatched again")
}
