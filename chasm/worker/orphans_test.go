package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	workerv1 "go.temporal.io/api/worker/v1"

	"github.com/vigilhq/vigil/chasm/worker"
	workerpb "github.com/vigilhq/vigil/chasm/worker/gen/workerpb/v1"
)

// withSlots makes the heartbeat report usedSlots activity slots in use, as an SDK does.
func withSlots(usedSlots int32) hbOption {
	return func(e *workerpb.HeartbeatEntry) {
		e.Heartbeat.ActivityTaskSlotsInfo = &workerv1.WorkerSlotsInfo{
			SlotSupplierKind: "Fixed", CurrentUsedSlots: usedSlots, CurrentAvailableSlots: 1000 - usedSlots,
		}
	}
}

// withProcessed adds the SDK's count of activity tasks the worker finished.
func withProcessed(total int32) hbOption {
	return func(e *workerpb.HeartbeatEntry) { e.Heartbeat.ActivityTaskSlotsInfo.TotalProcessedTasks = total }
}

// bindAt binds attempts the way the server does when it dispatches them (no lease renewal).
func (b *bundle) bindAt(key string, bs ...*workerpb.ActivityBinding) {
	b.t.Helper()
	resp, err := b.handler.UpdateBindings(b.ctx, &workerpb.UpdateBindingsRequest{
		NamespaceId: testNamespaceID, WorkerInstanceKey: key, Bound: bs,
	})
	require.NoError(b.t, err)
	require.Equal(b.t, workerpb.BindOutcome_BIND_OUTCOME_APPLIED, resp.Outcome)
}

// orphanBatches returns the orphan batches sent so far (side-effect tasks run).
func (b *bundle) orphanBatches() []*workerpb.RescheduleActivitiesRequest {
	b.t.Helper()
	require.NoError(b.t, b.engine.RunSideEffectTasks(b.ctx))
	var out []*workerpb.RescheduleActivitiesRequest
	for _, r := range b.rescheduler.received() {
		if r.Orphan {
			out = append(out, r)
		}
	}
	return out
}

func orphanIDs(reqs []*workerpb.RescheduleActivitiesRequest) []string {
	var ids []string
	for _, r := range reqs {
		for _, a := range r.Activities {
			ids = append(ids, a.ActivityId)
		}
	}
	return ids
}

