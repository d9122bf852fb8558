package activity_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

func TestTerminateStartedActivity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1")
	b.runSideEffects()

	_, err := b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{
		NamespaceId: testNamespaceID, ActivityId: "a1", Reason: "operator said so", Identity: "ops"})
	require.NoError(t, err)
	state := b.describe("a1")
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TERMINATED, state.Status)
	require.Equal(t, "operator said so", state.Outcome.GetFailure().GetMessage())
	require.Equal(t, "ops", state.Outcome.GetFailure().GetTerminatedFailureInfo().GetIdentity())
	require.Equal(t, b.engine.Now(), state.CloseTime.AsTime())

	// The running attempt is fenced: its late completion and heartbeat are refused.
	requireNotFound(t, b.complete(task.TaskToken, "late"))
	_, err = b.heartbeat(task.TaskToken, "late")
	requireNotFound(t, err)
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_TERMINATED, b.describe("a1").Status)

	// Not deletable until its worker is unbound (clients retry Unavailable).
	_, err = b.handler.DeleteActivity(b.ctx, &activitypb.DeleteActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	var unavailable *serviceerror.Unavailable
	require.ErrorAs(t, err, &unavailable)

	// Unbound from its worker, and the worker is told to stop.
	b.runSideEffects()
	_, unbinds := b.binder.calls()
	require.Len(t, unbinds, 1)
	require.Equal(t, testWorkerKey, unbinds[0].WorkerInstanceKey)
	require.Empty(t, b.describe("a1").PendingUnbinds)
	require.Len(t, b.sender.sent(), 1)

	// Idempotent; a poller waiting for the outcome sees it.
	_, err = b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	poll, err := b.handler.PollActivityExecution(b.ctx, &activitypb.PollActivityExecutionRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	require.NotNil(t, activity.ToActivityExecutionOutcome(poll.Outcome).GetFailure().GetTerminatedFailureInfo())
}

func TestTerminateScheduledThenDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	ref := b.dispatcher.last(t)

	_, err := b.handler.DeleteActivity(b.ctx, &activitypb.DeleteActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	requireFailedPrecondition(t, err)

	_, err = b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	// Its queued task can no longer start.
	_, err = b.recordStarted(ref, testWorkerKey, "p-1")
	requireNotFound(t, err)

	_, err = b.handler.DeleteActivity(b.ctx, &activitypb.DeleteActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	require.NoError(t, err)
	_, err = b.handler.DescribeActivity(b.ctx, &activitypb.DescribeActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	requireNotFound(t, err)
}

func TestTerminateClosedActivityIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := b.startAndPoll("a1")
	require.NoError(t, b.complete(task.TaskToken, "done"))
	_, err := b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a1"})
	requireFailedPrecondition(t, err)
	require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, b.describe("a1").Status)
}

func TestListActivities(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start("a1")
	b.start("a2")
	b.start("a3")
	_, err := b.handler.TerminateActivity(b.ctx, &activitypb.TerminateActivityRequest{NamespaceId: testNamespaceID, ActivityId: "a2"})
	require.NoError(t, err)

	var ids []string
	var token []byte
	for {
		resp, err := b.handler.ListActivities(b.ctx, &activitypb.ListActivitiesRequest{NamespaceId: testNamespaceID, PageSize: 2, NextPageToken: token})
		require.NoError(t, err)
		for _, a := range resp.Activities {
			ids = append(ids, a.ActivityId)
			require.NotEmpty(t, a.RunId)
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	require.ElementsMatch(t, []string{"a1", "a2", "a3"}, ids)

	resp, err := b.handler.ListActivities(b.ctx, &activitypb.ListActivitiesRequest{NamespaceId: testNamespaceID,
		Status: activitypb.ActivityStatus_ACTIVITY_STATUS_TERMINATED})
	require.NoError(t, err)
	require.Len(t, resp.Activities, 1)
	require.Equal(t, "a2", resp.Activities[0].ActivityId)
}
