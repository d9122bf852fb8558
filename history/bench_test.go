package history_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/history/historytest"
)

// Write-path benchmarks: a transaction through the engine to a durable commit (state + a
// singleton timer), as a heartbeat does. Report writes/s as 1e9 / ns/op (× parallelism).

func BenchmarkEngineWriteOneWriter(b *testing.B) {
	h := historytest.Start(b, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		schedule(b, ctx, h, "solo")
	}
}

func BenchmarkEngineWriteConcurrentWriters(b *testing.B) {
	for _, writers := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			h := historytest.Start(b, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}})
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0))) // RunParallel multiplies by GOMAXPROCS
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := fmt.Sprintf("r%d", next.Add(1))
				for pb.Next() {
					schedule(b, ctx, h, id)
				}
			})
		})
	}
}

func schedule(b *testing.B, ctx context.Context, h *historytest.Host, id string) {
	_, _, err := chasm.UpdateWithStart(ctx, h.Engine, chasm.ExecutionKey{NamespaceID: "ns", BusinessID: id},
		func(mctx chasm.MutableContext) (*reminder.Reminder, error) { return reminder.New(mctx, time.Hour, "") },
		func(mctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
			return struct{}{}, reminder.TransitionScheduled.Apply(r, mctx, reminder.EventSchedule{Delay: time.Hour})
		})
	if err != nil {
		b.Fatal(err)
	}
}
