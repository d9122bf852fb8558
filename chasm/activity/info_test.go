package activity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// TestDescribeFillsAttemptTimes checks the ActivityExecutionInfo fields Temporal fills about
// attempts: when the last one ended, the backoff before the next, the start delay and when the
// first attempt was due.
func TestDescribeFillsAttemptTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scheduled := b.engine.Now()
	runID := b.start("a1", withRetry(3*time.Second, 2, 0), func(r *activitypb.StartActivityRequest) {
		r.StartDelay = durationpb.New(0)
	})
	info := activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Nil(t, info.GetLastAttemptCompleteTime(), "no attempt ended yet")
	require.Equal(t, scheduled, info.GetExecutionTime().AsTime())

	task := b.poll(b.dispatcher.last(t))
	b.engine.AdvanceTime(5 * time.Second)
	failedAt := b.engine.Now()
	require.NoError(t, b.fail(task.TaskToken, appFailure("Boom", false)))

	info = activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Equal(t, failedAt, info.GetLastAttemptCompleteTime().AsTime())
	require.Equal(t, 3*time.Second, info.GetCurrentRetryInterval().AsDuration())
	require.Equal(t, failedAt.Add(3*time.Second), info.GetNextAttemptScheduleTime().AsTime())

	b.engine.AdvanceTime(3 * time.Second)
	b.runSideEffects()
	second := b.poll(b.dispatcher.last(t))
	info = activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Nil(t, info.GetCurrentRetryInterval(), "the attempt runs")
	b.engine.AdvanceTime(time.Second)
	require.NoError(t, b.complete(second.TaskToken, "done"))
	info = activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Equal(t, b.engine.Now(), info.GetLastAttemptCompleteTime().AsTime())
	require.Equal(t, b.engine.Now(), info.GetCloseTime().AsTime())
	require.Equal(t, b.engine.Now().Sub(scheduled), info.GetExecutionDuration().AsDuration())
}

func TestDescribeShowsTheStartDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scheduled := b.engine.Now()
	runID := b.start("a1", func(r *activitypb.StartActivityRequest) { r.StartDelay = durationpb.New(time.Minute) })
	info := activity.ToActivityExecutionInfo("a1", runID, b.describe("a1"))
	require.Equal(t, time.Minute, info.GetStartDelay().AsDuration())
	require.Equal(t, scheduled.Add(time.Minute), info.GetExecutionTime().AsTime())
}

// TestDescribeCountsStateTransitions checks ActivityExecutionInfo.state_transition_count: one
// per committed transaction that changed the activity, whichever path ran it (a request, a
// side-effect task's update, a pure timer task), and none for a read, a refused request or a
// retried one that changes nothing.
func TestDescribeCountsStateTransitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	count := func(activityID string) int64 {
		t.Helper()
		s := b.describe(activityID)
		info := activity.ToActivityExecutionInfo(activityID, "run", s)
		require.Equal(t, s.GetStateTransitionCount(), info.GetStateTransitionCount())
		return info.GetStateTransitionCount()
	}

	b.start("a1", withTimeouts(time.Hour, 0, 10*time.Minute, 0))
	// The start, then the dispatch recording that matching has the attempt.
	require.EqualValues(t, 2, count("a1"))
	require.EqualValues(t, 2, count("a1"), "a describe is a read")

	ref := b.dispatcher.last(t)
	task := b.poll(ref)
	// The attempt's start, then its bind's answer.
	require.EqualValues(t, 4, count("a1"))
	again, err := b.recordStarted(ref, testWorkerKey, "poll-a1")
	require.NoError(t, err)
	require.Equal(t, task.GetTaskToken(), again.GetTaskToken())
	require.EqualValues(t, 4, count("a1"), "a retried start finds its work done and changes nothing")
	_, err = b.recordStarted(ref, testWorkerKey, "another-poll")
	requireNotFound(t, err)
	require.EqualValues(t, 4, count("a1"), "a refused request writes nothing")

	_, err = b.heartbeat(task.GetTaskToken(), "halfway")
	require.NoError(t, err)
	require.EqualValues(t, 5, count("a1"))
	require.NoError(t, b.complete(task.GetTaskToken(), "done"))
	require.EqualValues(t, 6, count("a1"))
	b.runSideEffects() // the unbind of the ended attempt
	require.EqualValues(t, 7, count("a1"))
	_, err = b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	requireFailedPrecondition(t, err)
	require.EqualValues(t, 7, count("a1"))

	// A pure timer task counts like a request.
	b.start("a2", withTimeouts(30*time.Second, 0, 0, 0))
	require.EqualValues(t, 2, count("a2"))
	b.engine.AdvanceTime(30 * time.Second)
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TIMED_OUT, b.describe("a2").GetStatus())
	require.EqualValues(t, 3, count("a2"))
}

// TestFailedWriteCountsNoStateTransition runs transactions on an Execution directly, as an
// engine does: a mutation whose write failed is never applied, so its count is lost with it,
// and a transaction that returns an error yields no mutation at all.
func TestFailedWriteCountsNoStateTransition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	registry := b.engine.Registry()
	rc, ok := registry.Component(activity.Archetype)
	require.True(t, ok)
	exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: testNamespaceID, BusinessID: "a1", RunID: "run"})
	now := b.engine.Now()
	committed := func() int64 {
		t.Helper()
		var n int64
		require.NoError(t, exec.Read(now, func(_ chasm.Context, c chasm.Component) error {
			n = c.(*activity.Activity).GetStateTransitionCount()
			return nil
		}))
		return n
	}
	update := func(reason string) (*chasm.Mutation, error) {
		return exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
			c.(*activity.Activity).CancelReason = reason
			return nil
		})
	}

	m, err := exec.Start(now, func(chasm.MutableContext) (chasm.Component, error) {
		return &activity.Activity{ActivityState: &activitypb.ActivityState{Status: activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED}}, nil
	}, nil)
	require.NoError(t, err)
	exec.Apply(m)
	require.EqualValues(t, 1, committed())

	_, err = update("lost") // its write fails: the engine never applies it
	require.NoError(t, err)
	require.EqualValues(t, 1, committed())

	_, err = exec.Update(now, func(_ chasm.MutableContext, c chasm.Component) error {
		c.(*activity.Activity).CancelReason = "refused"
		return errors.New("refused")
	})
	require.Error(t, err)
	require.EqualValues(t, 1, committed())

	m, err = update("kept")
	require.NoError(t, err)
	exec.Apply(m)
	require.EqualValues(t, 2, committed())
	m, err = update("kept") // the same state again: written, but not a transition
	require.NoError(t, err)
	exec.Apply(m)
	require.EqualValues(t, 2, committed())
}
