package matching

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

func TestActivityDispatch(t *testing.T) {
	t.Parallel()

	t.Run("SyncMatchHandsTaskToWaitingPoller", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		first := e.waitingPoll(context.Background(), activityPoll("w1"))
		second := e.waitingPoll(context.Background(), activityPoll("w2"))

		require.NoError(t, e.m.AddActivityTask(taskN(1)))
		got := receive(t, first)
		require.NoError(t, got.err)
		require.True(t, got.ok)
		require.Equal(t, taskN(1), got.ref)
		requireNotReceived(t, second)

		require.NoError(t, e.m.AddActivityTask(taskN(2)))
		got = receive(t, second)
		require.True(t, got.ok)
		require.Equal(t, taskN(2), got.ref)

		require.EqualValues(t, 2, e.counter("matching_sync_match"))
		require.EqualValues(t, 2, e.counter("matching_tasks_dispatched"))
		require.Zero(t, e.backlogLen(testNS, testTQ))
	})

	t.Run("PollerOfAnotherQueueIsNotServed", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		other := activityPoll("w1")
		other.TaskQueue = "other"
		waiting := e.waitingPoll(context.Background(), other)

		require.NoError(t, e.m.AddActivityTask(taskN(1)))
		requireNotReceived(t, waiting)
		require.Equal(t, 1, e.backlogLen(testNS, testTQ))
	})

	t.Run("BacklogServedFIFO", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		// Added out of order; two share a ScheduledTime and keep their insertion order.
		added := []ActivityTaskRef{
			task("c", 1, 3*time.Second),
			task("a", 1, time.Second),
			task("b", 1, 2*time.Second),
			task("a2", 1, time.Second),
		}
		for _, ref := range added {
			require.NoError(t, e.m.AddActivityTask(ref))
		}
		require.EqualValues(t, 4, e.gauge("matching_backlog"))

		var order []string
		for range added {
			ref, ok := e.pollNow(activityPoll("w1"))
			require.True(t, ok)
			order = append(order, ref.ActivityID)
		}
		require.Equal(t, []string{"a", "a2", "b", "c"}, order)
		_, ok := e.pollNow(activityPoll("w1"))
		require.False(t, ok)
		require.Zero(t, e.gauge("matching_backlog"))
		require.Zero(t, e.counter("matching_sync_match"))
	})

	t.Run("NewerStampSupersedesQueued", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(task("a", 1, 0)))
		require.NoError(t, e.m.AddActivityTask(task("a", 2, time.Second)))
		require.NoError(t, e.m.AddActivityTask(task("a", 1, 0)), "an older stamp arriving late")
		require.NoError(t, e.m.AddActivityTask(task("a", 2, time.Second)), "a duplicate")
		require.Equal(t, 1, e.backlogLen(testNS, testTQ))

		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.EqualValues(t, 2, ref.Stamp)
		_, ok = e.pollNow(activityPoll("w1"))
		require.False(t, ok)
		require.EqualValues(t, 2, e.counter("matching_tasks_added"))
		require.EqualValues(t, 3, e.counter("matching_tasks_deduplicated"))
	})

	t.Run("RemovedTaskIsNotServed", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(taskN(1)))
		require.NoError(t, e.m.AddActivityTask(taskN(2)))
		require.True(t, e.m.RemoveActivityTask(testNS, taskN(1).ActivityID, taskN(1).RunID))
		require.False(t, e.m.RemoveActivityTask(testNS, taskN(1).ActivityID, taskN(1).RunID))

		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.Equal(t, taskN(2), ref)
		_, ok = e.pollNow(activityPoll("w1"))
		require.False(t, ok)
	})

	t.Run("ReturnedTaskIsServedFirst", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(task("late", 1, time.Hour)))
		got, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.NoError(t, e.m.AddActivityTask(task("early", 1, 0)))

		// The frontend could not deliver "late": it goes before "early" although scheduled later.
		require.NoError(t, e.m.ReturnActivityTask(got))
		ref, ok := e.pollNow(activityPoll("w2"))
		require.True(t, ok)
		require.Equal(t, "late", ref.ActivityID)
		ref, ok = e.pollNow(activityPoll("w2"))
		require.True(t, ok)
		require.Equal(t, "early", ref.ActivityID)
		require.EqualValues(t, 1, e.counter("matching_tasks_returned"))
	})

	t.Run("ReturnedTaskGoesToWaitingPoller", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		waiting := e.waitingPoll(context.Background(), activityPoll("w1"))
		require.NoError(t, e.m.ReturnActivityTask(taskN(1)))
		require.Equal(t, taskN(1), receive(t, waiting).ref)
	})

	t.Run("ReturnWhileSameDispatchQueuedPromotesIt", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(task("a", 1, time.Hour)))
		out, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		// History re-adds the same dispatch (e.g. its recovery scan) while the frontend holds it.
		require.NoError(t, e.m.AddActivityTask(out))
		require.NoError(t, e.m.AddActivityTask(task("b", 1, 0)))
		require.NoError(t, e.m.ReturnActivityTask(out))
		require.Equal(t, 2, e.backlogLen(testNS, testTQ), "not queued twice")

		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.Equal(t, out, ref)
	})

	t.Run("ReturnOfNewerStampReplacesOlderQueued", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(task("a", 1, 0)))
		require.NoError(t, e.m.ReturnActivityTask(task("a", 2, 0)))
		require.Equal(t, 1, e.backlogLen(testNS, testTQ))
		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.EqualValues(t, 2, ref.Stamp)
	})

	t.Run("ReturnOfSupersededTaskIsDropped", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(task("a", 1, 0)))
		old, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.NoError(t, e.m.AddActivityTask(task("a", 2, 0)))
		require.NoError(t, e.m.ReturnActivityTask(old))

		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.EqualValues(t, 2, ref.Stamp)
		_, ok = e.pollNow(activityPoll("w1"))
		require.False(t, ok)
	})

	t.Run("InvalidArgumentsAreRefused", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.ErrorIs(t, e.m.AddActivityTask(ActivityTaskRef{NamespaceID: testNS, TaskQueue: testTQ}), ErrInvalidArgument)
		_, _, err := e.m.PollActivityTask(context.Background(), ActivityPoll{NamespaceID: testNS})
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
}

