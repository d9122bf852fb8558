package activity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// rescheduleOrphans sends an orphan batch, as a live worker's reconciliation does.
func (b *bundle) rescheduleOrphans(workerKey string, suspectSince time.Time, entries ...*workerpb.BoundActivity) []workerpb.RescheduleOutcome {
	b.t.Helper()
	for _, e := range entries {
		e.OrphanReason = "unseen_dispatch"
	}
	resp, err := b.handler.RescheduleActivities(b.ctx, &workerpb.RescheduleActivitiesRequest{
		NamespaceId: testNamespaceID, WorkerInstanceKey: workerKey, Activities: entries,
		Orphan: true, SuspectSince: timestamppb.New(suspectSince),
	})
	require.NoError(b.t, err)
	return resp.Outcomes
}

func TestOrphanReschedule(t *testing.T) {
	t.Parallel()

	t.Run("RunsAgainAndTheOldAttemptIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withRetry(time.Second, 2, 1)) // one attempt allowed
		b.engine.AdvanceTime(10 * time.Second)
		outcomes := b.rescheduleOrphans(testWorkerKey, b.engine.Now().Add(-5*time.Second), entry("a1", task.ActivityRunId, 1))
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, outcomes)
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, s.Status)
		require.EqualValues(t, 1, s.Attempt, "an orphan does not count against maximum_attempts")
		require.EqualValues(t, 2, s.Stamp)

		b.runSideEffects()
		ref := b.dispatcher.last(t)
		require.EqualValues(t, 2, ref.Stamp)
		requireNotFound(t, b.complete(task.TaskToken, "late"))
		next, err := b.recordStarted(ref, "worker-b", "poll-b")
		require.NoError(t, err)
		require.NoError(t, b.complete(next.TaskToken, "done"))
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, b.describe("a1").Status)
	})

	t.Run("AnAttemptThatHeartbeatsIsLeftAliveAndBoundAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		b.runSideEffects() // bound
		suspect := b.engine.Now()
		b.engine.AdvanceTime(time.Second)
		_, err := b.heartbeat(task.TaskToken, "progress")
		require.NoError(t, err)
		binds, _ := b.binder.calls()
		outcomes := b.rescheduleOrphans(testWorkerKey, suspect, entry("a1", task.ActivityRunId, 1))
		require.Equal(t, []workerpb.RescheduleOutcome{workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_ALIVE}, outcomes)
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, b.describe("a1").Status)
		b.runSideEffects()
		rebinds, _ := b.binder.calls()
		require.Len(t, rebinds, len(binds)+1, "bound to its worker again")
		require.NoError(t, b.complete(task.TaskToken, "done"), "the running attempt still completes")
	})

	t.Run("AnotherWorkersAttemptIsStale", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		require.Equal(t, []workerpb.RescheduleOutcome{stale},
			b.rescheduleOrphans("someone-else", b.engine.Now(), entry("a1", task.ActivityRunId, 1)))
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, b.describe("a1").Status)
	})
}
