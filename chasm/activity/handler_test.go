package activity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	errordetails "go.temporal.io/api/errordetails/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

func TestHappyPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.engine.Now()
	runID := b.start("a1", withTimeouts(10*time.Minute, 0, 0, 0))

	ref := b.dispatcher.last(t)
	require.Equal(t, activity.ActivityTaskRef{
		NamespaceID: testNamespaceID, TaskQueue: testTaskQueue, ActivityID: "a1", RunID: runID, Stamp: 1, ScheduledTime: start,
	}, ref)
	require.Empty(t, b.engine.SideEffectTasks(), "the dispatch ran once and is done")

	b.engine.AdvanceTime(time.Second)
	task := b.poll(ref)
	require.NotEmpty(t, task.TaskToken)
	require.Equal(t, "a1", task.ActivityId)
	require.Equal(t, runID, task.ActivityRunId)
	require.Equal(t, "Charge", task.ActivityType.Name)
	require.Equal(t, testNamespace, task.Namespace)
	require.EqualValues(t, 1, task.Attempt)
	require.Equal(t, 10*time.Minute, task.StartToCloseTimeout.AsDuration(), "start-to-close defaults to schedule-to-close")
	require.Equal(t, 10*time.Minute, task.ScheduleToCloseTimeout.AsDuration())
	require.Equal(t, start, task.ScheduledTime.AsTime())
	require.Equal(t, start, task.CurrentAttemptScheduledTime.AsTime())
	require.Equal(t, start.Add(time.Second), task.StartedTime.AsTime())
	require.True(t, proto.Equal(payloads("input"), task.Input))
	require.Equal(t, 2.0, task.RetryPolicy.BackoffCoefficient, "Temporal's default retry policy")
	require.Equal(t, 100*time.Second, task.RetryPolicy.MaximumInterval.AsDuration())

	binds, _ := b.binder.calls()
	require.Equal(t, []bindCall{{testNamespaceID, testWorkerKey, activity.Binding{ActivityID: "a1", RunID: runID, Stamp: 1}}}, binds)
	state := b.describe("a1")
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, state.Status)
	require.EqualValues(t, 1, state.BoundStamp)
	require.Equal(t, testControlQueue, state.WorkerControlTaskQueue)

	token, err := activity.DecodeTaskToken(task.TaskToken)
	require.NoError(t, err)
	require.Equal(t, "a1", token.ActivityId)
	require.EqualValues(t, 1, token.Stamp)

	require.NoError(t, b.complete(task.TaskToken, "done"))
	state = b.describe("a1")
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, state.Status)
	require.True(t, proto.Equal(payloads("done"), state.Outcome.GetResult()))
	require.Equal(t, b.engine.Now(), state.CloseTime.AsTime())

	b.runSideEffects()
	_, unbinds := b.binder.calls()
	require.Equal(t, []bindCall{{testNamespaceID, testWorkerKey, activity.Binding{ActivityID: "a1", RunID: runID, Stamp: 1}}}, unbinds)
	require.Empty(t, b.describe("a1").PendingUnbinds)

	poll, err := b.handler.PollActivityExecution(b.ctx, &activitypb.PollActivityExecutionRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	require.Equal(t, runID, poll.RunId)
	require.True(t, proto.Equal(payloads("done"), activity.ToActivityExecutionOutcome(poll.Outcome).GetResult()))

	// The worker's retry of its completion is refused: the attempt is over.
	requireNotFound(t, b.complete(task.TaskToken, "again"))
	// Every timer left is stale and drops out without effect.
	b.engine.AdvanceTime(time.Hour)
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, b.describe("a1").Status)
	require.Empty(t, b.engine.PendingTimers())
}

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("ValidatesTheRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cases := map[string]startOption{
			"NoTimeouts":        func(r *activitypb.StartActivityRequest) { r.StartToCloseTimeout = nil },
			"NegativeTimeout":   func(r *activitypb.StartActivityRequest) { r.HeartbeatTimeout = durationpb.New(-time.Second) },
			"NoTaskQueue":       func(r *activitypb.StartActivityRequest) { r.TaskQueue = "" },
			"NoActivityType":    func(r *activitypb.StartActivityRequest) { r.ActivityType = nil },
			"BadBackoff":        withRetry(time.Second, 0.5, 0),
			"NegativeAttempts":  withRetry(time.Second, 2, -1),
			"NoNamespaceName":   func(r *activitypb.StartActivityRequest) { r.Namespace = "" },
			"NoActivityID":      func(r *activitypb.StartActivityRequest) { r.ActivityId = "" },
			"ZeroSecondsForAll": withTimeouts(0, 0, 0, 0),
		}
		for name, opt := range cases {
			t.Run(name, func(t *testing.T) {
				_, err := b.handler.StartActivity(b.ctx, startRequest("bad", opt))
				var invalid *serviceerror.InvalidArgument
				require.True(t, errors.As(err, &invalid), "want InvalidArgument, got %v", err)
			})
		}
	})

	t.Run("SameRequestIDReturnsTheSameRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.handler.StartActivity(b.ctx, startRequest("a1"))
		require.NoError(t, err)
		require.True(t, first.Started)
		again, err := b.handler.StartActivity(b.ctx, startRequest("a1"))
		require.NoError(t, err)
		require.Equal(t, first.RunId, again.RunId)
		require.False(t, again.Started)
		require.Equal(t, 1, b.pendingOfType("dispatch"), "nothing was dispatched twice")
	})

	t.Run("ConflictingStartIsActivityExecutionAlreadyStarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.handler.StartActivity(b.ctx, startRequest("a1"))
		require.NoError(t, err)
		_, err = b.handler.StartActivity(b.ctx, startRequest("a1", withRequestID("other")))
		var already *serviceerror.ActivityExecutionAlreadyStarted
		require.True(t, errors.As(err, &already), "got %v", err)
		require.Equal(t, first.RunId, already.RunId)
		require.Equal(t, "req-a1", already.StartRequestId)
		st := serviceerror.ToStatus(err)
		require.Len(t, st.Details(), 1)
		_, ok := st.Details()[0].(*errordetails.ActivityExecutionAlreadyStartedFailure)
		require.True(t, ok, "details %T", st.Details()[0])
	})

	t.Run("UseExistingReturnsTheRunningRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.handler.StartActivity(b.ctx, startRequest("a1"))
		require.NoError(t, err)
		resp, err := b.handler.StartActivity(b.ctx, startRequest("a1", withRequestID("other"), func(r *activitypb.StartActivityRequest) {
			r.IdConflictPolicy = enumspb.ACTIVITY_ID_CONFLICT_POLICY_USE_EXISTING
		}))
		require.NoError(t, err)
		require.Equal(t, first.RunId, resp.RunId)
		require.False(t, resp.Started)
	})

	t.Run("ReusePolicyDecidesAfterTheRunCloses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		require.NoError(t, b.complete(task.TaskToken, "ok"))

		_, err := b.handler.StartActivity(b.ctx, startRequest("a1", withRequestID("r2"), func(r *activitypb.StartActivityRequest) {
			r.IdReusePolicy = enumspb.ACTIVITY_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
		}))
		var already *serviceerror.ActivityExecutionAlreadyStarted
		require.True(t, errors.As(err, &already), "a completed run is not reused under FAILED_ONLY: %v", err)

		second, err := b.handler.StartActivity(b.ctx, startRequest("a1", withRequestID("r3")))
		require.NoError(t, err)
		require.True(t, second.Started)
		require.NotEqual(t, task.ActivityRunId, second.RunId)
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, b.describe("a1").Status, "the new run is current")
	})

	t.Run("TimeoutsAreNormalised", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1", withTimeouts(time.Minute, 0, 5*time.Minute, 10*time.Minute))
		s := b.describe("a1")
		require.Equal(t, time.Minute, s.StartToCloseTimeout.AsDuration(), "capped by schedule-to-close")
		require.Equal(t, time.Minute, s.ScheduleToStartTimeout.AsDuration(), "defaults to schedule-to-close")
		require.Equal(t, time.Minute, s.HeartbeatTimeout.AsDuration(), "capped by start-to-close")
		require.Equal(t, b.engine.Now().Add(time.Minute), s.ExpirationTime.AsTime())
	})

	t.Run("StartDelayDefersTheFirstDispatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1", func(r *activitypb.StartActivityRequest) { r.StartDelay = durationpb.New(time.Minute) })
		require.Empty(t, b.dispatcher.dispatched())
		b.engine.AdvanceTime(time.Minute)
		b.runSideEffects()
		require.Len(t, b.dispatcher.dispatched(), 1)
	})
}

