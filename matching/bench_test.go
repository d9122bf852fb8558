package matching

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uber-go/tally/v4"
)

// BenchmarkAddPoll measures end-to-end throughput: adders (GOMAXPROCS goroutines) add b.N
// tasks while pollers long-poll, until every task is dispatched. Reports tasks/s and the share
// matched to a waiting poll.
func BenchmarkAddPoll(b *testing.B) {
	for _, c := range []struct{ pollers, queues int }{
		{1, 1}, {8, 1}, {64, 1}, {256, 1}, {64, 16}, {1024, 256},
	} {
		b.Run(fmt.Sprintf("pollers=%d/queues=%d", c.pollers, c.queues), func(b *testing.B) {
			benchmarkAddPoll(b, c.pollers, c.queues)
		})
	}
}

func benchmarkAddPoll(b *testing.B, pollers, queues int) {
	scope := tally.NewTestScope("", nil)
	m := New(nil, Options{BacklogCap: 1 << 30}, nil, scope)
	m.Start()
	defer m.Stop()

	refs := make([]ActivityTaskRef, b.N)
	for i := range refs {
		refs[i] = ActivityTaskRef{
			NamespaceID: testNS, TaskQueue: fmt.Sprintf("tq-%d", i%queues),
			ActivityID: fmt.Sprintf("a-%d", i), RunID: "r", Stamp: 1, ScheduledTime: baseTime,
		}
	}
	var (
		dispatched atomic.Int64
		allOut     = make(chan struct{})
		pollWG     sync.WaitGroup
	)
	for p := range pollers {
		pollWG.Add(1)
		go func() {
			defer pollWG.Done()
			poll := ActivityPoll{NamespaceID: testNS, TaskQueue: fmt.Sprintf("tq-%d", p%queues), WorkerInstanceKey: fmt.Sprintf("w-%d", p)}
			for {
				_, ok, err := m.PollActivityTask(context.Background(), poll)
				if err != nil {
					return // ErrStopped
				}
				if ok && dispatched.Add(1) == int64(b.N) {
					close(allOut)
				}
			}
		}()
	}

	b.ReportAllocs()
	b.ResetTimer()
	adders := runtime.GOMAXPROCS(0)
	var addWG sync.WaitGroup
	for a := range adders {
		addWG.Add(1)
		go func() {
			defer addWG.Done()
			for i := a; i < b.N; i += adders {
				if err := m.AddActivityTask(refs[i]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	addWG.Wait()
	select {
	case <-allOut:
	case <-time.After(time.Minute):
		b.Fatal("tasks not dispatched")
	}
	b.StopTimer()
	m.Stop()
	pollWG.Wait()

	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	var sync int64
	for _, c := range scope.Snapshot().Counters() {
		if c.Name() == "matching_sync_match" {
			sync = c.Value()
		}
	}
	b.ReportMetric(100*float64(sync)/float64(b.N), "%sync")
}

// BenchmarkBacklog measures queueing without waiting polls: add b.N tasks to one queue (heap
// insert, dedupe index), then drain it.
func BenchmarkBacklog(b *testing.B) {
	m := New(nil, Options{BacklogCap: 1 << 30}, nil, nil)
	refs := make([]ActivityTaskRef, b.N)
	for i := range refs {
		refs[i] = ActivityTaskRef{
			NamespaceID: testNS, TaskQueue: testTQ, ActivityID: fmt.Sprintf("a-%d", i), RunID: "r",
			Stamp: 1, ScheduledTime: baseTime.Add(time.Duration(i%1000) * time.Millisecond),
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	poll := ActivityPoll{NamespaceID: testNS, TaskQueue: testTQ}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range refs {
		if err := m.AddActivityTask(refs[i]); err != nil {
			b.Fatal(err)
		}
	}
	for range refs {
		if _, ok, err := m.PollActivityTask(ctx, poll); !ok || err != nil {
			b.Fatal("backlog drained early", err)
		}
	}
}

// BenchmarkSyncMatchRoundTrip measures one hand-off at a time: with pollers waiting, add a
// task and wait until a poller has it. Every task is a sync match; ns/op is the add-to-poller
// latency including the poller's wake-up.
func BenchmarkSyncMatchRoundTrip(b *testing.B) {
	for _, pollers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("pollers=%d", pollers), func(b *testing.B) {
			m := New(nil, Options{}, nil, nil)
			received := make(chan struct{}, pollers)
			var pollWG sync.WaitGroup
			for p := range pollers {
				pollWG.Add(1)
				go func() {
					defer pollWG.Done()
					poll := ActivityPoll{NamespaceID: testNS, TaskQueue: testTQ, WorkerInstanceKey: fmt.Sprintf("w-%d", p)}
					for {
						_, ok, err := m.PollActivityTask(context.Background(), poll)
						if err != nil {
							return
						}
						if ok {
							received <- struct{}{}
						}
					}
				}()
			}
			refs := make([]ActivityTaskRef, b.N)
			for i := range refs {
				refs[i] = ActivityTaskRef{NamespaceID: testNS, TaskQueue: testTQ, ActivityID: fmt.Sprintf("a-%d", i), RunID: "r", Stamp: 1}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range refs {
				if err := m.AddActivityTask(refs[i]); err != nil {
					b.Fatal(err)
				}
				<-received
			}
			b.StopTimer()
			m.Stop()
			pollWG.Wait()
		})
	}
}
