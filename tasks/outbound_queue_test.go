package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks/taskstest"
)

type outboundBundle struct {
	store     *taskstest.TaskStore
	ts        *clock.FakeTimeSource
	sched     *Scheduler
	scope     tally.TestScope
	logs      *observer.ObservedLogs
	failed    chan *persistence.OutboundTask
	completed *counter

	mu        sync.Mutex
	attempts  map[int64]int
	completes []int64
	// execErr decides each attempt's outcome; nil means success.
	execErr func(task *persistence.OutboundTask, attempt int) error
}

func newOutboundBundle(t *testing.T, store *taskstest.TaskStore, workers int, opts OutboundQueueOptions) (*OutboundQueue, *outboundBundle) {
	t.Helper()
	b := &outboundBundle{
		store:     store,
		ts:        clock.NewFakeTimeSource(),
		scope:     tally.NewTestScope("", nil),
		failed:    make(chan *persistence.OutboundTask, 10_000),
		completed: newCounter(),
		attempts:  make(map[int64]int),
	}
	core, logs := observer.New(zapcore.DebugLevel)
	b.logs = logs
	b.sched = NewScheduler(SchedulerOptions{WorkerCount: workers})
	b.sched.Start()
	t.Cleanup(b.sched.Stop)
	opts.TestHooks = &OutboundQueueTestHooks{
		OnCompleted: func(task *persistence.OutboundTask) {
			b.mu.Lock()
			b.completes = append(b.completes, task.TaskID)
			b.mu.Unlock()
			b.completed.inc()
		},
		OnFailed: func(task *persistence.OutboundTask, _ int, _ error) { b.failed <- task },
	}
	exec := outboundExecutorFunc(func(_ context.Context, task *persistence.OutboundTask) error {
		b.mu.Lock()
		b.attempts[task.TaskID]++
		attempt := b.attempts[task.TaskID]
		execErr := b.execErr
		b.mu.Unlock()
		if execErr != nil {
			return execErr(task, attempt)
		}
		return nil
	})
	q := NewOutboundQueue(1, store, exec, b.sched, b.ts, opts, zap.New(core), b.scope)
	t.Cleanup(q.Stop)
	return q, b
}

func (b *outboundBundle) setExecErr(f func(task *persistence.OutboundTask, attempt int) error) {
	b.mu.Lock()
	b.execErr = f
	b.mu.Unlock()
}

func (b *outboundBundle) attemptsOf(taskID int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts[taskID]
}

func (b *outboundBundle) attemptedIDs(dest func(int64) bool) map[int64]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[int64]int)
	for id, n := range b.attempts {
		if dest(id) {
			out[id] = n
		}
	}
	return out
}

func outboundTask(id int64, dest string) *persistence.OutboundTask {
	return &persistence.OutboundTask{
		ShardID:     1,
		TaskID:      id,
		Destination: dest,
		Execution:   persistence.ExecutionKey{NamespaceID: "ns", BusinessID: fmt.Sprintf("worker-%d", id), RunID: "run"},
		TaskTypeID:  2,
	}
}

var errDestinationDown = errors.New("destination unavailable")

