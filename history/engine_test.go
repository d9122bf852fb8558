package history_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/common/shard"
	"github.com/vigilhq/vigil/history/historytest"
	"github.com/vigilhq/vigil/persistence"
)

const testNamespace = "ns-1"

func key(id string) chasm.ExecutionKey {
	return chasm.ExecutionKey{NamespaceID: testNamespace, BusinessID: id}
}

func startReminder(t *testing.T, e chasm.Engine, id string, delay time.Duration, destination string) chasm.ComponentRef {
	t.Helper()
	_, err := chasm.StartExecution(context.Background(), e, key(id),
		func(ctx chasm.MutableContext) (*reminder.Reminder, error) {
			return reminder.New(ctx, delay, destination)
		},
		chasm.StartOptions{})
	require.NoError(t, err)
	ref, err := chasm.NewRef[*reminder.Reminder](e, key(id))
	require.NoError(t, err)
	return ref
}

func readState(t *testing.T, e chasm.Engine, ref chasm.ComponentRef) *testpb.ReminderState {
	t.Helper()
	s, err := chasm.ReadComponent(context.Background(), e, ref, func(_ chasm.Context, r *reminder.Reminder) (*testpb.ReminderState, error) {
		return proto.Clone(r.ReminderState).(*testpb.ReminderState), nil
	})
	require.NoError(t, err)
	return s
}

// waitForStatus long-polls the component until it reaches status.
func waitForStatus(t *testing.T, e chasm.Engine, ref chasm.ComponentRef, status testpb.ReminderStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := chasm.PollComponent(ctx, e, ref, func(_ chasm.Context, r *reminder.Reminder) (struct{}, bool, error) {
		return struct{}{}, r.Status == status, nil
	})
	require.NoError(t, err, "waiting for %s to become %s", ref, status)
}

func counter(scope tally.Scope, name string) int64 {
	var total int64
	for _, c := range scope.(tally.TestScope).Snapshot().Counters() {
		if c.Name() == name {
			total += c.Value()
		}
	}
	return total
}

