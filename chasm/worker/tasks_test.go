package worker_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/dynamicconfig"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()

	t.Run("SilenceMakesTheWorkerInactiveThenCleanedUp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withBound(binding("a", 1)))
		b.engine.AdvanceTime(30 * time.Second)
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, rec.State.Status)
		require.Equal(t, b.engine.Now().Add(60*time.Minute), rec.State.CleanupTime.AsTime(), "default InactiveWorkerCleanupDelay")
		require.Len(t, b.engine.SideEffectTasks(), 1, "its activity goes back to its shard")

		b.engine.AdvanceTime(60*time.Minute - time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status("w1"))
		b.engine.AdvanceTime(time.Second)
		rec = b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, rec.State.Status)
		require.Equal(t, b.engine.Now(), rec.State.CleanupTime.AsTime())
	})

	t.Run("CleanedUpWorkerIsDeletedAfterItsRetention", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.CleanedUpWorkerRetention.Key(), testNamespace, "2h")
		b.mustBeat("w1")
		b.engine.AdvanceTime(30 * time.Second)
		b.engine.AdvanceTime(60 * time.Minute)
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, rec.State.Status)
		require.Equal(t, b.engine.Now().Add(2*time.Hour), rec.State.DeleteTime.AsTime())

		b.engine.AdvanceTime(2*time.Hour - time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, b.status("w1"))
		b.engine.AdvanceTime(time.Second)
		_, err := b.handler.DescribeWorker(b.ctx, &workerpb.DescribeWorkerRequest{NamespaceId: testNamespaceID, WorkerInstanceKey: "w1"})
		var notFound *serviceerror.NotFound
		require.ErrorAs(t, err, &notFound)
		require.Empty(t, b.engine.PendingTimers(), "its tasks went with it")

		r := b.mustBeat("w1")
		require.False(t, r.Resurrected)
		rec = b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, rec.State.Status)
		require.Equal(t, b.engine.Now(), rec.State.FirstHeartbeatTime.AsTime(), "a new worker")
	})

	t.Run("CleanedUpWorkerMustComeBackWithANewKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1")
		b.engine.AdvanceTime(30 * time.Second)
		b.engine.AdvanceTime(60 * time.Minute)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, b.status("w1"))

		r := b.beat("w1")
		require.NotNil(t, r.Error)
		require.EqualValues(t, codes.FailedPrecondition, r.Error.Code)
		require.Contains(t, r.Error.Message, "new WorkerInstanceKey")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, b.status("w1"))
	})

	t.Run("ResurrectionKeepsRescheduledActivitiesRescheduledAndCancelsCleanup", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withBound(binding("a", 1), binding("b", 1)))
		b.engine.AdvanceTime(30 * time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status("w1"))

		r := b.mustBeat("w1")
		require.True(t, r.Resurrected)
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, rec.State.Status)
		require.EqualValues(t, 1, rec.State.ResurrectionCount)
		require.Empty(t, rec.BoundActivities, "the worker starts clean")
		require.Nil(t, rec.State.CleanupTime)

		// The batches sent while it was dead are still delivered.
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		delivered := 0
		for _, req := range b.rescheduler.received() {
			delivered += len(req.Activities)
		}
		require.Equal(t, 2, delivered)

		// The old cleanup timer is stale: keep the worker alive past it.
		pruned := b.engine.PrunedTasks()
		for range 130 {
			b.engine.AdvanceTime(28 * time.Second)
			b.mustBeat("w1")
		}
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		require.Greater(t, b.engine.PrunedTasks(), pruned, "the cleanup timer fired and was found stale")
	})

	t.Run("CleanupDelayIsReadForTheWorkersNamespaceByName", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideNamespaceValue(dynamicconfig.InactiveWorkerCleanupDelay.Key(), testNamespace, "90s")
		// The override is keyed by namespace name: one keyed by the ID must not apply.
		b.dc.OverrideNamespaceValue(dynamicconfig.InactiveWorkerCleanupDelay.Key(), testNamespaceID, "1s")
		b.mustBeat("w1")
		b.engine.AdvanceTime(30 * time.Second)
		require.Equal(t, b.engine.Now().Add(90*time.Second), b.describe("w1").State.CleanupTime.AsTime())
		b.engine.AdvanceTime(90 * time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_CLEANED_UP, b.status("w1"))
	})

	t.Run("RescheduleIsRetriedUntilTheDestinationAnswers", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withBound(binding("a", 1)))
		b.shutdown("w1")
		b.rescheduler.fail(serviceerror.NewUnavailable("shard moving"))
		// The fan-out hands the batch its shard did not take to a task of its own.
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Len(t, b.describe("w1").State.PendingReschedules, 1)
		tasks := b.engine.SideEffectTasks()
		require.Len(t, tasks, 1)
		require.IsType(t, &workerpb.ActivityRescheduleTask{}, tasks[0].Task.Payload)

		require.Error(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Len(t, b.describe("w1").State.PendingReschedules, 1)
		require.Len(t, b.engine.SideEffectTasks(), 1, "kept for a retry")

		b.rescheduler.fail(nil)
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Empty(t, b.describe("w1").State.PendingReschedules)
		require.Empty(t, b.engine.SideEffectTasks())
	})

	t.Run("AShardThatDoesNotAnswerHoldsUpOnlyItsOwnBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		bindings, shards := bindingsOverShards(40)
		require.Greater(t, len(shards), 3)
		down := shard.ForKey(testNamespaceID, "act-0", testNumShards)
		b.mustBeat("w1", withBound(bindings...))
		b.shutdown("w1")
		b.rescheduler.failShard(down, serviceerror.NewUnavailable("shard moving"))
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))

		// Every other shard took its batch at once; the one that did not has a task of its
		// own, under that shard's destination, and the fan-out is done.
		got := map[int32]int{}
		for _, req := range b.rescheduler.received() {
			got[req.ShardId] += len(req.Activities)
		}
		want := maps.Clone(shards)
		delete(want, down)
		require.Equal(t, want, got)
		pending := b.describe("w1").State.PendingReschedules
		require.Len(t, pending, 1)
		require.Equal(t, down, pending[0].DestinationShard)
		require.True(t, pending[0].OwnTask)
		tasks := b.engine.SideEffectTasks()
		require.Len(t, tasks, 1)
		require.Equal(t, worker.RescheduleDestination(down), tasks[0].Task.Attributes.Destination)
		require.Equal(t, down, tasks[0].Task.Payload.(*workerpb.ActivityRescheduleTask).DestinationShard)

		b.rescheduler.failShard(down, nil)
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Empty(t, b.describe("w1").State.PendingReschedules)
		require.Empty(t, b.engine.SideEffectTasks())
		require.Equal(t, shards[down], len(b.rescheduler.received()[len(b.rescheduler.received())-1].Activities))
	})

	t.Run("LargeBatchesAreChunked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.config.RescheduleChunkSize = 100
		var bindings []*workerpb.ActivityBinding
		for i := range 1000 {
			bindings = append(bindings, binding(fmt.Sprintf("a%d", i), 1))
		}
		b.mustBeat("w1", withBound(bindings...))
		b.shutdown("w1")
		for _, st := range b.engine.SideEffectTasks() {
			carried := 0
			for _, batch := range st.Task.Payload.(*workerpb.ActivityRescheduleFanOutTask).Batches {
				carried += len(batch.Activities)
			}
			require.LessOrEqual(t, carried, 100)
		}
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		total := 0
		for _, req := range b.rescheduler.received() {
			total += len(req.Activities)
		}
		require.Equal(t, 1000, total)
		require.Empty(t, b.describe("w1").State.PendingReschedules)
	})
}

