package activity_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

const (
	rescheduled = workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_RESCHEDULED
	stale       = workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_STALE
	notFound    = workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_NOT_FOUND
	failed      = workerpb.RescheduleOutcome_RESCHEDULE_OUTCOME_FAILED
)

func TestRescheduleReceiver(t *testing.T) {
	t.Parallel()

	t.Run("AnAttemptOfTheLostWorkerIsDispatchedAgainAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// A long backoff shows the reschedule does not wait for it.
		task := b.startAndPoll("a1", withRetry(time.Hour, 2, 0))
		require.Len(t, b.dispatcher.dispatched(), 1)

		b.engine.AdvanceTime(5 * time.Second)
		outcomes := b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1))
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, outcomes)
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_SCHEDULED, s.Status)
		require.EqualValues(t, 2, s.Attempt)
		require.EqualValues(t, 2, s.Stamp)
		require.Equal(t, b.engine.Now(), s.AttemptScheduledTime.AsTime())
		require.Empty(t, s.WorkerInstanceKey)
		require.Equal(t, activity.WorkerLostFailureType, s.LastFailure.GetApplicationFailureInfo().GetType())
		require.False(t, s.LastFailure.GetApplicationFailureInfo().GetNonRetryable())

		b.runSideEffects()
		ref := b.dispatcher.last(t)
		require.EqualValues(t, 2, ref.Stamp, "dispatched at once with the new stamp")
		require.Equal(t, b.engine.Now(), ref.ScheduledTime)
		require.Equal(t, []cancelCommand{{testNamespaceID, testControlQueue, task.TaskToken}}, b.sender.sent(),
			"the old worker may only be cut off: it is told to stop")
		_, unbinds := b.binder.calls()
		require.Empty(t, unbinds, "the lost worker already dropped its bindings: no unbind round trip")
		require.Nil(t, b.describe("a1").RescheduledTime, "the dispatch latency was measured")

		// The lost worker's late answers are refused; the new attempt runs normally.
		requireNotFound(t, b.complete(task.TaskToken, "late"))
		_, err := b.heartbeat(task.TaskToken, "late")
		requireNotFound(t, err)
		next, err := b.recordStarted(ref, "worker-b", "poll-b")
		require.NoError(t, err)
		require.EqualValues(t, 2, next.Attempt)
		require.NoError(t, b.complete(next.TaskToken, "done by b"))
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_COMPLETED, b.describe("a1").Status)
	})

	t.Run("ADuplicateBatchIsStale", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		e := entry("a1", task.ActivityRunId, 1)
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, b.reschedule(testWorkerKey, e))
		require.Equal(t, []workerpb.RescheduleOutcome{stale}, b.reschedule(testWorkerKey, e))

		// Even once the new attempt runs on another worker, the old batch cannot take it.
		b.runSideEffects()
		_, err := b.recordStarted(b.dispatcher.last(t), "worker-b", "poll-b")
		require.NoError(t, err)
		require.Equal(t, []workerpb.RescheduleOutcome{stale}, b.reschedule(testWorkerKey, e))
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, s.Status)
		require.Equal(t, "worker-b", s.WorkerInstanceKey)
		require.EqualValues(t, 2, s.Attempt)
	})

	t.Run("MismatchesAreStale", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		b.start("queued") // SCHEDULED, never polled
		queued := b.dispatcher.last(t)
		outcomes := b.reschedule(testWorkerKey,
			entry("a1", task.ActivityRunId, 2),  // another stamp
			entry("queued", queued.RunID, 1),    // not started
			entry("missing", "no-such-run", 1),  // no such activity
			entry("a1", "another-run-of-a1", 1), // no such run
		)
		require.Equal(t, []workerpb.RescheduleOutcome{stale, stale, notFound, notFound}, outcomes)
		require.Equal(t, []workerpb.RescheduleOutcome{stale}, b.reschedule("worker-b", entry("a1", task.ActivityRunId, 1)),
			"another worker's batch")
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_STARTED, s.Status)
		require.EqualValues(t, 1, s.Stamp)
		require.NoError(t, b.complete(task.TaskToken, "ok"), "the attempt still belongs to its worker")
	})

	t.Run("OnTheLastAttemptTheActivityFailsWorkerLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1", withRetry(time.Second, 2, 1))
		require.Equal(t, []workerpb.RescheduleOutcome{failed}, b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1)))
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_FAILED, s.Status)
		info := s.Outcome.GetFailure().GetApplicationFailureInfo()
		require.Equal(t, activity.WorkerLostFailureType, info.GetType())
		require.True(t, info.GetNonRetryable())
		b.runSideEffects()
		require.Len(t, b.sender.sent(), 1, "the old worker is still told to stop")
		_, unbinds := b.binder.calls()
		require.Empty(t, unbinds)
	})

	t.Run("ACancelRequestedAttemptOfALostWorkerIsCanceled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		_, err := b.handler.RequestCancelActivity(b.ctx, &activitypb.RequestCancelActivityRequest{
			NamespaceId: testNamespaceID, ActivityId: "a1",
		})
		require.NoError(t, err)
		require.Equal(t, []workerpb.RescheduleOutcome{failed}, b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1)),
			"closed rather than rescheduled")
		s := b.describe("a1")
		require.Equal(t, activitypb.ActivityStatus_ACTIVITY_STATUS_CANCELED, s.Status, "nobody is left to acknowledge the request")
		require.NotNil(t, s.Outcome.GetFailure().GetCanceledFailureInfo())
		b.runSideEffects()
		require.Len(t, b.sender.sent(), 1, "one command per attempt, not one per reason")
		require.Len(t, b.dispatcher.dispatched(), 1, "no new attempt")
	})

	t.Run("ManyEntriesInOneBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var entries []*workerpb.BoundActivity
		for i := range 50 {
			task := b.startAndPoll(fmt.Sprintf("a%d", i))
			entries = append(entries, entry(task.ActivityId, task.ActivityRunId, 1))
		}
		for _, outcome := range b.reschedule(testWorkerKey, entries...) {
			require.Equal(t, rescheduled, outcome)
		}
	})
}

