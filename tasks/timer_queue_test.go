package tasks

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

func TestTimerQueue(t *testing.T) {
	t.Parallel()

	t.Run("TimerFiresAtItsTime", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
		due := b.start.Add(10 * time.Second)
		b.store.AddTimerTasks(timerTask(1, due))
		q.Start()
		require.Equal(t, 1, waitEvent(t, b.reads, "first read"))

		b.ts.Advance(10*time.Second - time.Millisecond)
		requireNoEvent(t, b.fired, "fire before the visibility time")

		b.ts.Advance(time.Millisecond)
		ev := waitEvent(t, b.fired, "fire")
		require.Equal(t, int64(1), ev.task.TaskID)
		require.True(t, ev.now.Equal(due), "fired at %v, due %v", ev.now, due)
		waitEvent(t, b.completed, "completion")
		require.Zero(t, b.store.TimerTaskCount())
		require.Equal(t, int64(1), counterValue(b.scope, MetricTimerTasksFired))
	})

	t.Run("EarlierNotificationRearms", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
		late := timerTask(1, b.start.Add(10*time.Second))
		b.store.AddTimerTasks(late)
		q.Start()
		waitEvent(t, b.reads, "first read")

		early := timerTask(2, b.start.Add(2*time.Second))
		b.store.AddTimerTasks(early)
		q.NotifyNewTimers([]*persistence.TimerTask{early})

		b.ts.Advance(2 * time.Second)
		ev := waitEvent(t, b.fired, "early fire")
		require.Equal(t, int64(2), ev.task.TaskID)
		require.True(t, ev.now.Equal(early.VisibilityTime))
		requireNoEvent(t, b.fired, "late task firing early")

		b.ts.Advance(8 * time.Second)
		ev = waitEvent(t, b.fired, "late fire")
		require.Equal(t, int64(1), ev.task.TaskID)
		require.True(t, ev.now.Equal(late.VisibilityTime))
	})

	t.Run("LookAheadKeepsMemoryBounded", func(t *testing.T) {
		t.Parallel()
		const total, maxInMemory = 50_000, 1_000
		var (
			maxSeen   atomic.Int64
			firedMu   sync.Mutex
			firedKeys []persistence.TimerTaskKey
			completed = newCounter()
		)
		opts := TimerQueueOptions{
			LookAhead:   fixed(10 * time.Second),
			PageSize:    fixed(200),
			MaxInMemory: fixed(maxInMemory),
			TestHooks: &TimerQueueTestHooks{
				OnRead: func(_, inMemory int) {
					for {
						cur := maxSeen.Load()
						if int64(inMemory) <= cur || maxSeen.CompareAndSwap(cur, int64(inMemory)) {
							return
						}
					}
				},
				OnFired: func(task *persistence.TimerTask, _ int, _ time.Time) {
					firedMu.Lock()
					firedKeys = append(firedKeys, task.Key())
					firedMu.Unlock()
				},
				OnCompleted: func(*persistence.TimerTask) { completed.inc() },
			},
		}
		// One worker, so the order in which tasks are fired is the order they were submitted.
		q, b := newTimerBundle(t, 1, opts)
		stored := make([]*persistence.TimerTask, 0, total)
		for i := range total {
			// Pairs of tasks share a visibility time, so the TaskID tie-break is exercised;
			// IDs are inserted in reverse within a pair to make the order the store's job.
			at := b.start.Add(time.Duration(1+i/2) * time.Millisecond)
			stored = append(stored, timerTask(int64(total-i), at))
		}
		b.store.AddTimerTasks(stored...)
		q.Start()

		// Move the clock a second at a time and wait until everything due has completed.
		for now := b.start; b.store.TimerTaskCount() > 0; {
			now = now.Add(time.Second)
			b.ts.Update(now)
			due := 0
			for _, task := range stored {
				if !task.VisibilityTime.After(now) {
					due++
				}
			}
			completed.waitFor(t, int64(due), "due tasks to complete")
			require.LessOrEqual(t, maxSeen.Load(), int64(maxInMemory))
		}

		require.LessOrEqual(t, maxSeen.Load(), int64(maxInMemory))
		firedMu.Lock()
		defer firedMu.Unlock()
		require.Len(t, firedKeys, total)
		require.True(t, slices.IsSortedFunc(firedKeys, persistence.TimerTaskKey.Compare),
			"tasks fired out of (VisibilityTime, TaskID) order")
	})

	t.Run("NotifiedTaskBeyondLoadedRangeIsReadLater", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(10 * time.Second)})
		q.Start()
		require.Zero(t, waitEvent(t, b.reads, "first read"))

		far := timerTask(1, b.start.Add(30*time.Second))
		b.store.AddTimerTasks(far)
		q.NotifyNewTimers([]*persistence.TimerTask{far})
		require.Zero(t, q.inMemoryCount(), "a task beyond the loaded range must be left to a read")

		// Reads every LookAhead/2 bring it in once it is within the window.
		for q.inMemoryCount() == 0 {
			b.ts.Advance(5 * time.Second)
			waitEvent(t, b.reads, "periodic read")
			require.True(t, b.ts.Now().Before(far.VisibilityTime), "task was not read before it came due")
		}
		requireNoEvent(t, b.fired, "fire before the visibility time")
		b.ts.Update(far.VisibilityTime)
		ev := waitEvent(t, b.fired, "fire")
		require.True(t, ev.now.Equal(far.VisibilityTime))
		waitEvent(t, b.completed, "completion")
		require.Equal(t, 1, b.attemptsOf(1))
	})

	t.Run("NotificationDuringReadIsNotLost", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(10 * time.Second)})
		release := make(chan struct{})
		var reads atomic.Int32
		b.store.BeforeGetTimerTasks = func(persistence.GetTimerTasksRequest) error {
			if reads.Add(1) == 2 {
				<-release // hold the second read while a write commits behind it
			}
			return nil
		}
		q.Start()
		waitEvent(t, b.reads, "first read")

		b.ts.Advance(5 * time.Second) // periodic read starts and blocks in the store
		for reads.Load() < 2 {
			time.Sleep(time.Millisecond) // a test-side yield, not a timing assertion
		}
		// Beyond the first read's window, inside the blocked one's, and not yet visible to it.
		task := timerTask(1, b.start.Add(12*time.Second))
		q.NotifyNewTimers([]*persistence.TimerTask{task})
		close(release)
		waitEvent(t, b.reads, "blocked read")
		b.store.AddTimerTasks(task)

		b.ts.Update(task.VisibilityTime)
		ev := waitEvent(t, b.fired, "fire")
		require.True(t, ev.now.Equal(task.VisibilityTime))
	})

	t.Run("LateNotificationDoesNotRerunCompletedTask", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
		task := timerTask(1, b.start.Add(time.Second))
		b.store.AddTimerTasks(task)
		q.Start()
		waitEvent(t, b.reads, "first read")
		b.ts.Advance(time.Second)
		waitEvent(t, b.fired, "fire")
		waitEvent(t, b.completed, "completion")

		q.NotifyNewTimers([]*persistence.TimerTask{task})
		require.Zero(t, q.inMemoryCount())
		b.ts.Advance(time.Minute)
		waitEvent(t, b.reads, "periodic read")
		requireNoEvent(t, b.fired, "second fire")
		require.Equal(t, 1, b.attemptsOf(1))
	})

	t.Run("FailedTaskIsRetriedWithBackoff", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{
			LookAhead:            fixed(time.Minute),
			RetryInitialInterval: fixed(time.Second),
			RetryMaxInterval:     fixed(4 * time.Second),
			AlertAttempts:        fixed(3),
		})
		const failures = 5
		b.execErr = func(_ *persistence.TimerTask, attempt int) error {
			if attempt <= failures {
				return errors.New("shard busy")
			}
			return nil
		}
		task := timerTask(1, b.start.Add(time.Second))
		b.store.AddTimerTasks(task)
		q.Start()
		waitEvent(t, b.reads, "first read")
		b.ts.Advance(time.Second)

		for attempt := 1; attempt <= failures; attempt++ {
			require.Equal(t, attempt, waitEvent(t, b.fired, "attempt").attempt)
			require.Equal(t, attempt, waitEvent(t, b.failed, "failure").attempt)
			// Exponential, capped, jittered down by at most half.
			ceiling := min(time.Second<<(attempt-1), 4*time.Second)
			wait := q.pendingFireAt(1).Sub(b.ts.Now())
			require.GreaterOrEqual(t, wait, ceiling/2, "attempt %d", attempt)
			require.LessOrEqual(t, wait, ceiling, "attempt %d", attempt)

			b.ts.Advance(wait - time.Millisecond)
			requireNoEvent(t, b.fired, "retry before its backoff")
			b.ts.Advance(time.Millisecond)
		}
		require.Equal(t, failures+1, waitEvent(t, b.fired, "final attempt").attempt)
		waitEvent(t, b.completed, "completion")
		require.Zero(t, b.store.TimerTaskCount())
		require.Equal(t, int64(failures), counterValue(b.scope, MetricTimerTaskFailures))
		require.Zero(t, gaugeValue(b.scope, MetricTimerTasksStuck))

		alerts := b.logs.FilterMessage("timer task keeps failing; still retrying").All()
		require.Len(t, alerts, 1, "the alert is logged once per task")
		fields := alerts[0].ContextMap()
		require.Equal(t, int64(1), fields["task-id"])
		require.Equal(t, "worker-1", fields["business-id"])
		require.Equal(t, int64(3), fields["attempts"])
	})

	t.Run("OverdueTasksAreSpreadAfterRestart", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{
			LookAhead:        fixed(time.Minute),
			OverdueFireRate:  fixed(2),
			OverdueFireBurst: fixed(1),
		})
		const overdue = 6
		for i := range overdue {
			// Due while the host was down.
			b.store.AddTimerTasks(timerTask(int64(i+1), b.start.Add(-time.Minute+time.Duration(i)*time.Second)))
		}
		onTime := timerTask(100, b.start.Add(1250*time.Millisecond))
		b.store.AddTimerTasks(onTime)
		q.Start()
		waitEvent(t, b.reads, "first read")

		// Burst 1, then one every 500ms, in key order; the task due after the start is not
		// queued behind the backlog.
		var got []firedEvent
		for step := 0; step < overdue; step++ {
			want := step + 1
			if step >= 3 {
				want++ // onTime came due at +1.25s
			}
			for len(got) < want {
				got = append(got, waitEvent(t, b.fired, "fire"))
			}
			requireNoEvent(t, b.fired, "fire ahead of the limiter")
			b.ts.Advance(500 * time.Millisecond)
		}
		var overdueTimes []time.Duration
		var overdueIDs []int64
		for _, ev := range got {
			if ev.task.TaskID == onTime.TaskID {
				require.True(t, ev.now.Equal(b.start.Add(1500*time.Millisecond)),
					"on-time task fired at %v", ev.now.Sub(b.start))
				continue
			}
			overdueTimes = append(overdueTimes, ev.now.Sub(b.start))
			overdueIDs = append(overdueIDs, ev.task.TaskID)
		}
		require.Equal(t, []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond,
			2 * time.Second, 2500 * time.Millisecond}, overdueTimes)
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, overdueIDs)
	})

	t.Run("GraceTypeDoesNotFireBeforeGrace", func(t *testing.T) {
		t.Parallel()
		const leaseExpiry, other = 7, 1
		q, b := newTimerBundle(t, 2, TimerQueueOptions{
			LookAhead: fixed(time.Minute),
			GracePeriod: func(task *persistence.TimerTask) time.Duration {
				if task.TaskTypeID == leaseExpiry {
					return 30 * time.Second
				}
				return 0
			},
		})
		typed := func(id int64, typeID uint32, at time.Time) *persistence.TimerTask {
			task := timerTask(id, at)
			task.TaskTypeID = typeID
			return task
		}
		expiredDuringOutage := typed(1, leaseExpiry, b.start.Add(-time.Minute))
		expiresInGrace := typed(2, leaseExpiry, b.start.Add(10*time.Second))
		otherType := typed(3, other, b.start.Add(10*time.Second))
		expiresAfterGrace := typed(4, leaseExpiry, b.start.Add(40*time.Second))
		b.store.AddTimerTasks(expiredDuringOutage, expiresInGrace, otherType, expiresAfterGrace)
		q.Start()
		waitEvent(t, b.reads, "first read")

		b.ts.Advance(10 * time.Second)
		ev := waitEvent(t, b.fired, "fire of the type without grace")
		require.Equal(t, otherType.TaskID, ev.task.TaskID)

		b.ts.Advance(20*time.Second - time.Millisecond)
		requireNoEvent(t, b.fired, "fire inside the grace period")

		b.ts.Advance(time.Millisecond)
		graceEnd := b.start.Add(30 * time.Second)
		var ids []int64
		for range 2 {
			ev := waitEvent(t, b.fired, "fire at the end of the grace")
			require.True(t, ev.now.Equal(graceEnd), "fired at %v", ev.now.Sub(b.start))
			ids = append(ids, ev.task.TaskID)
		}
		require.ElementsMatch(t, []int64{1, 2}, ids)

		b.ts.Update(expiresAfterGrace.VisibilityTime)
		ev = waitEvent(t, b.fired, "fire after the grace")
		require.Equal(t, expiresAfterGrace.TaskID, ev.task.TaskID)
		require.True(t, ev.now.Equal(expiresAfterGrace.VisibilityTime))
	})

	t.Run("MemoryCapHoldsUnderNotifications", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{
			LookAhead:   fixed(time.Minute),
			PageSize:    fixed(10),
			MaxInMemory: fixed(10),
		})
		for i := range 10 {
			b.store.AddTimerTasks(timerTask(int64(100+i), b.start.Add(time.Duration(20+i)*time.Second)))
		}
		q.Start()
		require.Equal(t, 10, waitEvent(t, b.reads, "first read"))

		// Memory is full; an earlier task inside the loaded range displaces the latest one.
		early := timerTask(1, b.start.Add(10*time.Second))
		b.store.AddTimerTasks(early)
		q.NotifyNewTimers([]*persistence.TimerTask{early})
		require.Equal(t, 10, q.inMemoryCount())

		b.ts.Update(b.start.Add(time.Minute))
		var ids []int64
		for range 11 {
			ids = append(ids, waitEvent(t, b.completed, "completion").TaskID)
		}
		require.ElementsMatch(t, []int64{1, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, ids)
		requireNoEvent(t, b.completed, "a task completed twice")
	})

	t.Run("ExecutorGetsCancelledOnStop", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
		blocked := make(chan struct{})
		q.exec = timerExecutorFunc(func(ctx context.Context, _ *persistence.TimerTask) error {
			close(blocked)
			<-ctx.Done()
			return ctx.Err()
		})
		b.store.AddTimerTasks(timerTask(1, b.start))
		q.Start()
		<-blocked
		q.Stop()
		require.Equal(t, 1, b.store.TimerTaskCount(), "an unfinished task stays in the store")
	})
}