func TestPollDeadlines(t *testing.T) {
	t.Parallel()

	t.Run("EmptyPollAnswersBeforeDeadline", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{PollDeadlineMargin: time.Second})
		ctx, cancel := context.WithDeadline(context.Background(), e.ts.Now().Add(10*time.Second))
		defer cancel()
		res := e.waitingPoll(ctx, activityPoll("w1"))

		e.ts.Advance(9*time.Second - time.Millisecond)
		require.Equal(t, 1, e.ts.PendingTimers(), "the poll's timer must still be pending just before deadline-margin")
		requireNotReceived(t, res)

		e.ts.Advance(time.Millisecond)
		got := receive(t, res)
		require.NoError(t, got.err)
		require.False(t, got.ok)
		require.NoError(t, ctx.Err(), "answered while the caller's deadline was still ahead")
		require.EqualValues(t, 1, e.counter("matching_poll_timeouts"))
	})

	t.Run("PollWithoutDeadlineWaitsMaxPollWait", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		res := e.waitingPoll(context.Background(), activityPoll("w1"))
		e.ts.Advance(MaxPollWaitDefault - time.Millisecond)
		requireNotReceived(t, res)
		e.ts.Advance(time.Millisecond)
		got := receive(t, res)
		require.NoError(t, got.err)
		require.False(t, got.ok)
	})

	t.Run("ClientDeadlineBeyondMaxPollWaitIsCapped", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		// The SDK's 70 s poll deadline: answered at 60 s.
		ctx, cancel := context.WithDeadline(context.Background(), e.ts.Now().Add(70*time.Second))
		defer cancel()
		res := e.waitingPoll(ctx, activityPoll("w1"))
		e.ts.Advance(MaxPollWaitDefault)
		got := receive(t, res)
		require.NoError(t, got.err)
		require.False(t, got.ok)
	})

	t.Run("DeadlineInsideMarginAnswersAtOnce", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		_, ok := e.pollNow(activityPoll("w1"))
		require.False(t, ok)
		require.Zero(t, e.ts.PendingTimers())
		require.EqualValues(t, 1, e.counter("matching_poll_timeouts"))
	})

	t.Run("CancelledPollReturnsContextError", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		res := e.waitingPoll(ctx, activityPoll("w1"))
		cancel()
		got := receive(t, res)
		require.ErrorIs(t, got.err, context.Canceled)
		require.False(t, got.ok)
		require.Zero(t, e.counter("matching_poll_timeouts"))
	})
}