func TestLeaseTimer(t *testing.T) {
	t.Parallel()

	leaseTimers := func(b *bundle) []time.Time {
		var out []time.Time
		for _, st := range b.engine.PendingTasksOfType("worker.leaseExpiry") {
			out = append(out, st.Task.Attributes.ScheduledTime)
		}
		return out
	}

	t.Run("AHeartbeatMovesTheTimerOnlyWhenItIsDueWithinHalfTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideValue(worker.HeartbeatWriteInterval.Key(), "0s") // every heartbeat written
		start := b.engine.Now()
		b.mustBeat("w1", withLease(10*time.Second))
		require.Equal(t, []time.Time{start.Add(10 * time.Second)}, leaseTimers(b))
		armed := b.engine.PendingTasksOfType("worker.leaseExpiry")[0]

		// 7 s left on the timer, more than half the lease: the heartbeat writes no timer.
		b.engine.AdvanceTime(3 * time.Second)
		b.mustBeat("w1", withLease(10*time.Second))
		require.Same(t, armed, b.engine.PendingTasksOfType("worker.leaseExpiry")[0], "the timer was not rewritten")
		require.Equal(t, start.Add(13*time.Second), b.describe("w1").State.LeaseDeadline.AsTime())

		// 4 s left: this heartbeat moves it to its own deadline.
		b.engine.AdvanceTime(3 * time.Second)
		b.mustBeat("w1", withLease(10*time.Second))
		require.Equal(t, []time.Time{start.Add(16 * time.Second)}, leaseTimers(b))
	})

	t.Run("UnwrittenHeartbeatsLeaveTheTimerWhichWaitsInMemory", func(t *testing.T) {
		t.Parallel()
		b := setup(t) // worker.heartbeatWriteInterval at its default, 10 s
		start := b.engine.Now()
		b.mustBeat("w1", withLease(3*time.Second)) // written: deadline 3 s, bound 13 s
		require.Equal(t, []time.Time{start.Add(3 * time.Second)}, leaseTimers(b))
		armed := b.engine.PendingTasksOfType("worker.leaseExpiry")[0]
		for range 9 { // deadlines 4 s … 12 s: within the bound, answered from memory
			b.engine.AdvanceTime(time.Second)
			b.mustBeat("w1", withLease(3*time.Second))
			require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		}
		require.Same(t, armed, b.engine.PendingTasksOfType("worker.leaseExpiry")[0], "the timer was not rewritten")
		require.Positive(t, b.engine.DeferredPureTasks(), "the timer fired, found the lease extended, and waited in memory")
		state := b.describe("w1").State
		require.Equal(t, start.Add(12*time.Second), state.LeaseDeadline.AsTime())
		require.Equal(t, start.Add(13*time.Second), state.LeaseBound.AsTime())

		// Past the bound the heartbeat is written: a new bound, and the timer moves.
		b.engine.AdvanceTime(2 * time.Second)
		b.mustBeat("w1", withLease(3*time.Second))
		state = b.describe("w1").State
		require.Equal(t, start.Add(24*time.Second), state.LeaseBound.AsTime())
		require.Equal(t, []time.Time{start.Add(14 * time.Second)}, leaseTimers(b))

		// Silent from here: found at its last deadline.
		b.engine.AdvanceTime(3*time.Second - time.Millisecond)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		b.engine.AdvanceTime(time.Millisecond)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status("w1"))
	})

	t.Run("ATimerThatFiresBeforeTheDeadlineReArms", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.dc.OverrideValue(worker.HeartbeatWriteInterval.Key(), "0s") // every heartbeat written
		start := b.engine.Now()
		b.mustBeat("w1", withLease(10*time.Second))
		b.engine.AdvanceTime(3 * time.Second)
		b.mustBeat("w1", withLease(10*time.Second)) // deadline 13 s; the timer stays at 10 s

		// The timer fires at the first lease's deadline, finds the lease extended and waits
		// for it in memory.
		b.engine.AdvanceTime(7 * time.Second)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		require.Equal(t, 1, b.engine.DeferredPureTasks())

		// It expires at the last deadline, not a timer period later.
		b.engine.AdvanceTime(3*time.Second - time.Millisecond)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		b.engine.AdvanceTime(time.Millisecond)
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, rec.State.Status)
		require.Equal(t, start.Add(13*time.Second), rec.State.InactiveTime.AsTime())
		require.Empty(t, leaseTimers(b))
	})

	t.Run("ALiveWorkersTimerNeverFires", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.mustBeat("w1", withLease(9*time.Second))
		pruned, executed := b.engine.PrunedTasks(), b.engine.ExecutedPureTasks()
		for range 30 {
			b.engine.AdvanceTime(3 * time.Second)
			b.mustBeat("w1", withLease(9*time.Second))
		}
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		require.Equal(t, pruned, b.engine.PrunedTasks(), "no stale timer fired")
		require.Equal(t, executed, b.engine.ExecutedPureTasks(), "no timer fired to re-arm")
		require.Len(t, leaseTimers(b), 1)
	})

	t.Run("AShorterLeaseMovesTheTimerForward", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := b.engine.Now()
		b.mustBeat("w1", withLease(60*time.Second))
		b.engine.AdvanceTime(time.Second)
		b.mustBeat("w1", withLease(5*time.Second))
		require.Equal(t, []time.Time{start.Add(6 * time.Second)}, leaseTimers(b))
		b.engine.AdvanceTime(5 * time.Second)
		rec := b.describe("w1")
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, rec.State.Status)
		require.Equal(t, start.Add(6*time.Second), rec.State.InactiveTime.AsTime())
	})

	t.Run("AResurrectedWorkerGetsAFreshTimer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start := b.engine.Now()
		b.mustBeat("w1", withLease(10*time.Second))
		b.shutdown("w1")
		b.engine.AdvanceTime(time.Second)
		r := b.mustBeat("w1", withLease(20*time.Second))
		require.True(t, r.Resurrected)
		require.Equal(t, []time.Time{start.Add(21 * time.Second)}, leaseTimers(b),
			"the shutdown's stale timer (at 10 s) is replaced, not reused")
		b.engine.AdvanceTime(20*time.Second - time.Millisecond)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, b.status("w1"))
		b.engine.AdvanceTime(time.Millisecond)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status("w1"))
	})
}

func TestLeaseTimerOfAWorkerStoredBeforeLeaseTimerTime(t *testing.T) {
	t.Parallel()
	// Such a worker's timer was replaced on every heartbeat, so it fires at the lease deadline.
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &worker.Worker{WorkerState: &workerpb.WorkerState{
		Status: workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, LeaseDeadline: timestamppb.New(deadline),
	}}
	var e worker.LeaseExpiryTaskExecutor
	valid, err := e.Validate(nil, w, chasm.TaskAttributes{ScheduledTime: deadline}, &workerpb.LeaseExpiryTask{})
	require.NoError(t, err)
	require.True(t, valid)
	valid, err = e.Validate(nil, w, chasm.TaskAttributes{ScheduledTime: deadline.Add(-time.Second)}, &workerpb.LeaseExpiryTask{})
	require.NoError(t, err)
	require.False(t, valid, "an older timer stays stale")
}
