package tasks

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
)

func TestParkedTimerTaskStaysInStoreAndIsNotRetried(t *testing.T) {
	t.Parallel()
	q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
	b.execErr = func(task *persistence.TimerTask, _ int) error {
		if task.TaskID == 1 {
			return Park(errors.New("unknown task type 12345"))
		}
		return nil
	}
	b.store.AddTimerTasks(timerTask(1, b.start.Add(time.Second)), timerTask(2, b.start.Add(2*time.Second)))
	q.Start()
	waitEvent(t, b.reads, "first read")

	b.ts.Advance(time.Second)
	require.Equal(t, int64(1), waitEvent(t, b.fired, "parked task").task.TaskID)
	waitEvent(t, b.completed, "parked task leaves memory")
	b.ts.Advance(time.Second)
	require.Equal(t, int64(2), waitEvent(t, b.fired, "next task").task.TaskID)
	waitEvent(t, b.completed, "next task completes")

	b.ts.Advance(time.Hour)
	requireNoEvent(t, b.fired, "a retry of the parked task")
	require.Equal(t, 1, b.store.TimerTaskCount(), "the parked task is kept in the store")
	require.Equal(t, int64(1), counterValue(b.scope, MetricTasksParked))
	require.Len(t, b.logs.FilterMessage("task parked: left in the store, not retried until restart").All(), 1)
}