func TestCancelledPollNeverLosesTask(t *testing.T) {
	t.Parallel()

	t.Run("CancelRacingAdd", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		for i := range 200 {
			ctx, cancel := context.WithCancel(context.Background())
			res := e.waitingPoll(ctx, activityPoll("w1"))
			// Cancel and add at once: the task goes to the poll, which puts it back, or it
			// finds the poll gone. Either way it must be served to the next poll.
			go cancel()
			require.NoError(t, e.m.AddActivityTask(taskN(i)))
			got := receive(t, res)
			if !got.ok {
				require.ErrorIs(t, got.err, context.Canceled)
				// A poll without a deadline takes the task if it is queued, else waits for
				// one. (pollNow's deadline is fake-now plus half the margin, which the wall
				// clock overtakes when 200 iterations run slowly on a loaded machine.)
				next, cancelNext := context.WithCancel(context.Background())
				select {
				case got := <-e.poll(next, activityPoll("w2")):
					require.NoError(t, got.err)
					require.True(t, got.ok, "iteration %d: no task", i)
					require.Equal(t, taskN(i), got.ref)
				case q := <-e.waiting:
					t.Fatalf("iteration %d: task lost: the next poll of %s waits", i, q)
				}
				cancelNext()
			} else {
				require.Equal(t, taskN(i), got.ref)
			}
			require.Zero(t, e.backlogLen(testNS, testTQ))
		}
	})

	t.Run("TaskHandedAsPollIsCancelledGoesBackToHead", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		require.NoError(t, e.m.AddActivityTask(task("later", 1, time.Hour)))
		_, ok := e.pollNow(activityPoll("w1")) // leaves the queue empty, so the next poll waits
		require.True(t, ok)
		ctx, cancel := context.WithCancel(context.Background())
		res := e.waitingPoll(ctx, activityPoll("w1"))

		// What AddActivityTask does under the lock, followed by the caller going away before
		// the poll goroutine runs again: the poll may see either event first.
		e.m.mu.Lock()
		e.m.enqueue(e.m.activityQueues[queueKey{testNS, testTQ}], taskN(1), false, e.ts.Now())
		cancel()
		e.m.mu.Unlock()

		got := receive(t, res)
		if got.err == nil {
			// The poll goroutine took the delivery (no lock needed) and checked its context
			// before cancel ran: the task went to a caller still there, which is not a loss.
			// Rare; the branch below is the interleaving this test is about.
			require.True(t, got.ok)
			require.Equal(t, taskN(1), got.ref)
			require.Zero(t, e.counter("matching_tasks_returned"))
			return
		}
		require.ErrorIs(t, got.err, context.Canceled)
		require.False(t, got.ok)
		require.NoError(t, e.m.AddActivityTask(task("earlier", 1, -time.Hour)))
		ref, ok := e.pollNow(activityPoll("w2"))
		require.True(t, ok)
		require.Equal(t, taskN(1), ref, "the returned task is at the head")
		require.EqualValues(t, 1, e.counter("matching_tasks_returned"))
		require.EqualValues(t, 2, e.counter("matching_tasks_dispatched"))
		require.Zero(t, e.counter("matching_sync_match"))
	})

	t.Run("Stress", func(t *testing.T) {
		t.Parallel()
		// Real clock: this is about goroutine interleavings, not about time.
		m := New(nil, Options{}, nil, nil)
		m.Start()
		defer m.Stop()

		const (
			tasks   = 5000
			pollers = 16
			adders  = 4
		)
		var (
			mu        sync.Mutex
			delivered = make(map[string]int, tasks)
			total     int
			allIn     = make(chan struct{})
		)
		record := func(ref ActivityTaskRef) {
			mu.Lock()
			defer mu.Unlock()
			delivered[ref.ActivityID]++
			total++
			if total == tasks {
				close(allIn)
			}
		}

		stopPolling := make(chan struct{})
		var pollWG sync.WaitGroup
		for p := range pollers {
			pollWG.Add(1)
			go func() {
				defer pollWG.Done()
				rng := rand.New(rand.NewPCG(uint64(p), 1))
				for {
					select {
					case <-stopPolling:
						return
					default:
					}
					ctx, cancel := context.WithCancel(context.Background())
					// Most polls are cancelled after a random short while, many while a task
					// is being handed to them.
					if rng.IntN(4) != 0 {
						time.AfterFunc(time.Duration(rng.IntN(200))*time.Microsecond, cancel)
					} else {
						go func() {
							select {
							case <-stopPolling:
							case <-time.After(time.Millisecond):
							}
							cancel()
						}()
					}
					ref, ok, err := m.PollActivityTask(ctx, ActivityPoll{NamespaceID: testNS, TaskQueue: testTQ})
					cancel()
					if ok {
						assert.NoError(t, err)
						record(ref)
					} else if err != nil && !errors.Is(err, context.Canceled) {
						assert.ErrorIs(t, err, ErrStopped)
						return
					}
				}
			}()
		}

		var addWG sync.WaitGroup
		for a := range adders {
			addWG.Add(1)
			go func() {
				defer addWG.Done()
				for i := a; i < tasks; i += adders {
					assert.NoError(t, m.AddActivityTask(taskN(i)))
				}
			}()
		}
		addWG.Wait()

		select {
		case <-allIn:
		case <-time.After(30 * time.Second):
			t.Fatal("not every task was dispatched")
		}
		close(stopPolling)
		pollWG.Wait()

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, delivered, tasks)
		for id, n := range delivered {
			require.Equal(t, 1, n, "task %s dispatched %d times", id, n)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		require.Zero(t, m.backlogSize)
		require.Empty(t, m.tasks)
	})
}

