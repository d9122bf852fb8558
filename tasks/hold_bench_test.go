package tasks

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/persistence"
)

// BenchmarkHold is the hold a heartbeat answered from memory gives its worker's expiry timer,
// in a queue holding the timers of 2,000 workers.
//
//	go test -run '^$' -bench BenchmarkHold -count 10 ./tasks/
func BenchmarkHold(b *testing.B) {
	const workers = 2000
	q, tb := newTimerBundle(b, 1, TimerQueueOptions{LookAhead: fixed(time.Hour)})
	q.Start()
	defer q.Stop()
	<-tb.reads
	keys := make([]persistence.ExecutionKey, workers)
	for i := range workers {
		task := timerTask(int64(i+1), tb.start.Add(time.Minute))
		task.Singleton = true
		task.Execution.BusinessID = fmt.Sprintf("worker-%04d", i)
		keys[i] = task.Execution
		q.NotifyNewTimers([]*persistence.TimerTask{task})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		q.Hold(keys[i%workers], 1, tb.start.Add(time.Minute+time.Duration(i)*time.Millisecond))
	}
}