// TestRescheduleHandOff covers the direct hand-off of rescheduled attempts to matching (see
// Handler.RescheduleActivities): no DispatchTask, the dispatch recorded in the reschedule's own
// transaction, and every way the hand-off can be missed or refused.
func TestRescheduleHandOff(t *testing.T) {
	t.Parallel()

	t.Run("TheNewAttemptReachesMatchingWhenTheBatchIsAnswered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		b.engine.AdvanceTime(5 * time.Second)

		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1)))
		ref := b.dispatcher.last(t)
		require.EqualValues(t, 2, ref.Stamp, "queued before the answer, with no side-effect task run")
		require.Equal(t, b.engine.Now(), ref.ScheduledTime)
		require.Zero(t, b.pendingOfType("dispatch"), "no DispatchTask to write, run and delete")
		s := b.describe("a1")
		require.EqualValues(t, 2, s.DispatchedStamp, "recorded in the reschedule's own transaction")
		require.EqualValues(t, 1, s.DispatchCount)
		require.Equal(t, b.engine.Now().Add(activity.RedispatchIntervalDefault), s.RedispatchTime.AsTime())
		require.Nil(t, s.RescheduledTime, "the latency was measured at the hand-off")
		require.Equal(t, 1, b.pendingOfType("redispatch"))

		// Should matching lose it, the RedispatchTask queues it again.
		n := len(b.dispatcher.dispatched())
		b.engine.AdvanceTime(activity.RedispatchIntervalDefault)
		b.runSideEffects()
		require.Len(t, b.dispatcher.dispatched(), n+1)
		require.EqualValues(t, 2, b.dispatcher.last(t).Stamp)
	})

	t.Run("AnAttemptMatchingRefusedIsLeftToADispatchTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		b.dispatcher.failWith = errDown

		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1)),
			"the reschedule is durable whatever matching says")
		s := b.describe("a1")
		require.EqualValues(t, 2, s.Stamp)
		require.Zero(t, s.DispatchedStamp, "the dispatch did not happen")
		require.Zero(t, s.DispatchCount)
		require.NotNil(t, s.RescheduledTime)
		require.Equal(t, 1, b.pendingOfType("dispatch"))
		require.Error(t, b.engine.RunSideEffectTasks(b.ctx), "retried while matching refuses")

		b.dispatcher.failWith = nil
		b.runSideEffects()
		require.EqualValues(t, 2, b.dispatcher.last(t).Stamp)
		s = b.describe("a1")
		require.EqualValues(t, 2, s.DispatchedStamp)
		require.EqualValues(t, 1, s.DispatchCount)
		require.Nil(t, s.RescheduledTime)
	})

	t.Run("ARestartRequeuesAnAttemptHandedOffBeforeIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1)))

		// The process dies after the commit, before or after the hand-off: matching's queue is
		// gone either way, and the restart's recovery scan queues the attempt again.
		restarted := &recordingDispatcher{}
		n, err := activity.RequeueDispatched(b.ctx, b.engine, b.engine.Registry(), []string{testNamespaceID}, restarted)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, "a1", restarted.last(t).ActivityID)
		require.EqualValues(t, 2, restarted.last(t).Stamp)
	})

	t.Run("ARetriedBatchQueuesItsAttemptsAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.startAndPoll("a1")
		e := entry("a1", task.ActivityRunId, 1)
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, b.reschedule(testWorkerKey, e))
		before := b.describe("a1")

		// The first delivery committed but its caller may not have seen the answer (and the
		// hand-off may not have happened): the retry is STALE, changes nothing, and queues the
		// attempt again, which matching and the stamp make harmless.
		require.Equal(t, []workerpb.RescheduleOutcome{stale}, b.reschedule(testWorkerKey, e))
		require.True(t, proto.Equal(before, b.describe("a1")))
		refs := b.dispatcher.dispatched()
		require.Len(t, refs, 3)
		require.Equal(t, refs[1], refs[2])

		next, err := b.recordStarted(refs[2], "worker-b", "poll-b")
		require.NoError(t, err)
		_, err = b.recordStarted(refs[1], "worker-c", "poll-c")
		requireNotFound(t, err)
		require.Equal(t, []workerpb.RescheduleOutcome{stale}, b.reschedule(testWorkerKey, e))
		require.Len(t, b.dispatcher.dispatched(), 3, "a started attempt is not queued again")
		require.NoError(t, b.complete(next.TaskToken, "done by b"))
	})

	t.Run("WithoutADispatcherADispatchTaskDispatches", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.handler = activity.NewHandler(b.engine, b.config, tally.NoopScope, zaptest.NewLogger(t))
		task := b.startAndPoll("a1")
		require.Equal(t, []workerpb.RescheduleOutcome{rescheduled}, b.reschedule(testWorkerKey, entry("a1", task.ActivityRunId, 1)))
		require.EqualValues(t, 1, b.dispatcher.last(t).Stamp, "not queued yet")
		require.Equal(t, 1, b.pendingOfType("dispatch"))
		b.runSideEffects()
		require.EqualValues(t, 2, b.dispatcher.last(t).Stamp)
		s := b.describe("a1")
		require.EqualValues(t, 2, s.DispatchedStamp)
		require.Nil(t, s.RescheduledTime, "the dispatch latency was measured")
	})
}
