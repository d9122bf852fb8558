package tasks

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/common/clock"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/tasks/taskstest"
)

// BenchmarkTimerFireLatency measures, with the real clock, how late a notified timer fires:
// each iteration writes a timer due 2ms ahead, notifies the queue and waits for the executor.
// It reports the mean and p99 of (fire time − VisibilityTime); it does not assert on them.
func BenchmarkTimerFireLatency(b *testing.B) {
	ts := clock.NewRealTimeSource()
	store := taskstest.NewTaskStore()
	sched := NewScheduler(SchedulerOptions{})
	sched.Start()
	defer sched.Stop()
	fired := make(chan time.Duration, 1)
	exec := timerExecutorFunc(func(_ context.Context, task *persistence.TimerTask) error {
		fired <- ts.Now().Sub(task.VisibilityTime)
		return nil
	})
	q := NewTimerQueue(1, store, exec, sched, ts, TimerQueueOptions{}, zap.NewNop(), tally.NoopScope)
	q.Start()
	defer q.Stop()

	lags := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		task := timerTask(int64(i+1), ts.Now().Add(2*time.Millisecond))
		store.AddTimerTasks(task)
		q.NotifyNewTimers([]*persistence.TimerTask{task})
		lags = append(lags, <-fired)
	}
	b.StopTimer()
	slices.Sort(lags)
	var sum time.Duration
	for _, l := range lags {
		sum += l
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(lags)), "mean-lag-µs")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-lag-µs")
}

// BenchmarkTimerThroughput measures how fast a backlog of due timers is fired and deleted
// through a default scheduler, with the real clock and the in-memory store. The tasks were due
// before the queue started, so the restart limiter is opened wide to measure the queue itself.
func BenchmarkTimerThroughput(b *testing.B) {
	ts := clock.NewRealTimeSource()
	store := taskstest.NewTaskStore()
	sched := NewScheduler(SchedulerOptions{})
	sched.Start()
	defer sched.Stop()
	done := newCounter()
	exec := timerExecutorFunc(func(context.Context, *persistence.TimerTask) error { return nil })
	now := ts.Now()
	batch := make([]*persistence.TimerTask, 0, b.N)
	for i := range b.N {
		batch = append(batch, timerTask(int64(i+1), now.Add(time.Duration(i)*time.Nanosecond)))
	}
	store.AddTimerTasks(batch...)
	q := NewTimerQueue(1, store, exec, sched, ts, TimerQueueOptions{
		OverdueFireRate:  fixed(100_000_000),
		OverdueFireBurst: fixed(100_000_000),
		TestHooks:        &TimerQueueTestHooks{OnCompleted: func(*persistence.TimerTask) { done.inc() }},
	}, zap.NewNop(), tally.NoopScope)
	b.ResetTimer()
	q.Start()
	defer q.Stop()
	for done.n.Load() < int64(b.N) {
		<-done.changed
	}
}
