package chasmtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest"
	testpb "github.com/vigilhq/vigil/chasm/chasmtest/gen/testpb/v1"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
)

type bundle struct {
	engine *chasmtest.Engine
	sink   *reminder.RecordingSink
	ctx    context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	sink := reminder.NewRecordingSink()
	registry := chasmtest.NewRegistry(t, reminder.NewLibrary(sink))
	return &bundle{engine: chasmtest.NewEngine(t, registry), sink: sink, ctx: context.Background()}
}

func key(id string) chasm.ExecutionKey {
	return chasm.ExecutionKey{NamespaceID: "ns", BusinessID: id}
}

func (b *bundle) start(t *testing.T, id string, delay time.Duration, destination string) chasm.ComponentRef {
	t.Helper()
	res, err := chasm.StartExecution(b.ctx, b.engine, key(id),
		func(ctx chasm.MutableContext) (*reminder.Reminder, error) {
			return reminder.New(ctx, delay, destination)
		}, chasm.StartOptions{})
	require.NoError(t, err)
	require.True(t, res.Created)
	ref, err := chasm.NewRef[*reminder.Reminder](b.engine, key(id))
	require.NoError(t, err)
	return ref
}

func (b *bundle) state(t *testing.T, ref chasm.ComponentRef) *testpb.ReminderState {
	t.Helper()
	s, err := chasm.ReadComponent(b.ctx, b.engine, ref, func(_ chasm.Context, r *reminder.Reminder) (*testpb.ReminderState, error) {
		return proto.Clone(r.ReminderState).(*testpb.ReminderState), nil
	})
	require.NoError(t, err)
	return s
}

func (b *bundle) update(ref chasm.ComponentRef, fn func(chasm.MutableContext, *reminder.Reminder) error) error {
	_, err := chasm.UpdateComponent(b.ctx, b.engine, ref, func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
		return struct{}{}, fn(ctx, r)
	})
	return err
}