func TestHistoryEngine(t *testing.T) {
	t.Parallel()

	t.Run("TimerAndSideEffectTaskRunDurably", func(t *testing.T) {
		t.Parallel()
		sink := reminder.NewRecordingSink()
		h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(sink)}})
		ref := startReminder(t, h.Engine, "r1", 50*time.Millisecond, "inbox")

		waitForStatus(t, h.Engine, ref, testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED)
		require.Equal(t, []reminder.Delivery{{Destination: "inbox", ReminderID: "r1", FireCount: 1}}, sink.Delivered())
	})

	t.Run("StateCollectionsAndTimersSurviveRestart", func(t *testing.T) {
		t.Parallel()
		ts := clock.NewFakeTimeSource()
		lib := reminder.NewLibrary(reminder.NewRecordingSink())
		h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{lib}, TimeSource: ts})
		ref := startReminder(t, h.Engine, "r1", time.Hour, "")
		_, err := chasm.UpdateComponent(context.Background(), h.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
			for i := range 100 {
				r.AddNote(ctx, fmt.Sprintf("n%03d", i), "kept across restarts")
			}
			return struct{}{}, nil
		})
		require.NoError(t, err)
		before := readState(t, h.Engine, ref)
		h.Stop()

		// The deadline passes while the host is down; the timer fires after the restart.
		ts.Advance(2 * time.Hour)
		h2 := historytest.Start(t, historytest.Options{Path: h.Path, Libraries: []chasm.Library{lib}, TimeSource: ts})
		waitForStatus(t, h2.Engine, ref, testpb.ReminderStatus_REMINDER_STATUS_FIRED)

		after := readState(t, h2.Engine, ref)
		require.Equal(t, before.Deadline.AsTime(), after.Deadline.AsTime())
		require.EqualValues(t, 100, after.NotesCount)
		_, err = chasm.ReadComponent(context.Background(), h2.Engine, ref, func(ctx chasm.Context, _ *reminder.Reminder) (struct{}, error) {
			require.Equal(t, 100, reminder.Notes.Len(ctx))
			note, ok, err := reminder.Notes.Get(ctx, "n042")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "kept across restarts", note.Text)
			return struct{}{}, nil
		})
		require.NoError(t, err)
	})

	t.Run("DecodesOfExecutionsKeptEncodedAreCounted", func(t *testing.T) {
		t.Parallel()
		// One shard that keeps one execution decoded: touching the other decodes it.
		h := historytest.Start(t, historytest.Options{
			Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}, NumShards: 1, CacheDecodedSize: 1,
		})
		a := startReminder(t, h.Engine, "a", time.Hour, "")
		b := startReminder(t, h.Engine, "b", time.Hour, "")
		const decodes = "history.execution_cache_decodes"
		before := counter(h.Scope, decodes)

		readState(t, h.Engine, a)
		require.Equal(t, before+1, counter(h.Scope, decodes), "a was kept encoded while b was used")
		readState(t, h.Engine, a)
		require.Equal(t, before+1, counter(h.Scope, decodes), "a is decoded now")
		readState(t, h.Engine, b)
		require.Equal(t, before+2, counter(h.Scope, decodes))
	})

	t.Run("ShardCountIsFixedAtFirstStart", func(t *testing.T) {
		t.Parallel()
		h := historytest.Start(t, historytest.Options{NumShards: 4})
		h.Stop()
		_, err := historytest.StartE(t, historytest.Options{Path: h.Path, NumShards: 8})
		require.ErrorContains(t, err, "created with 4 shards and cannot start with 8")
	})

	t.Run("UpdateWithStartCreatesExactlyOnceUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}})
		const writers = 32
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, res, err := chasm.UpdateWithStart(context.Background(), h.Engine, key("shared"),
					func(ctx chasm.MutableContext) (*reminder.Reminder, error) { return reminder.New(ctx, time.Hour, "") },
					func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
						r.AddNote(ctx, fmt.Sprintf("n%d", i), "x")
						return struct{}{}, nil
					})
				require.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				if res.Created {
					created++
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1, created)
		ref, err := chasm.NewRef[*reminder.Reminder](h.Engine, key("shared"))
		require.NoError(t, err)
		require.EqualValues(t, writers, readState(t, h.Engine, ref).NotesCount)
	})

	t.Run("WritesAreFencedOnceAnotherHostTakesTheShard", func(t *testing.T) {
		t.Parallel()
		h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}})
		ref := startReminder(t, h.Engine, "r1", time.Hour, "")

		shardID := shard.ForKey(testNamespace, "r1", h.Engine.NumShards())
		_, err := h.Store.AcquireShard(context.Background(), shardID, "another-host")
		require.NoError(t, err)

		update := func() error {
			_, err := chasm.UpdateComponent(context.Background(), h.Engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
				r.AddNote(ctx, "late", "must not land")
				return struct{}{}, nil
			})
			return err
		}
		var unavailable *serviceerror.Unavailable
		require.ErrorAs(t, update(), &unavailable)
		require.ErrorAs(t, update(), &unavailable, "the shard is no longer served")

		// Nothing of the fenced write reached the store.
		record, err := h.Store.GetExecution(context.Background(), shardID, persistence.ExecutionKey{
			NamespaceID: testNamespace, ArchetypeID: mustArchetypeID(t, h), BusinessID: "r1", RunID: runID(t, h, shardID, "r1"),
		})
		require.NoError(t, err)
		require.Empty(t, record.Collections)
	})

	t.Run("CorruptExecutionIsReportedNotCrashed", func(t *testing.T) {
		t.Parallel()
		lib := reminder.NewLibrary(reminder.NewRecordingSink())
		first := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{lib}})
		healthy := startReminder(t, first.Engine, "healthy", time.Second, "")
		brokenRef := writeCorruptReminder(t, first, "broken")
		first.Stop()
		// Restart, so the timer queue reads the corrupt execution's due timer from the store.
		h := historytest.Start(t, historytest.Options{Path: first.Path, Libraries: []chasm.Library{lib}})

		_, err := chasm.ReadComponent(context.Background(), h.Engine, brokenRef, func(chasm.Context, *reminder.Reminder) (struct{}, error) {
			return struct{}{}, nil
		})
		var dataLoss *serviceerror.DataLoss
		require.ErrorAs(t, err, &dataLoss)
		require.ErrorContains(t, err, "ns-1/broken/")
		require.Positive(t, counter(h.Scope, "history.corrupt_executions"))

		// The corrupt execution's due timer is parked, and does not stop the healthy one.
		require.Eventually(t, func() bool { return counter(h.Scope, "history.tasks_parked") == 1 }, 10*time.Second, 10*time.Millisecond)
		waitForStatus(t, h.Engine, healthy, testpb.ReminderStatus_REMINDER_STATUS_FIRED)
	})

	t.Run("UnknownTaskTypeIsParkedAndOthersRun", func(t *testing.T) {
		t.Parallel()
		lib := reminder.NewLibrary(reminder.NewRecordingSink())
		h := historytest.Start(t, historytest.Options{Libraries: []chasm.Library{lib}})
		ref := startReminder(t, h.Engine, "r1", time.Hour, "")
		shardID := shard.ForKey(testNamespace, "r1", h.Engine.NumShards())
		info, err := h.Store.GetShard(context.Background(), shardID)
		require.NoError(t, err)
		state := readState(t, h.Engine, ref)
		stateBytes, err := proto.Marshal(state)
		require.NoError(t, err)
		pkey := persistence.ExecutionKey{NamespaceID: testNamespace, ArchetypeID: mustArchetypeID(t, h), BusinessID: "r1", RunID: runID(t, h, shardID, "r1")}
		results, err := h.Store.WriteBatch(context.Background(), []*persistence.ExecutionWrite{{
			ShardID: shardID, RangeID: info.RangeID, Mode: persistence.WriteModeUpdate, Key: pkey,
			PrevDBVersion: 1, NextDBVersion: 2, State: stateBytes, Lifecycle: persistence.LifecycleRunning,
			TimerTasks: []*persistence.TimerTask{{
				ShardID: shardID, TaskID: 1, VisibilityTime: time.Now().UTC(), Execution: pkey, TaskTypeID: 12345,
			}},
		}})
		require.NoError(t, err)
		require.NoError(t, results[0])
		h.Stop()

		h = historytest.Start(t, historytest.Options{Path: h.Path, Libraries: []chasm.Library{lib}})
		require.Eventually(t, func() bool { return counter(h.Scope, "history.tasks_parked") == 1 }, 10*time.Second, 10*time.Millisecond)
		require.Positive(t, counter(h.Scope, "history.task_errors"))
		fresh := startReminder(t, h.Engine, "r2", 10*time.Millisecond, "")
		waitForStatus(t, h.Engine, fresh, testpb.ReminderStatus_REMINDER_STATUS_FIRED)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED, readState(t, h.Engine, ref).Status)
	})
}

