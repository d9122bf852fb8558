package history_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/chasm"
	"github.com/vigilhq/vigil/chasm/chasmtest/reminder"
	"github.com/vigilhq/vigil/history/historytest"
)

// BenchmarkCollectionChurn is a worker restart as the churn scenario makes them, 64 at a time:
// a new execution binding 100 entries of about a bound activity's size in its first write,
// then a write dropping them all. One op is both writes.
func BenchmarkCollectionChurn(b *testing.B) {
	h := historytest.Start(b, historytest.Options{Libraries: []chasm.Library{reminder.NewLibrary(reminder.NewRecordingSink())}})
	ctx := context.Background()
	text := strings.Repeat("x", 100)
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("worker-%d", next.Add(1))
			k := chasm.ExecutionKey{NamespaceID: "ns", BusinessID: id}
			_, _, err := chasm.UpdateWithStart(ctx, h.Engine, k,
				func(mctx chasm.MutableContext) (*reminder.Reminder, error) { return reminder.New(mctx, time.Hour, "") },
				func(mctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
					for i := range 100 {
						activityID := fmt.Sprintf("activity-%d", i)
						r.AddNote(mctx, fmt.Sprintf("%d:%s/0b7c6f1e-6d5a-4c3b-9a8e-%012d", len(activityID), activityID, i), text)
					}
					return struct{}{}, nil
				})
			if err != nil {
				b.Fatal(err)
			}
			ref, err := chasm.NewRef[*reminder.Reminder](h.Engine, k)
			if err != nil {
				b.Fatal(err)
			}
			_, err = chasm.UpdateComponent(ctx, h.Engine, ref, func(mctx chasm.MutableContext, r *reminder.Reminder) (struct{}, error) {
				for _, key := range reminder.Notes.Keys(mctx) {
					r.RemoveNote(mctx, key)
				}
				return struct{}{}, nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
