package tasks

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
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

// A singleton timer replaced in the store (a lease renewed by a heartbeat) leaves memory too:
// only the newest one runs.
func TestSupersededSingletonTimerDoesNotRun(t *testing.T) {
	t.Parallel()
	q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
	q.Start()
	waitEvent(t, b.reads, "first read")
	// The store replaced 1 by 2 by 3; notifications arrive in order, as history sends them.
	first, second, third := singletonTimer(1, b.start.Add(time.Second)), singletonTimer(2, b.start.Add(2*time.Second)), singletonTimer(3, b.start.Add(3*time.Second))
	b.store.AddTimerTasks(third)
	q.NotifyNewTimers([]*persistence.TimerTask{first})
	q.NotifyNewTimers([]*persistence.TimerTask{second})
	q.NotifyNewTimers([]*persistence.TimerTask{third})

	b.ts.Advance(3 * time.Second)
	require.Equal(t, int64(3), waitEvent(t, b.fired, "the newest timer").task.TaskID)
	waitEvent(t, b.completed, "completion")
	requireNoEvent(t, b.fired, "a superseded timer")
	require.Equal(t, int64(2), counterValue(b.scope, MetricTimerTasksSuperseded))
}

// Executed tasks are deleted in batches (one store call, one fsync for many), and a task leaves
// memory only once its delete is done.
func TestExecutedTasksAreDeletedInBatches(t *testing.T) {
	t.Parallel()
	q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
	const n = 300
	release := make(chan struct{})
	var once sync.Once
	b.store.BeforeComplete = func() { once.Do(func() { <-release }) } // hold the first delete back
	for i := range n {
		b.store.AddTimerTasks(timerTask(int64(i+1), b.start.Add(time.Second)))
	}
	q.Start()
	waitEvent(t, b.reads, "first read")
	b.ts.Advance(time.Second)
	for range n {
		waitEvent(t, b.fired, "a task")
	}
	requireNoEvent(t, b.completed, "a task leaving memory before its delete")
	close(release)
	for range n {
		waitEvent(t, b.completed, "a completion")
	}
	require.Zero(t, b.store.TimerTaskCount())
	require.LessOrEqual(t, b.store.CompleteCalls(), 3, "%d tasks deleted in a handful of calls", n)
}

// A held singleton timer fires at the hold's end, not at its own time; a hold that ends before
// its own time, or a release, leaves it at its own time, and the stored task never changes.
func TestHeldSingletonTimerFiresWhenTheHoldEnds(t *testing.T) {
	t.Parallel()
	q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
	task := singletonTimer(1, b.start.Add(time.Second))
	b.store.AddTimerTasks(task)
	q.Start()
	waitEvent(t, b.reads, "first read")
	exec, own := task.Execution, task.VisibilityTime

	q.Hold(exec, task.TaskTypeID, b.start.Add(5*time.Second))
	require.WithinDuration(t, b.start.Add(5*time.Second), q.pendingFireAt(1), 0)
	q.Hold(exec, task.TaskTypeID, b.start.Add(3*time.Second)) // a later hold replaces it
	require.WithinDuration(t, b.start.Add(3*time.Second), q.pendingFireAt(1), 0)
	q.Hold(exec, task.TaskTypeID, b.start.Add(time.Millisecond)) // before its own time
	require.WithinDuration(t, own, q.pendingFireAt(1), 0)
	q.Hold(exec, task.TaskTypeID, b.start.Add(4*time.Second))
	q.Hold(exec, task.TaskTypeID, time.Time{}) // released
	require.WithinDuration(t, own, q.pendingFireAt(1), 0)
	other := exec
	other.BusinessID = "worker-2"
	q.Hold(other, task.TaskTypeID, b.start.Add(time.Hour))  // another execution's: none held
	q.Hold(exec, task.TaskTypeID+1, b.start.Add(time.Hour)) // another type's
	require.WithinDuration(t, own, q.pendingFireAt(1), 0)

	q.Hold(exec, task.TaskTypeID, b.start.Add(4*time.Second))
	b.ts.Advance(2 * time.Second)
	requireNoEvent(t, b.fired, "a held timer before the hold ends")
	b.ts.Advance(2 * time.Second)
	fired := waitEvent(t, b.fired, "the held timer")
	require.Equal(t, int64(1), fired.task.TaskID)
	require.Equal(t, own, fired.task.VisibilityTime, "the stored task keeps its time")
	waitEvent(t, b.completed, "completion")
}

// A singleton timer replaced in the store by one beyond the range in memory leaves memory at
// once, rather than fire only to be found stale: the newer one runs, once a read brings it in.
func TestSingletonTimerReplacedBeyondTheLoadedRangeLeavesMemory(t *testing.T) {
	t.Parallel()
	q, b := newTimerBundle(t, 2, TimerQueueOptions{LookAhead: fixed(time.Minute)})
	first := singletonTimer(1, b.start.Add(30*time.Second))
	b.store.AddTimerTasks(first)
	q.Start()
	waitEvent(t, b.reads, "first read")
	require.Equal(t, 1, q.inMemoryCount())

	// The store replaces it by one two minutes out, beyond what the queue has loaded.
	require.NoError(t, b.store.CompleteTimerTasks(context.Background(), 1, []persistence.TimerTaskKey{first.Key()}))
	second := singletonTimer(2, b.start.Add(2*time.Minute))
	b.store.AddTimerTasks(second)
	q.NotifyNewTimers([]*persistence.TimerTask{second})
	require.Zero(t, q.inMemoryCount(), "the replaced timer left memory")
	require.Equal(t, int64(1), counterValue(b.scope, MetricTimerTasksSuperseded))

	for range 3 { // past the replaced timer's time; the reads bring the newer one in
		b.ts.Advance(30 * time.Second)
		waitEvent(t, b.reads, "a read")
	}
	b.ts.Advance(30 * time.Second)
	require.Equal(t, int64(2), waitEvent(t, b.fired, "a timer").task.TaskID, "only the newer timer runs")
}

// singletonTimer is timerTask as a singleton timer (a worker's lease expiry).
func singletonTimer(id int64, at time.Time) *persistence.TimerTask {
	task := timerTask(id, at)
	task.Singleton = true
	return task
}