func TestCompletePollsOfWorker(t *testing.T) {
	t.Parallel()

	t.Run("CompletePollsOfWorkerEndsOnlyThatWorkersPolls", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{ShutdownTombstoneTTL: 10 * time.Second})
		otherQueue := activityPoll("dying")
		otherQueue.TaskQueue = "tq-2"
		dying1 := e.waitingPoll(context.Background(), activityPoll("dying"))
		dying2 := e.waitingPoll(context.Background(), otherQueue)
		alive := e.waitingPoll(context.Background(), activityPoll("alive"))

		require.Equal(t, 2, e.m.CompletePollsOfWorker(testNS, "dying"))
		for _, res := range []<-chan pollResult{dying1, dying2} {
			got := receive(t, res)
			require.NoError(t, got.err)
			require.False(t, got.ok)
		}
		requireNotReceived(t, alive)

		require.NoError(t, e.m.AddActivityTask(taskN(1)))
		require.Equal(t, taskN(1), receive(t, alive).ref)

		// A poll of the dying worker already in flight gets nothing, even with a backlog.
		require.NoError(t, e.m.AddActivityTask(taskN(2)))
		_, ok, err := e.m.PollActivityTask(context.Background(), activityPoll("dying"))
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, 1, e.backlogLen(testNS, testTQ))

		// The same key in another namespace is another worker.
		require.Zero(t, e.m.CompletePollsOfWorker("ns-2", "alive"))
	})

	t.Run("TombstoneExpires", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{ShutdownTombstoneTTL: 10 * time.Second})
		require.Zero(t, e.m.CompletePollsOfWorker(testNS, "w1"))
		require.NoError(t, e.m.AddActivityTask(taskN(1)))
		_, ok := e.pollNow(activityPoll("w1"))
		require.False(t, ok)

		e.ts.Advance(10 * time.Second)
		e.m.sweep()
		require.Empty(t, e.m.tombstones)
		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.Equal(t, taskN(1), ref)
	})

	t.Run("PollsWithoutKeyAreUntouched", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		res := e.waitingPoll(context.Background(), activityPoll(""))
		require.Zero(t, e.m.CompletePollsOfWorker(testNS, ""))
		requireNotReceived(t, res)
	})
}

