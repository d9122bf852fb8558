package tasks

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks/taskstest"
)

// waitTimeout bounds every wait for an event. It only turns a hang into a failure: a correct
// queue produces the event long before, whatever the machine's speed.
const waitTimeout = 10 * time.Second

func waitEvent[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func requireNoEvent[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %v", what, v)
	default:
	}
}

// counter lets a test wait until a count reaches a target without sleeping.
type counter struct {
	n       atomic.Int64
	changed chan struct{}
}

func newCounter() *counter { return &counter{changed: make(chan struct{}, 1)} }

func (c *counter) inc() {
	c.n.Add(1)
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *counter) waitFor(t *testing.T, target int64, what string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for c.n.Load() < target {
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s: %d of %d", what, c.n.Load(), target)
		}
	}
}

type firedEvent struct {
	task    *persistence.TimerTask
	attempt int
	now     time.Time
}

type failedEvent struct {
	task    *persistence.TimerTask
	attempt int
}

// timerExecutorFunc adapts a function to TimerExecutor.
type timerExecutorFunc func(ctx context.Context, task *persistence.TimerTask) error

func (f timerExecutorFunc) ExecuteTimer(ctx context.Context, task *persistence.TimerTask) error {
	return f(ctx, task)
}

type outboundExecutorFunc func(ctx context.Context, task *persistence.OutboundTask) error

func (f outboundExecutorFunc) ExecuteOutbound(ctx context.Context, task *persistence.OutboundTask) error {
	return f(ctx, task)
}

// timerBundle is the setup of one timer queue test.
type timerBundle struct {
	store     *taskstest.TaskStore
	ts        *clock.FakeTimeSource
	start     time.Time
	sched     *Scheduler
	scope     tally.TestScope
	logs      *observer.ObservedLogs
	reads     chan int // in-memory count after each read
	fired     chan firedEvent
	completed chan *persistence.TimerTask
	failed    chan failedEvent
	execErr   func(task *persistence.TimerTask, attempt int) error
	mu        sync.Mutex
	attempts  map[int64]int
}

// newTimerBundle builds a queue over a fresh fake store and clock; setup may adjust the options
// and the executor before the queue is created. The queue is not started.
func newTimerBundle(t testing.TB, workers int, opts TimerQueueOptions) (*TimerQueue, *timerBundle) {
	t.Helper()
	b := &timerBundle{
		store:     taskstest.NewTaskStore(),
		ts:        clock.NewFakeTimeSource(),
		scope:     tally.NewTestScope("", nil),
		reads:     make(chan int, 100_000),
		fired:     make(chan firedEvent, 100_000),
		completed: make(chan *persistence.TimerTask, 100_000),
		failed:    make(chan failedEvent, 100_000),
		attempts:  make(map[int64]int),
	}
	b.start = b.ts.Now()
	core, logs := observer.New(zapcore.DebugLevel)
	b.logs = logs
	b.sched = NewScheduler(SchedulerOptions{WorkerCount: workers})
	b.sched.Start()
	t.Cleanup(b.sched.Stop)

	if opts.TestHooks == nil {
		opts.TestHooks = &TimerQueueTestHooks{
			OnRead: func(_, inMemory int) { b.reads <- inMemory },
			OnFired: func(task *persistence.TimerTask, attempt int, now time.Time) {
				b.fired <- firedEvent{task, attempt, now}
			},
			OnCompleted: func(task *persistence.TimerTask) { b.completed <- task },
			OnFailed:    func(task *persistence.TimerTask, attempt int, _ error) { b.failed <- failedEvent{task, attempt} },
		}
	}
	exec := timerExecutorFunc(func(_ context.Context, task *persistence.TimerTask) error {
		b.mu.Lock()
		b.attempts[task.TaskID]++
		attempt := b.attempts[task.TaskID]
		b.mu.Unlock()
		if b.execErr != nil {
			return b.execErr(task, attempt)
		}
		return nil
	})
	q := NewTimerQueue(1, b.store, exec, b.sched, b.ts, opts, zap.New(core), b.scope)
	t.Cleanup(q.Stop) // runs before the scheduler's Stop (cleanups run last-in first-out)
	return q, b
}

func (b *timerBundle) attemptsOf(taskID int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts[taskID]
}

func timerTask(id int64, at time.Time) *persistence.TimerTask {
	return &persistence.TimerTask{
		ShardID:        1,
		TaskID:         id,
		VisibilityTime: at,
		Execution:      persistence.ExecutionKey{NamespaceID: "ns", BusinessID: "worker-1", RunID: "run"},
		TaskTypeID:     1,
	}
}

func fixed[T any](v T) func() T { return func() T { return v } }

func (q *TimerQueue) inMemoryCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.known)
}

func (q *TimerQueue) pendingFireAt(taskID int64) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.pending {
		if e.task.TaskID == taskID {
			return e.fireAt
		}
	}
	return time.Time{}
}

func counterValue(scope tally.TestScope, name string) int64 {
	var total int64
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == name {
			total += c.Value()
		}
	}
	return total
}

func gaugeValue(scope tally.TestScope, name string) float64 {
	for _, g := range scope.Snapshot().Gauges() {
		if g.Name() == name {
			return g.Value()
		}
	}
	return -1
}
