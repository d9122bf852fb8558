package tasks

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks/taskstest"
)

func TestScheduler(t *testing.T) {
	t.Parallel()

	t.Run("SubmitBlocksWhenFullAndRespectsContext", func(t *testing.T) {
		t.Parallel()
		s := NewScheduler(SchedulerOptions{WorkerCount: 1, QueueSize: 1})
		s.Start()
		defer s.Stop()
		release := make(chan struct{})
		running := make(chan struct{})
		require.NoError(t, s.Submit(context.Background(), func(context.Context) { close(running); <-release }))
		<-running
		require.NoError(t, s.Submit(context.Background(), func(context.Context) {})) // fills the queue

		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan error, 1)
		go func() { result <- s.Submit(ctx, func(context.Context) { t.Error("a refused job ran") }) }()
		requireNoEvent(t, result, "Submit returning while the queue is full")
		cancel()
		require.ErrorIs(t, waitEvent(t, result, "Submit to give up"), context.Canceled)
		close(release)
	})

	t.Run("StopRunsEveryAcceptedJobOnce", func(t *testing.T) {
		t.Parallel()
		s := NewScheduler(SchedulerOptions{WorkerCount: 1, QueueSize: 10})
		s.Start()
		release := make(chan struct{})
		var ran, drained atomic.Int32
		require.NoError(t, s.Submit(context.Background(), func(context.Context) { <-release; ran.Add(1) }))
		for range 5 {
			require.NoError(t, s.Submit(context.Background(), func(ctx context.Context) {
				if ctx.Err() != nil {
					drained.Add(1)
				} else {
					ran.Add(1)
				}
			}))
		}
		go func() { time.Sleep(time.Millisecond); close(release) }()
		s.Stop()
		require.Equal(t, int32(6), ran.Load()+drained.Load())
		require.ErrorIs(t, s.Submit(context.Background(), func(context.Context) {}), ErrSchedulerStopped)
	})

	t.Run("SubmitBeforeStartIsRefused", func(t *testing.T) {
		t.Parallel()
		s := NewScheduler(SchedulerOptions{})
		require.ErrorIs(t, s.Submit(context.Background(), func(context.Context) {}), ErrSchedulerStopped)
		s.Stop()
	})
}

// TestStopLeavesNoGoroutines is not parallel: it counts the process's goroutines.
func TestStopLeavesNoGoroutines(t *testing.T) {
	baseline := runtime.NumGoroutine()
	for range 20 {
		store := taskstest.NewTaskStore()
		tq, tb := newTimerBundle(t, 4, TimerQueueOptions{LookAhead: fixed(time.Minute)})
		started := make(chan struct{}, 100)
		// Executors that only return when cancelled, so Stop has work in flight to wait for.
		tq.exec = timerExecutorFunc(func(ctx context.Context, _ *persistence.TimerTask) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		for i := range 10 {
			tb.store.AddTimerTasks(timerTask(int64(i+1), tb.start))
		}
		for i := range 10 {
			store.AddOutboundTasks(outboundTask(int64(i+1), "shard-1"))
		}
		oq := NewOutboundQueue(1, store, outboundExecutorFunc(func(ctx context.Context, _ *persistence.OutboundTask) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}), tb.sched, tb.ts, OutboundQueueOptions{}, tq.logger, tb.scope)
		tq.Start()
		oq.Start()
		<-started
		<-started
		oq.Stop()
		tq.Stop()
		tb.sched.Stop()
		require.Equal(t, 10, tb.store.TimerTaskCount())
		require.Equal(t, 10, store.OutboundTaskCount())
	}
	// Stop has returned for everything; a goroutine that signalled its exit may still need a
	// moment to be unscheduled, so poll (this only fails if goroutines stay).
	deadline := time.Now().Add(waitTimeout)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), baseline)
}