func TestLifecycle(t *testing.T) {
	t.Parallel()

	t.Run("StopCompletesAllPolls", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		e.m.Start()
		var results []<-chan pollResult
		for _, w := range []string{"w1", "w2", ""} {
			results = append(results, e.waitingPoll(context.Background(), activityPoll(w)))
		}
		cmdRes := make(chan error, 1)
		go func() {
			_, ok, err := e.m.PollWorkerCommand(context.Background(), testNS, "cq")
			if ok {
				err = errors.New("got a command")
			}
			cmdRes <- err
		}()
		e.awaitWaiting()

		e.m.Stop()
		for _, res := range results {
			got := receive(t, res)
			require.NoError(t, got.err)
			require.False(t, got.ok)
		}
		require.NoError(t, receive(t, cmdRes))

		_, _, err := e.m.PollActivityTask(context.Background(), activityPoll("w1"))
		require.ErrorIs(t, err, ErrStopped)
		require.ErrorIs(t, e.m.AddActivityTask(taskN(1)), ErrStopped)
		require.ErrorIs(t, e.m.AddWorkerCommand(testNS, "cq", WorkerCommand{ID: "c"}), ErrStopped)
		e.m.Stop() // idempotent
	})

	t.Run("StopWithoutStart", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{})
		res := e.waitingPoll(context.Background(), activityPoll("w1"))
		e.m.Stop()
		require.False(t, receive(t, res).ok)
		e.m.Start() // after Stop: no sweeper
		require.Zero(t, e.ts.PendingTimers())
	})

	t.Run("StartStopStress", func(t *testing.T) {
		t.Parallel()
		for range 50 {
			m := New(nil, Options{SweepInterval: time.Microsecond}, nil, nil)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); m.Start() }()
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, _, _ = m.PollActivityTask(ctx, activityPoll("w1"))
			}()
			m.Stop()
			wg.Wait()
		}
	})

	t.Run("IdleQueuesAreCollected", func(t *testing.T) {
		t.Parallel()
		// Shorter than MaxPollWait, so the waiting poll below outlives it.
		e := newTestEnv(t, Options{QueueIdleTimeout: 30 * time.Second})
		e.m.Start()

		// Many queues, each used once and left empty.
		for i := range 100 {
			ref := taskN(i)
			ref.TaskQueue = ref.ActivityID
			require.NoError(t, e.m.AddActivityTask(ref))
			_, ok := e.pollNow(ActivityPoll{NamespaceID: testNS, TaskQueue: ref.TaskQueue})
			require.True(t, ok)
			require.NoError(t, e.m.AddWorkerCommand(testNS, "cq-"+ref.ActivityID, WorkerCommand{ID: "c"}))
			require.True(t, e.m.AckWorkerCommand(testNS, "cq-"+ref.ActivityID, "c"))
		}
		// Kept: a queue with a backlog and one with a waiting poll.
		require.NoError(t, e.m.AddActivityTask(task("kept", 1, 0)))
		polled := activityPoll("w1")
		polled.TaskQueue = "polled"
		waiting := e.waitingPoll(context.Background(), polled)

		// The sweep runs every SweepInterval (1 s).
		e.ts.Advance(30*time.Second - time.Second)
		e.awaitSwept()
		queues, commandQueues, idle := e.queueCounts()
		require.Len(t, queues, 102, "not idle long enough yet")
		require.Equal(t, 100, commandQueues)
		require.Equal(t, 200, idle)

		e.ts.Advance(time.Second)
		e.awaitSwept()
		queues, commandQueues, idle = e.queueCounts()
		require.ElementsMatch(t, []queueKey{{testNS, testTQ}, {testNS, "polled"}}, queues)
		require.Zero(t, commandQueues)
		require.Zero(t, idle)

		// A queue whose poll ended is collected a full timeout later; a collected queue
		// comes back on demand.
		e.ts.Advance(MaxPollWaitDefault)
		require.False(t, receive(t, waiting).ok)
		e.awaitSwept()
		e.ts.Advance(30 * time.Second)
		e.awaitSwept()
		queues, _, _ = e.queueCounts()
		require.Equal(t, []queueKey{{testNS, testTQ}}, queues)

		ref := task("again", 1, 0)
		ref.TaskQueue = "polled"
		require.NoError(t, e.m.AddActivityTask(ref))
		got, ok := e.pollNow(polled)
		require.True(t, ok)
		require.Equal(t, ref, got)
	})

	t.Run("BacklogCapRefusesLoudly", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Options{BacklogCap: 3})
		for i := range 3 {
			require.NoError(t, e.m.AddActivityTask(taskN(i)))
		}
		err := e.m.AddActivityTask(taskN(3))
		require.ErrorIs(t, err, ErrBacklogFull)
		require.ErrorIs(t, e.m.AddActivityTask(taskN(4)), ErrBacklogFull)
		require.EqualValues(t, 2, e.counter("matching_backlog_rejected"))
		require.Equal(t, 3, e.backlogLen(testNS, testTQ), "nothing queued was dropped to make room")

		logged := e.logs.FilterMessageSnippet("backlog is full").All()
		require.Len(t, logged, 1, "one line per interval, not one per refusal")
		require.Equal(t, zapcore.WarnLevel, logged[0].Level)
		require.Equal(t, testTQ, logged[0].ContextMap()["task-queue"])

		// Allowed at the cap: superseding a queued task, and putting a dispatched one back.
		newer := taskN(0)
		newer.Stamp = 2
		require.NoError(t, e.m.AddActivityTask(newer))
		ref, ok := e.pollNow(activityPoll("w1"))
		require.True(t, ok)
		require.NoError(t, e.m.AddActivityTask(taskN(5)))
		require.NoError(t, e.m.ReturnActivityTask(ref))
		require.Equal(t, 4, e.backlogLen(testNS, testTQ))

		// Other queues are unaffected.
		other := taskN(6)
		other.TaskQueue = "other"
		require.NoError(t, e.m.AddActivityTask(other))

		e.ts.Advance(refusalLogInterval)
		require.ErrorIs(t, e.m.AddActivityTask(taskN(7)), ErrBacklogFull)
		logged = e.logs.FilterMessageSnippet("backlog is full").All()
		require.Len(t, logged, 2)
		require.EqualValues(t, 2, logged[1].ContextMap()["refused-since-last-log"])
	})
}