func TestEngine(t *testing.T) {
	t.Parallel()

	t.Run("PureTimerFiresAtItsDeadlineAndNotBefore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		startedAt := b.engine.Now()
		ref := b.start(t, "r1", 10*time.Second, "")

		s := b.state(t, ref)
		require.Equal(t, startedAt.Add(10*time.Second), s.Deadline.AsTime(), "deadline comes from the engine clock")

		b.engine.AdvanceTime(10*time.Second - time.Nanosecond)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED, b.state(t, ref).Status)

		b.engine.AdvanceTime(time.Nanosecond)
		s = b.state(t, ref)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_FIRED, s.Status)
		require.EqualValues(t, 1, s.FireCount)
		require.Empty(t, b.engine.PendingTimers())
	})

	t.Run("SingletonTimerIsReplacedInPlace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", 10*time.Second, "")
		b.engine.AdvanceTime(5 * time.Second)
		for range 3 {
			require.NoError(t, b.update(ref, func(ctx chasm.MutableContext, r *reminder.Reminder) error {
				return reminder.TransitionScheduled.Apply(r, ctx, reminder.EventSchedule{Delay: 20 * time.Second})
			}))
		}
		require.Len(t, b.engine.PendingTasksOfType("reminder.fire"), 1, "one pending timer, not one per reschedule")

		b.engine.AdvanceTime(5 * time.Second) // the original deadline passes
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED, b.state(t, ref).Status)
		b.engine.AdvanceTime(15 * time.Second)
		s := b.state(t, ref)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_FIRED, s.Status)
		require.EqualValues(t, 1, s.FireCount)
	})

	t.Run("StaleTimerIsPrunedWithoutRunning", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", 10*time.Second, "")
		require.NoError(t, b.update(ref, func(ctx chasm.MutableContext, r *reminder.Reminder) error {
			return reminder.TransitionCanceled.Apply(r, ctx, struct{}{})
		}))
		b.engine.AdvanceTime(time.Minute)
		s := b.state(t, ref)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_CANCELED, s.Status)
		require.Zero(t, s.FireCount)
		require.Equal(t, 1, b.engine.PrunedTasks())
	})

	t.Run("IllegalTransitionIsFailedPreconditionAndLeavesNoTrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", 10*time.Second, "")
		cancel := func(ctx chasm.MutableContext, r *reminder.Reminder) error {
			return reminder.TransitionCanceled.Apply(r, ctx, struct{}{})
		}
		require.NoError(t, b.update(ref, cancel))
		before := b.state(t, ref)

		var fp *serviceerror.FailedPrecondition
		require.ErrorAs(t, b.update(ref, cancel), &fp)
		require.True(t, proto.Equal(before, b.state(t, ref)))
	})

	t.Run("FailedTransactionLeavesNoTrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", 10*time.Second, "somewhere")
		require.NoError(t, b.update(ref, func(ctx chasm.MutableContext, r *reminder.Reminder) error {
			r.AddNote(ctx, "kept", "a note that stays")
			return nil
		}))
		before := b.state(t, ref)
		timersBefore := len(b.engine.PendingTimers())

		boom := errors.New("boom")
		err := b.update(ref, func(ctx chasm.MutableContext, r *reminder.Reminder) error {
			r.AddNote(ctx, "lost", "never committed")
			r.RemoveNote(ctx, "kept")
			r.Destination = "elsewhere"
			if err := reminder.TransitionScheduled.Apply(r, ctx, reminder.EventSchedule{Delay: time.Hour}); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.True(t, proto.Equal(before, b.state(t, ref)), "state unchanged")
		require.Len(t, b.engine.PendingTimers(), timersBefore, "no task added")

		_, err = chasm.ReadComponent(b.ctx, b.engine, ref, func(ctx chasm.Context, _ *reminder.Reminder) (struct{}, error) {
			require.Equal(t, []string{"kept"}, reminder.Notes.Keys(ctx))
			return struct{}{}, nil
		})
		require.NoError(t, err)
	})

	t.Run("SideEffectTaskCallsOutAndReentersEngine", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", time.Second, "inbox")
		require.Empty(t, b.engine.SideEffectTasks(), "nothing to notify before the reminder fires")

		b.engine.AdvanceTime(time.Second)
		tasks := b.engine.SideEffectTasks()
		require.Len(t, tasks, 1)
		require.Equal(t, "inbox", tasks[0].Task.Attributes.Destination)

		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Equal(t, []reminder.Delivery{{Destination: "inbox", ReminderID: "r1", FireCount: 1}}, b.sink.Delivered())
		s := b.state(t, ref)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED, s.Status)
		require.EqualValues(t, 1, s.NotifyCount)
		require.Empty(t, b.engine.SideEffectTasks())
	})

	t.Run("FailingSideEffectTaskStaysPendingUntilItSucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", time.Second, "inbox")
		b.engine.AdvanceTime(time.Second)

		b.sink.FailWith(errors.New("destination down"))
		require.ErrorContains(t, b.engine.RunSideEffectTasks(b.ctx), "destination down")
		require.Len(t, b.engine.SideEffectTasks(), 1)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_FIRED, b.state(t, ref).Status)

		b.sink.FailWith(nil)
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_NOTIFIED, b.state(t, ref).Status)
		require.Len(t, b.sink.Delivered(), 1)
	})

	t.Run("SideEffectTaskOfSupersededFiringIsDropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", time.Second, "inbox")
		b.engine.AdvanceTime(time.Second)
		require.NoError(t, b.update(ref, func(ctx chasm.MutableContext, r *reminder.Reminder) error {
			return reminder.TransitionScheduled.Apply(r, ctx, reminder.EventSchedule{Delay: time.Hour})
		}))
		require.NoError(t, b.engine.RunSideEffectTasks(b.ctx))
		require.Empty(t, b.sink.Delivered(), "a stale notification is never delivered")
		require.Equal(t, 1, b.engine.PrunedTasks())
	})

	t.Run("UpdateWithStartCreatesExactlyOnceUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const writers = 64
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			runIDs  = map[string]bool{}
		)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, res, err := chasm.UpdateWithStart(b.ctx, b.engine, key("shared"),
					func(ctx chasm.MutableContext) (*reminder.Reminder, error) {
						return reminder.New(ctx, time.Hour, "")
					},
					func(ctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
						r.AddNote(ctx, fmt.Sprintf("n%d", i), "hello")
						return struct{}{}, nil
					})
				require.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				if res.Created {
					created++
				}
				runIDs[res.RunID] = true
			}()
		}
		wg.Wait()
		require.Equal(t, 1, created)
		require.Len(t, runIDs, 1)

		ref, err := chasm.NewRef[*reminder.Reminder](b.engine, key("shared"))
		require.NoError(t, err)
		require.EqualValues(t, writers, b.state(t, ref).NotesCount)
		n, err := b.engine.CollectionLen(ref, reminder.Notes.Name())
		require.NoError(t, err)
		require.Equal(t, writers, n)
	})

	t.Run("StartHonoursIDPolicies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		newFn := func(ctx chasm.MutableContext) (*reminder.Reminder, error) { return reminder.New(ctx, time.Hour, "") }
		first, err := chasm.StartExecution(b.ctx, b.engine, key("id"), newFn, chasm.StartOptions{})
		require.NoError(t, err)

		_, err = chasm.StartExecution(b.ctx, b.engine, key("id"), newFn, chasm.StartOptions{})
		var exists *serviceerror.AlreadyExists
		require.ErrorAs(t, err, &exists, "a running business ID is refused by default")

		same, err := chasm.StartExecution(b.ctx, b.engine, key("id"), newFn,
			chasm.StartOptions{ConflictPolicy: chasm.IDConflictUseExisting})
		require.NoError(t, err)
		require.Equal(t, chasm.StartResult{RunID: first.RunID}, same)

		ref, err := chasm.NewRef[*reminder.Reminder](b.engine, key("id"))
		require.NoError(t, err)
		require.NoError(t, b.update(ref, func(ctx chasm.MutableContext, r *reminder.Reminder) error {
			return reminder.TransitionCanceled.Apply(r, ctx, struct{}{})
		}))

		_, err = chasm.StartExecution(b.ctx, b.engine, key("id"), newFn,
			chasm.StartOptions{ReusePolicy: chasm.IDReuseRejectDuplicate})
		require.ErrorAs(t, err, &exists)
		_, err = chasm.StartExecution(b.ctx, b.engine, key("id"), newFn,
			chasm.StartOptions{ReusePolicy: chasm.IDReuseAllowDuplicateFailedOnly})
		require.ErrorAs(t, err, &exists, "the closed run completed, it did not fail")

		second, err := chasm.StartExecution(b.ctx, b.engine, key("id"), newFn, chasm.StartOptions{})
		require.NoError(t, err)
		require.True(t, second.Created)
		require.NotEqual(t, first.RunID, second.RunID)

		// The first run is still addressable by its RunID.
		old := ref
		old.Key.RunID = first.RunID
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_CANCELED, b.state(t, old).Status)
		require.Equal(t, testpb.ReminderStatus_REMINDER_STATUS_SCHEDULED, b.state(t, ref).Status)
	})

	t.Run("MissingExecutionIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref, err := chasm.NewRef[*reminder.Reminder](b.engine, key("nobody"))
		require.NoError(t, err)
		var nf *serviceerror.NotFound
		require.ErrorAs(t, b.update(ref, func(chasm.MutableContext, *reminder.Reminder) error { return nil }), &nf)
	})

	t.Run("PollComponentWakesWhenPredicateHolds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", time.Minute, "")
		result := make(chan error, 1)
		go func() {
			_, err := chasm.PollComponent(b.ctx, b.engine, ref, func(_ chasm.Context, r *reminder.Reminder) (int64, bool, error) {
				return r.FireCount, r.Status == testpb.ReminderStatus_REMINDER_STATUS_FIRED, nil
			})
			result <- err
		}()
		select {
		case err := <-result:
			t.Fatalf("poll returned before the reminder fired: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		b.engine.AdvanceTime(time.Minute)
		require.NoError(t, <-result)
	})

	t.Run("PollComponentReturnsWhenContextEnds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := b.start(t, "r1", time.Minute, "")
		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		_, err := chasm.PollComponent(ctx, b.engine, ref, func(chasm.Context, *reminder.Reminder) (struct{}, bool, error) {
			return struct{}{}, false, nil
		})
		require.ErrorIs(t, err, context.Canceled)
	})
}