// TestOrphanReconciliation drives the rule of orphans.go with the fake clock: a worker
// heartbeating every second, grace 5 s (the default).
func TestOrphanReconciliation(t *testing.T) {
	t.Parallel()
	const key = "w-1"
	const interval = time.Second
	// beats sends n heartbeats a second apart, each reporting used slots.
	beats := func(b *bundle, n int, used int32) {
		for range n {
			b.engine.AdvanceTime(interval)
			b.mustBeat(key, withSlots(used), withElapsed(interval))
		}
	}
	// started sets up a live worker whose host has been up a while.
	started := func(t *testing.T) *bundle {
		b := setup(t)
		b.engine.AdvanceTime(time.Minute)
		b.mustBeat(key, withSlots(0))
		return b
	}

	t.Run("LostPollResponseIsRescheduled", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-lost", 7))
		beats(b, 9, 0) // eligible after the grace (5 s), then the mismatch must last the grace
		require.Empty(t, b.orphanBatches())
		beats(b, 1, 0)
		batches := b.orphanBatches()
		require.Len(t, batches, 1)
		require.Equal(t, []string{"a-lost"}, orphanIDs(batches))
		entry := batches[0].Activities[0]
		require.Equal(t, int64(7), entry.Stamp, "the batch names the attempt's stamp: only that attempt can be taken")
		require.Equal(t, worker.OrphanReasonUnseen, entry.OrphanReason)
		require.NotNil(t, batches[0].SuspectSince)
		state := b.describe(key)
		require.Empty(t, state.BoundActivities)
		require.Equal(t, int64(1), state.State.OrphansFound)
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_ACTIVE, state.State.Status)

		beats(b, 10, 0)
		require.Len(t, b.orphanBatches(), 1, "taken once")
	})

	t.Run("LongActivityWithoutHeartbeatsIsNeverTaken", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-long", 3))
		beats(b, 600, 1) // ten minutes of a worker running it and saying so
		require.Empty(t, b.orphanBatches())
		require.Len(t, b.describe(key).BoundActivities, 1)
	})

	t.Run("CompletionRacingAHeartbeatIsNotAnOrphan", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-1", 1))
		beats(b, 10, 1)
		// The worker finished: its slot is free before the server's unbind lands, for a
		// couple of heartbeats.
		beats(b, 2, 0)
		_, err := b.handler.UpdateBindings(b.ctx, &workerpb.UpdateBindingsRequest{
			NamespaceId: testNamespaceID, WorkerInstanceKey: key, Unbound: []*workerpb.ActivityBinding{binding("a-1", 1)},
		})
		require.NoError(t, err)
		beats(b, 20, 0)
		require.Empty(t, b.orphanBatches())
	})

	t.Run("FreshDispatchIsNotCounted", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		beats(b, 3, 0)
		// A heartbeat snapshot taken before the poll response arrived, for a binding just made.
		for range 20 {
			b.bindAt(key, binding("a-new", 1))
			b.engine.AdvanceTime(interval)
			b.mustBeat(key, withSlots(0), withElapsed(interval))
			_, err := b.handler.UpdateBindings(b.ctx, &workerpb.UpdateBindingsRequest{
				NamespaceId: testNamespaceID, WorkerInstanceKey: key, Unbound: []*workerpb.ActivityBinding{binding("a-new", 1)},
			})
			require.NoError(t, err)
		}
		require.Empty(t, b.orphanBatches())
	})

	t.Run("TakesOnlyTheExcessAndPrefersUnseen", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-old-1", 1), binding("a-old-2", 1))
		beats(b, 10, 2) // both seen running
		b.bindAt(key, binding("a-unseen", 1))
		beats(b, 12, 2) // one more bound, the count did not rise: one orphan
		require.Equal(t, []string{"a-unseen"}, orphanIDs(b.orphanBatches()))
		require.Len(t, b.describe(key).BoundActivities, 2)
	})

	t.Run("LostCompletionPrefersTheAttemptSeenRunning", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-finished", 1))
		beats(b, 10, 1) // seen running
		// It finishes, its completion is lost (no unbind), and a new attempt runs meanwhile.
		b.bindAt(key, binding("a-new", 1))
		for range 12 {
			b.engine.AdvanceTime(interval)
			b.mustBeat(key, withSlots(1), withProcessed(1), withElapsed(interval))
		}
		batches := b.orphanBatches()
		require.Equal(t, []string{"a-finished"}, orphanIDs(batches), "the worker finished a task the server never heard end")
		require.Equal(t, worker.OrphanReasonUnheard, batches[0].Activities[0].OrphanReason)
	})

	t.Run("CompletionHeardIsNotCountedAsLost", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-done", 1), binding("a-old", 1))
		beats(b, 10, 2)
		_, err := b.handler.UpdateBindings(b.ctx, &workerpb.UpdateBindingsRequest{
			NamespaceId: testNamespaceID, WorkerInstanceKey: key, Unbound: []*workerpb.ActivityBinding{binding("a-done", 1)},
		})
		require.NoError(t, err)
		b.bindAt(key, binding("a-unseen", 1)) // its poll response is lost
		for range 12 {
			b.engine.AdvanceTime(interval)
			b.mustBeat(key, withSlots(1), withProcessed(1), withElapsed(interval))
		}
		require.Equal(t, []string{"a-unseen"}, orphanIDs(b.orphanBatches()))
	})

	t.Run("NoSlotInfoNoDecision", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-1", 1))
		for range 30 {
			b.engine.AdvanceTime(interval)
			b.mustBeat(key, withElapsed(interval)) // an SDK or client that sends no slots
		}
		require.Empty(t, b.orphanBatches())
	})

	t.Run("MismatchThatHealsClearsTheSuspicion", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-1", 1))
		for range 20 { // a count that flickers never persists long enough
			beats(b, 3, 0)
			beats(b, 1, 1)
		}
		require.Empty(t, b.orphanBatches())
	})

	t.Run("WaitsForTheGraceAfterAHostStart", func(t *testing.T) {
		t.Parallel()
		b := setup(t) // the handler (the host) starts now
		b.mustBeat(key, withSlots(0))
		b.bindAt(key, binding("a-1", 1))
		beats(b, 4, 0)
		require.Empty(t, b.orphanBatches(), "within the grace of the host's start")
		beats(b, 6, 0)
		require.Equal(t, []string{"a-1"}, orphanIDs(b.orphanBatches()))
		require.Equal(t, worker.OrphanReasonUnseen, b.rescheduler.received()[0].Activities[0].OrphanReason)
	})

	t.Run("DisabledPerNamespace", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.dc.OverrideValue(worker.OrphanDetection.Key(), false)
		b.bindAt(key, binding("a-1", 1))
		beats(b, 30, 0)
		require.Empty(t, b.orphanBatches())
	})

	t.Run("InactiveWorkerReschedulesTheRestAsBefore", func(t *testing.T) {
		t.Parallel()
		b := started(t)
		b.bindAt(key, binding("a-lost", 1), binding("a-running", 1))
		beats(b, 10, 1)
		require.Len(t, orphanIDs(b.orphanBatches()), 1)
		b.engine.AdvanceTime(time.Minute) // the worker dies
		require.Equal(t, workerpb.WorkerStatus_WORKER_STATUS_INACTIVE, b.status(key))
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		var inactive []string
		for _, r := range b.rescheduler.received() {
			if !r.Orphan {
				inactive = append(inactive, orphanIDs([]*workerpb.RescheduleActivitiesRequest{r})...)
			}
		}
		require.Len(t, inactive, 1, "the attempt left bound goes back when the worker dies")
		require.Empty(t, b.describe(key).State.PendingReschedules, "every batch acknowledged")
	})
}