func TestRecordActivityTaskStarted(t *testing.T) {
	t.Parallel()

	t.Run("ARetryOfTheSamePollGetsTheSameTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1")
		ref := b.dispatcher.last(t)
		first, err := b.recordStarted(ref, testWorkerKey, "poll-1")
		require.NoError(t, err)
		again, err := b.recordStarted(ref, testWorkerKey, "poll-1")
		require.NoError(t, err)
		require.True(t, proto.Equal(first, again))

		_, err = b.recordStarted(ref, "worker-b", "poll-2")
		requireNotFound(t, err)
		require.Equal(t, testWorkerKey, b.describe("a1").WorkerInstanceKey)
	})

	t.Run("AStaleStampIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1")
		ref := b.dispatcher.last(t)
		ref.Stamp = 7
		_, err := b.recordStarted(ref, testWorkerKey, "poll-1")
		requireNotFound(t, err)
	})

	t.Run("WithoutAWorkerInstanceKeyNothingIsBound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1")
		_, err := b.recordStarted(b.dispatcher.last(t), "", "poll-1")
		require.NoError(t, err)
		require.Zero(t, b.pendingOfType("bind"))
	})
}

func TestPollActivityExecution(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsTheOutcomeWhenTheRunCloses", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		done := make(chan *activitypb.PollActivityExecutionResponse, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := b.handler.PollActivityExecution(ctx, &activitypb.PollActivityExecutionRequest{
				NamespaceId: testNamespaceID, ActivityId: "a1", RunId: task.ActivityRunId,
			})
			if err != nil {
				t.Errorf("poll: %v", err)
			}
			done <- resp
		}()
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, b.complete(task.TaskToken, "done"))
		select {
		case resp := <-done:
			require.True(t, proto.Equal(payloads("done"), resp.GetOutcome().GetResult()))
		case <-time.After(10 * time.Second):
			t.Fatal("the poll did not see the completion")
		}
	})

	t.Run("AnswersWithoutOutcomeBeforeTheCallersDeadline", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.config.LongPollDeadlineMargin = 200 * time.Millisecond
		b.start("a1")
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		resp, err := b.handler.PollActivityExecution(ctx, &activitypb.PollActivityExecutionRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
		require.NoError(t, err)
		require.Nil(t, resp.Outcome)
		require.NotEmpty(t, resp.RunId)
		require.NoError(t, ctx.Err(), "answered before the deadline")
	})

	t.Run("IsCappedByLongPollMaxWait", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideValue(activity.LongPollMaxWait.Key(), "100ms")
		b.start("a1")
		resp, err := b.handler.PollActivityExecution(b.ctx, &activitypb.PollActivityExecutionRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
		require.NoError(t, err)
		require.Nil(t, resp.Outcome)
	})

	t.Run("UnknownActivityIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.handler.PollActivityExecution(b.ctx, &activitypb.PollActivityExecutionRequest{NamespaceId: testNamespaceID, ActivityId: "nope"})
		requireNotFound(t, err)
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()

	cancel := func(b *bundle, activityID string) error {
		_, err := b.handler.RequestCancelActivity(b.ctx, &activitypb.RequestCancelActivityRequest{
			NamespaceId: testNamespaceID, ActivityId: activityID, RequestId: "cancel-1", Reason: "user asked",
		})
		return err
	}

	t.Run("AScheduledActivityIsCanceledAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.start("a1")
		ref := b.dispatcher.last(t)
		require.NoError(t, cancel(b, "a1"))
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_CANCELED, s.Status)
		require.NotNil(t, s.Outcome.GetFailure().GetCanceledFailureInfo())
		require.Equal(t, "user asked", s.CancelReason)

		_, err := b.recordStarted(ref, testWorkerKey, "poll-1")
		requireNotFound(t, err) // the matching task left behind is refused
		require.NoError(t, cancel(b, "a1"), "cancelling a canceled activity is a no-op")
	})

	t.Run("AStartedActivityIsAskedToStopThenAcknowledges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		hb, err := b.heartbeat(task.TaskToken, "p1")
		require.NoError(t, err)
		require.False(t, hb.CancelRequested)

		require.NoError(t, cancel(b, "a1"))
		require.NoError(t, cancel(b, "a1"), "repeated request")
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, s.Status)
		require.True(t, s.CancelRequested)

		b.runSideEffects()
		require.Equal(t, []cancelCommand{{testNamespaceID, testControlQueue, task.TaskToken}}, b.sender.sent(),
			"one CancelActivity command with the attempt's own token")
		hb, err = b.heartbeat(task.TaskToken, "p2")
		require.NoError(t, err)
		require.True(t, hb.CancelRequested, "heartbeats say so too, in case the command is lost")

		_, err = b.handler.RespondActivityTaskCanceled(b.ctx, &activitypb.RespondActivityTaskCanceledRequest{
			NamespaceId: testNamespaceID, TaskToken: task.TaskToken, Details: payloads("stopped"),
		})
		require.NoError(t, err)
		s = b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_CANCELED, s.Status)
		info := s.Outcome.GetFailure().GetCanceledFailureInfo()
		require.True(t, proto.Equal(payloads("stopped"), info.Details))
		b.runSideEffects()
		_, unbinds := b.binder.calls()
		require.Len(t, unbinds, 1)
	})

	t.Run("AFailedAttemptAfterACancelRequestIsNotRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		require.NoError(t, cancel(b, "a1"))
		require.NoError(t, b.fail(task.TaskToken, appFailure("ctx", false)))
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED, b.describe("a1").Status)
	})

	t.Run("UnrequestedCancellationIsFailedPrecondition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		_, err := b.handler.RespondActivityTaskCanceled(b.ctx, &activitypb.RespondActivityTaskCanceledRequest{
			NamespaceId: testNamespaceID, TaskToken: task.TaskToken,
		})
		requireFailedPrecondition(t, err)
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, b.describe("a1").Status)
	})

	t.Run("CancellingACompletedActivityIsFailedPrecondition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		require.NoError(t, b.complete(task.TaskToken, "ok"))
		requireFailedPrecondition(t, cancel(b, "a1"))
	})

	t.Run("CommandIsBestEffort", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startAndPoll("a1")
		require.NoError(t, cancel(b, "a1"))
		b.sender.fail(errDown)
		for range activity.CancelCommandMaxAttemptsDefault - 1 {
			require.Error(t, b.engine.RunSideEffectTasks(b.ctx), "retried by the outbound queue")
			require.Equal(t, 1, b.pendingOfType("cancelCommand"))
		}
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx), "given up after the last attempt")
		require.Zero(t, b.pendingOfType("cancelCommand"))
		require.Empty(t, b.describe("a1").PendingCancelCommands)
		require.Equal(t, activity.CancelCommandMaxAttemptsDefault, b.sender.attempts)
	})
}

func TestTaskTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1")

	var invalid *serviceerror.InvalidArgument
	require.True(t, errors.As(b.complete([]byte("garbage"), "x"), &invalid))
	require.True(t, errors.As(b.complete(nil, "x"), &invalid))
	_, err := b.handler.RespondActivityTaskCompleted(b.ctx, &activitypb.RespondActivityTaskCompletedRequest{
		NamespaceId: "another-namespace", TaskToken: task.TaskToken,
	})
	require.True(t, errors.As(err, &invalid), "a token is only good in its own namespace")
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, b.describe("a1").Status)
}