// A component whose pure task forgets to invalidate itself, to show the engine catches it.

type looper struct{ state *wrapperspb.Int64Value }

func (l *looper) State() proto.Message                 { return l.state }
func (l *looper) LifecycleState() chasm.LifecycleState { return chasm.LifecycleRunning }

type alwaysValid struct{}

func (alwaysValid) Validate(chasm.Context, *looper, chasm.TaskAttributes, *wrapperspb.BoolValue) (bool, error) {
	return true, nil
}

func (alwaysValid) Execute(_ chasm.MutableContext, l *looper, _ chasm.TaskAttributes, _ *wrapperspb.BoolValue) error {
	l.state.Value++
	return nil
}

type looperLibrary struct{}

func (looperLibrary) Name() string { return "looper" }
func (looperLibrary) Components() []*chasm.RegistrableComponent {
	return []*chasm.RegistrableComponent{chasm.NewRegistrableComponent("looper",
		func(s *wrapperspb.Int64Value) *looper { return &looper{state: s} })}
}
func (looperLibrary) Tasks() []*chasm.RegistrableTask {
	return []*chasm.RegistrableTask{chasm.NewRegistrablePureTask("spin", alwaysValid{})}
}

type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestEngineFailsTestWhenPureTaskStaysValid(t *testing.T) {
	t.Parallel()
	tb := &recordingTB{TB: t}
	engine := chasmtest.NewEngine(tb, chasmtest.NewRegistry(t, looperLibrary{}))
	_, err := chasm.StartExecution(context.Background(), engine, key("l"),
		func(ctx chasm.MutableContext) (*looper, error) {
			ctx.AddTask(chasm.TaskAttributes{ScheduledTime: ctx.Now().Add(time.Second)}, &wrapperspb.BoolValue{})
			return &looper{state: &wrapperspb.Int64Value{}}, nil
		}, chasm.StartOptions{})
	require.NoError(t, err)

	engine.AdvanceTime(time.Second)
	require.Len(t, tb.errors, 1)
	require.Contains(t, tb.errors[0], "still valid after it ran")

	ref, err := chasm.NewRef[*looper](engine, key("l"))
	require.NoError(t, err)
	v, err := chasm.ReadComponent(context.Background(), engine, ref, func(_ chasm.Context, l *looper) (int64, error) {
		return l.state.Value, nil
	})
	require.NoError(t, err)
	require.Zero(t, v, "the faulty run is not committed")
}
