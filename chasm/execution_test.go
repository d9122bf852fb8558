package chasm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
)

func newReminderExecution(t *testing.T) (*chasm.Execution, time.Time) {
	t.Helper()
	registry := chasmtest.NewRegistry(t, reminder.NewLibrary(reminder.NewRecordingSink()))
	rc, ok := registry.Component(reminder.Archetype)
	require.True(t, ok)
	exec := chasm.NewExecution(registry, rc, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "r", RunID: "run"})
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := exec.Start(now, func(ctx chasm.MutableContext) (chasm.Component, error) {
		return reminder.New(ctx, time.Minute, "")
	}, nil)
	require.NoError(t, err)
	require.True(t, m.Created)
	exec.Apply(m)
	return exec, now
}

func TestExecution(t *testing.T) {
	t.Parallel()

	t.Run("PersistedIsTheCommittedState", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		deadline := func(e *chasm.Execution) time.Time {
			var d time.Time
			require.NoError(t, e.Read(now, func(_ chasm.Context, c chasm.Component) error {
				d = c.(*reminder.Reminder).GetDeadline().AsTime()
				return nil
			}))
			return d
		}
		registry := chasmtest.NewRegistry(t, reminder.NewLibrary(reminder.NewRecordingSink()))
		reload := func() *chasm.Execution {
			state, entries, err := exec.Persisted()
			require.NoError(t, err)
			loaded, err := chasm.LoadExecution(registry, exec.Archetype(), exec.Key(), state, entries)
			require.NoError(t, err)
			return loaded
		}
		schedule := func(e *chasm.Execution, delay time.Duration) *chasm.Mutation {
			m, err := e.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
				return reminder.TransitionScheduled.Apply(c.(*reminder.Reminder), ctx, reminder.EventSchedule{Delay: delay})
			})
			require.NoError(t, err)
			return m
		}
		require.Equal(t, now.Add(time.Minute), deadline(reload()))

		// A mutation whose write failed is never applied: the persisted form is still the
		// committed state.
		schedule(exec, time.Hour)
		require.Equal(t, now.Add(time.Minute), deadline(reload()))

		exec.Apply(schedule(exec, 2*time.Hour))
		require.Equal(t, now.Add(2*time.Hour), deadline(reload()))

		// A run loaded from its persisted form persists as it was loaded, and as it changes.
		loaded := reload()
		loaded.Apply(schedule(loaded, 3*time.Hour))
		state, _, err := loaded.Persisted()
		require.NoError(t, err)
		again, err := chasm.LoadExecution(registry, exec.Archetype(), exec.Key(), state, nil)
		require.NoError(t, err)
		require.Equal(t, now.Add(3*time.Hour), deadline(again))
	})

	t.Run("MutationCarriesOnlyChangedCollectionEntries", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		m, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			r := c.(*reminder.Reminder)
			for i := range 10_000 {
				r.AddNote(ctx, fmt.Sprintf("note-%05d", i), "x")
			}
			return nil
		})
		require.NoError(t, err)
		require.Len(t, m.CollectionPuts, 10_000)
		exec.Apply(m)
		require.Equal(t, 10_000, exec.CollectionLen("notes"))

		// A state-only update writes the state and nothing of the 10,000 entries.
		plain, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			return reminder.TransitionScheduled.Apply(c.(*reminder.Reminder), ctx, reminder.EventSchedule{Delay: time.Hour})
		})
		require.NoError(t, err)
		require.Empty(t, plain.CollectionPuts)
		require.Empty(t, plain.CollectionDeletes)
		require.Less(t, len(plain.State), 100, "the state message does not grow with the collection")

		// Deltas are exactly what changed.
		delta, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			r := c.(*reminder.Reminder)
			r.AddNote(ctx, "note-new", "y")
			r.RemoveNote(ctx, "note-00007")
			r.RemoveNote(ctx, "never-existed")
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, []chasm.CollectionEntry{{Collection: "notes", Key: "note-new", Value: delta.CollectionPuts[0].Value}}, delta.CollectionPuts)
		require.Equal(t, []chasm.CollectionEntryKey{{Collection: "notes", Key: "note-00007"}}, delta.CollectionDeletes)
	})

	t.Run("DeferWriteIsHonouredOnlyForAChangeOfTheStateAlone", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		recovered := now.Add(-time.Hour)
		exec.SetRecoveredAt(recovered)
		update := func(fn func(chasm.MutableContext, *reminder.Reminder)) *chasm.Mutation {
			m, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
				require.Equal(t, recovered, ctx.RecoveredAt())
				fn(ctx, c.(*reminder.Reminder))
				return nil
			})
			require.NoError(t, err)
			return m
		}
		var deferredState proto.Message
		stateOnly := update(func(ctx chasm.MutableContext, r *reminder.Reminder) {
			r.NotesCount += 10
			ctx.DeferWrite()
			deferredState = r.State()
		})
		require.True(t, stateOnly.Deferred)
		require.Nil(t, stateOnly.State, "a change that is not written now is not encoded now")
		require.False(t, update(func(_ chasm.MutableContext, r *reminder.Reminder) { r.NotesCount += 10 }).Deferred,
			"not asked for")
		require.False(t, update(func(ctx chasm.MutableContext, r *reminder.Reminder) {
			r.AddNote(ctx, "n", "x")
			ctx.DeferWrite()
		}).Deferred, "a collection change")
		require.False(t, update(func(ctx chasm.MutableContext, r *reminder.Reminder) {
			require.NoError(t, reminder.TransitionScheduled.Apply(r, ctx, reminder.EventSchedule{Delay: time.Hour}))
			ctx.DeferWrite()
		}).Deferred, "a task")

		// Applied, a deferred mutation is the committed state: its persisted form included.
		exec.Apply(stateOnly)
		state, _, err := exec.Persisted()
		require.NoError(t, err)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(deferredState)
		require.NoError(t, err)
		require.Equal(t, want, state)
	})

	t.Run("DeleteExecution", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		_, err := exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.DeleteExecution()
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: now.Add(time.Minute)}, &testpb.FireTask{})
			return nil
		})
		require.ErrorContains(t, err, "cannot add tasks")

		m, err := exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.DeleteExecution()
			return nil
		})
		require.NoError(t, err)
		require.True(t, m.Deleted)
		require.Empty(t, m.Tasks)
		require.True(t, exec.Started(), "nothing changes before the engine applies it")
		changed := exec.Changed()
		exec.Apply(m)
		require.False(t, exec.Started())
		select {
		case <-changed:
		default:
			t.Fatal("pollers of a deleted execution are not woken")
		}
	})

	t.Run("UncommittedMutationIsInvisible", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		_, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			c.(*reminder.Reminder).AddNote(ctx, "pending", "not yet durable")
			return nil
		})
		require.NoError(t, err)
		// The engine never applied the mutation (say its write failed): nothing shows.
		require.Zero(t, exec.CollectionLen("notes"))
		require.NoError(t, exec.Read(now, func(ctx chasm.Context, c chasm.Component) error {
			require.Zero(t, c.(*reminder.Reminder).NotesCount)
			require.False(t, reminder.Notes.Has(ctx, "pending"))
			return nil
		}))
	})

	t.Run("NowIsFixedForTheTransaction", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		m, err := exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			first := ctx.Now()
			require.Equal(t, now, first)
			return reminder.TransitionScheduled.Apply(c.(*reminder.Reminder), ctx, reminder.EventSchedule{Delay: time.Second})
		})
		require.NoError(t, err)
		require.Len(t, m.Tasks, 1)
		require.Equal(t, now.Add(time.Second), m.Tasks[0].Attributes.ScheduledTime)
	})

	t.Run("CorruptStateIsAnErrorNamingTheExecution", func(t *testing.T) {
		t.Parallel()
		registry := chasmtest.NewRegistry(t, reminder.NewLibrary(reminder.NewRecordingSink()))
		rc, _ := registry.Component(reminder.Archetype)
		key := chasm.ExecutionKey{NamespaceID: "ns", BusinessID: "broken", RunID: "run"}
		_, err := chasm.LoadExecution(registry, rc, key, []byte{0xff, 0xff, 0xff}, nil)
		require.ErrorContains(t, err, "ns/broken/run")
		require.ErrorContains(t, err, "corrupt state")
	})

	t.Run("BadTaskFailsTheTransaction", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		_, err := exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.AddTask(chasm.TaskAttributes{Destination: "x"}, &testpb.FireTask{})
			return nil
		})
		require.ErrorContains(t, err, "pure task reminder.fire cannot have a destination")

		_, err = exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.AddTask(chasm.TaskAttributes{}, &testpb.Note{})
			return nil
		})
		require.ErrorContains(t, err, "no task type is registered")

		_, err = exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: now, Destination: "x"}, &testpb.NotifyTask{})
			return nil
		})
		require.ErrorContains(t, err, "both ScheduledTime and Destination")
	})

	t.Run("APostponedTimerIsHeldUnlessTheTransactionReplacesIt", func(t *testing.T) {
		t.Parallel()
		exec, now := newReminderExecution(t)
		later := now.Add(time.Hour)
		m, err := exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.PostponeTimer(now.Add(time.Minute), &testpb.FireTask{})
			ctx.PostponeTimer(later, &testpb.FireTask{}) // the latest call counts
			ctx.DeferWrite()
			return nil
		})
		require.NoError(t, err)
		require.True(t, m.Deferred, "a postponement is no task: the change may still wait")
		require.Len(t, m.Postponed, 1)
		require.Equal(t, "reminder.fire", m.Postponed[0].Type.FullName())
		require.Equal(t, later, m.Postponed[0].Until)

		m, err = exec.Update(now, func(ctx chasm.MutableContext, c chasm.Component) error {
			ctx.PostponeTimer(later, &testpb.FireTask{})
			return reminder.TransitionScheduled.Apply(c.(*reminder.Reminder), ctx, reminder.EventSchedule{Delay: time.Minute})
		})
		require.NoError(t, err)
		require.Len(t, m.Tasks, 1)
		require.Empty(t, m.Postponed, "the transaction arms a new timer of the type")

		_, err = exec.Update(now, func(ctx chasm.MutableContext, _ chasm.Component) error {
			ctx.PostponeTimer(later, &testpb.NotifyTask{})
			return nil
		})
		require.ErrorContains(t, err, "PostponeTimer needs the payload of a singleton timer")
	})
}