func TestOutboundQueue(t *testing.T) {
	t.Parallel()

	t.Run("FailingDestinationDoesNotBlockOthers", func(t *testing.T) {
		t.Parallel()
		store := taskstest.NewTaskStore()
		q, b := newOutboundBundle(t, store, 2, OutboundQueueOptions{DestinationConcurrency: fixed(2)})
		isBad := func(id int64) bool { return id%2 == 1 }
		b.setExecErr(func(task *persistence.OutboundTask, _ int) error {
			if task.Destination == "shard-bad" {
				return errDestinationDown
			}
			return nil
		})
		for id := int64(1); id <= 40; id++ {
			dest := "shard-good"
			if isBad(id) {
				dest = "shard-bad"
			}
			store.AddOutboundTasks(outboundTask(id, dest))
		}
		q.Start()

		b.completed.waitFor(t, 20, "every task of the healthy destination")
		waitEvent(t, b.failed, "first failure")
		waitEvent(t, b.failed, "second failure")
		// Backing-off tasks keep their slots: only DestinationConcurrency tasks of the failing
		// destination have been tried, and all of its tasks are still stored.
		require.Len(t, b.attemptedIDs(isBad), 2)
		require.Equal(t, 20, store.OutboundTaskCount())
		require.Equal(t, int64(2), counterValue(b.scope, MetricOutboundTaskFailures))
	})

	t.Run("YieldHoldsDeliveriesUntilItReturns", func(t *testing.T) {
		t.Parallel()
		store := taskstest.NewTaskStore()
		yielding := make(chan struct{}, 100)
		release := make(chan struct{})
		q, b := newOutboundBundle(t, store, 2, OutboundQueueOptions{Yield: func(ctx context.Context) {
			yielding <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
		}})
		for id := int64(1); id <= 5; id++ {
			store.AddOutboundTasks(outboundTask(id, "shard-a"))
		}
		q.Start()
		waitEvent(t, yielding, "the queue yields before it delivers")
		require.Zero(t, b.attemptsOf(1), "nothing delivered while the host's calls go first")
		close(release)
		b.completed.waitFor(t, 5, "every task once the yield returns")
		require.Equal(t, 0, store.OutboundTaskCount())

		// Only background tasks wait: the others go at once, and after the wait a released
		// task is not held again.
		other := taskstest.NewTaskStore()
		for id := int64(1); id <= 4; id++ {
			other.AddOutboundTasks(outboundTask(id, "shard-a"))
		}
		hold := make(chan struct{})
		q3, b3 := newOutboundBundle(t, other, 2, OutboundQueueOptions{
			Yield: func(ctx context.Context) {
				select {
				case <-hold:
				case <-ctx.Done():
				}
			},
			Yields: func(task *persistence.OutboundTask) bool { return task.TaskID%2 == 0 },
		})
		q3.Start()
		b3.completed.waitFor(t, 2, "the tasks that do not yield, while the others wait")
		require.Zero(t, b3.attemptsOf(2))
		require.Zero(t, b3.attemptsOf(4))
		close(hold)
		b3.completed.waitFor(t, 4, "the background tasks once the yield returns")

		// A queue stopping while it yields is not held by it.
		stopping := taskstest.NewTaskStore()
		stopping.AddOutboundTasks(outboundTask(6, "shard-a"))
		q2, _ := newOutboundBundle(t, stopping, 2, OutboundQueueOptions{Yield: func(ctx context.Context) { <-ctx.Done() }})
		q2.Start()
		q2.Stop()
	})

	t.Run("OverflowingDestinationDoesNotStarveOthers", func(t *testing.T) {
		t.Parallel()
		store := taskstest.NewTaskStore()
		q, b := newOutboundBundle(t, store, 2, OutboundQueueOptions{
			PageSize:               fixed(5),
			MaxInMemory:            fixed(8),
			MaxPerDestination:      fixed(4),
			DestinationConcurrency: fixed(2),
			RetryInitialInterval:   fixed(time.Second),
			RetryMaxInterval:       fixed(time.Second),
		})
		b.setExecErr(func(task *persistence.OutboundTask, _ int) error {
			if task.Destination == "shard-bad" {
				return errDestinationDown
			}
			return nil
		})
		// The failing destination's backlog comes first and alone exceeds the memory cap.
		for id := int64(1); id <= 30; id++ {
			store.AddOutboundTasks(outboundTask(id, "shard-bad"))
		}
		for id := int64(31); id <= 40; id++ {
			store.AddOutboundTasks(outboundTask(id, "shard-good"))
		}
		q.Start()
		b.completed.waitFor(t, 10, "the healthy destination's tasks")
		require.Equal(t, 30, store.OutboundTaskCount())

		// The destination recovers: its tasks left in the store are read again and delivered.
		waitEvent(t, b.failed, "first failure")
		waitEvent(t, b.failed, "second failure")
		b.setExecErr(nil)
		b.ts.Advance(time.Second) // the retry backoff
		b.completed.waitFor(t, 40, "every task")
		for id := int64(1); id <= 40; id++ {
			require.LessOrEqual(t, b.attemptsOf(id), 2, "task %d", id)
		}
		require.Zero(t, store.OutboundTaskCount())
	})

	t.Run("RetriedUntilSuccess", func(t *testing.T) {
		t.Parallel()
		store := taskstest.NewTaskStore()
		q, b := newOutboundBundle(t, store, 2, OutboundQueueOptions{
			RetryInitialInterval: fixed(time.Second),
			RetryMaxInterval:     fixed(8 * time.Second),
			AlertAttempts:        fixed(3),
		})
		const failures = 6
		b.setExecErr(func(_ *persistence.OutboundTask, attempt int) error {
			if attempt <= failures {
				return errDestinationDown
			}
			return nil
		})
		store.AddOutboundTasks(outboundTask(7, "shard-3"))
		q.Start()
		for range failures {
			waitEvent(t, b.failed, "failure")
			b.ts.Advance(8 * time.Second) // the max interval covers any jittered backoff
		}
		b.completed.waitFor(t, 1, "completion")
		require.Equal(t, failures+1, b.attemptsOf(7))
		require.Zero(t, store.OutboundTaskCount())
		require.Equal(t, int64(failures+1), counterValue(b.scope, MetricOutboundTaskAttempts))
		require.Equal(t, int64(failures), counterValue(b.scope, MetricOutboundTaskFailures))

		alerts := b.logs.FilterMessage("outbound task keeps failing; still retrying").All()
		require.Len(t, alerts, 1)
		require.Equal(t, int64(7), alerts[0].ContextMap()["task-id"])
		require.Equal(t, "shard-3", alerts[0].ContextMap()["destination"])
	})

	t.Run("PendingTasksRunAfterRestart", func(t *testing.T) {
		t.Parallel()
		store := taskstest.NewTaskStore()
		for id := int64(1); id <= 100; id++ {
			store.AddOutboundTasks(outboundTask(id, fmt.Sprintf("shard-%d", id%5)))
		}

		// The first owner gets every delivery refused, then goes away.
		first, b1 := newOutboundBundle(t, store, 2, OutboundQueueOptions{})
		b1.setExecErr(func(*persistence.OutboundTask, int) error { return errDestinationDown })
		first.Start()
		for range 5 * OutboundQueueDestinationConcurrencyDefault {
			waitEvent(t, b1.failed, "failure")
		}
		first.Stop()
		require.Equal(t, 100, store.OutboundTaskCount())

		// The next owner delivers everything that was pending, and new tasks after a notify.
		second, b2 := newOutboundBundle(t, store, 2, OutboundQueueOptions{PageSize: fixed(7)})
		second.Start()
		b2.completed.waitFor(t, 100, "recovered tasks")
		store.AddOutboundTasks(outboundTask(101, "shard-1"))
		second.NotifyNewTasks()
		b2.completed.waitFor(t, 101, "notified task")
		require.Zero(t, store.OutboundTaskCount())
		for id := int64(1); id <= 101; id++ {
			require.Equal(t, 1, b2.attemptsOf(id), "task %d", id)
		}
	})
}
