package tasks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTasksDueAtOnceAllFire is a regression test: the queue used to arm its timer with a
// duration computed from an earlier Now(), so a clock that moved in between (a fake clock
// advanced right after a read) pushed the timer past the deadline and nothing fired.
func TestTasksDueAtOnceAllFire(t *testing.T) {
	t.Parallel()
	q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
	b.store.AddTimerTasks(timerTask(1, b.start.Add(time.Second)), timerTask(2, b.start.Add(2*time.Second)))
	q.Start()
	waitEvent(t, b.reads, "first read")
	b.ts.Advance(2 * time.Second)
	fired := map[int64]bool{}
	fired[waitEvent(t, b.fired, "a task").task.TaskID] = true
	fired[waitEvent(t, b.fired, "another task").task.TaskID] = true
	require.Equal(t, map[int64]bool{1: true, 2: true}, fired)
}
