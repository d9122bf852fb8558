package tasks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

func TestTimerQueueDefer(t *testing.T) {
	t.Parallel()

	t.Run("DeferredTaskFiresAgainAtItsTimeOldestFirstWithoutCountingAFailure", func(t *testing.T) {
		t.Parallel()
		q, b := newTimerBundle(t, 1, TimerQueueOptions{LookAhead: fixed(time.Minute)})
		older := timerTask(1, b.start.Add(time.Second))
		newer := timerTask(2, b.start.Add(2*time.Second))
		b.store.AddTimerTasks(older, newer)
		until := b.start.Add(5 * time.Second)
		b.execErr = func(_ *persistence.TimerTask, attempt int) error {
			if attempt == 1 {
				return Defer(until)
			}
			return nil
		}
		q.Start()
		waitEvent(t, b.reads, "first read")

		b.ts.Advance(time.Second)
		require.Equal(t, int64(1), waitEvent(t, b.fired, "first offer").task.TaskID)
		b.ts.Advance(time.Second)
		require.Equal(t, int64(2), waitEvent(t, b.fired, "second offer").task.TaskID)
		requireNoEvent(t, b.failed, "a deferral reported as a failure")
		require.Eventually(t, func() bool { return counterValue(b.scope, MetricTimerTasksDeferred) == 2 }, 10*time.Second, time.Millisecond)

		b.ts.Advance(2*time.Second + 999*time.Millisecond)
		requireNoEvent(t, b.fired, "a deferred task firing early")
		b.ts.Advance(time.Millisecond)
		// Both deferred to the same instant: the older runs first.
		require.Equal(t, int64(1), waitEvent(t, b.fired, "older again").task.TaskID)
		require.Equal(t, int64(2), waitEvent(t, b.fired, "newer again").task.TaskID)
		waitEvent(t, b.completed, "completion")
		waitEvent(t, b.completed, "completion")
		require.Zero(t, counterValue(b.scope, MetricTimerTaskFailures))
	})
}