func mustArchetypeID(t *testing.T, h *historytest.Host) uint32 {
	t.Helper()
	rc, ok := h.Engine.Registry().Component(reminder.Archetype)
	require.True(t, ok)
	return rc.ID()
}

func runID(t *testing.T, h *historytest.Host, shardID int32, businessID string) string {
	t.Helper()
	cur, err := h.Store.GetCurrentExecution(context.Background(), shardID, persistence.CurrentExecutionKey{
		NamespaceID: testNamespace, ArchetypeID: mustArchetypeID(t, h), BusinessID: businessID,
	})
	require.NoError(t, err)
	return cur.RunID
}

// writeCorruptReminder stores an execution whose state does not decode, with a timer due now.
func writeCorruptReminder(t *testing.T, h *historytest.Host, id string) chasm.ComponentRef {
	t.Helper()
	shardID := shard.ForKey(testNamespace, id, h.Engine.NumShards())
	info, err := h.Store.GetShard(context.Background(), shardID)
	require.NoError(t, err)
	rc, _ := h.Engine.Registry().Component(reminder.Archetype)
	fire, _ := h.Engine.Registry().Task("reminder.fire")
	pkey := persistence.ExecutionKey{NamespaceID: testNamespace, ArchetypeID: rc.ID(), BusinessID: id, RunID: "run-corrupt"}
	results, err := h.Store.WriteBatch(context.Background(), []*persistence.ExecutionWrite{{
		ShardID: shardID, RangeID: info.RangeID, Mode: persistence.WriteModeCreate, Key: pkey,
		NextDBVersion: 1, State: []byte{0xff, 0xfe, 0xfd}, Lifecycle: persistence.LifecycleRunning,
		TimerTasks: []*persistence.TimerTask{{
			ShardID: shardID, TaskID: 1, VisibilityTime: time.Now().UTC(), Execution: pkey, TaskTypeID: fire.ID(), Singleton: true,
		}},
	}})
	require.NoError(t, err)
	require.NoError(t, results[0])
	return chasm.ComponentRef{Archetype: reminder.Archetype, Key: key(id)}
}
