package persistencetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/persistence"
)

// HeartbeatShard is the shard a HeartbeatFixture acquires and writes to.
const HeartbeatShard = int32(1)

// CountingStore counts the WriteBatch calls and the writes that reach the store it wraps.
type CountingStore struct {
	persistence.Store
	Batches, Writes atomic.Int64
}

// WriteBatch counts the batch and its writes, then passes it on.
func (c *CountingStore) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	c.Batches.Add(1)
	c.Writes.Add(int64(len(writes)))
	return c.Store.WriteBatch(ctx, writes)
}

// HeartbeatFixture is a shard with workers, each created at db version 1, and a generator of
// heartbeat writes: a new state blob and a replaced lease-expiry timer, like the Worker
// component writes.
type HeartbeatFixture struct {
	Store   persistence.Store
	RangeID int64
	Workers []persistence.ExecutionKey
	taskIDs atomic.Int64
}

// NewHeartbeatFixture acquires HeartbeatShard on store and creates workers executions in it.
func NewHeartbeatFixture(tb testing.TB, store persistence.Store, workers int) *HeartbeatFixture {
	tb.Helper()
	ctx := context.Background()
	shard, err := store.AcquireShard(ctx, HeartbeatShard, "bench-host")
	require.NoError(tb, err)
	f := &HeartbeatFixture{Store: store, RangeID: shard.RangeID}
	var creates []*persistence.ExecutionWrite
	for i := range workers {
		k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: fmt.Sprintf("worker-%04d", i), RunID: "run-1"}
		f.Workers = append(f.Workers, k)
		w := f.Heartbeat(k, 0)
		w.Mode = persistence.WriteModeCreate
		creates = append(creates, w)
	}
	results, err := store.WriteBatch(ctx, creates)
	require.NoError(tb, err)
	for _, err := range results {
		require.NoError(tb, err)
	}
	return f
}

// Heartbeat returns the update of worker k from db version prev to prev+1.
func (f *HeartbeatFixture) Heartbeat(k persistence.ExecutionKey, prev int64) *persistence.ExecutionWrite {
	state := make([]byte, 256)
	copy(state, fmt.Sprintf("version %d", prev+1))
	return &persistence.ExecutionWrite{
		ShardID: HeartbeatShard, RangeID: f.RangeID, Mode: persistence.WriteModeUpdate, Key: k,
		PrevDBVersion: prev, NextDBVersion: prev + 1,
		State: state, Lifecycle: persistence.LifecycleRunning,
		Indexed: persistence.IndexedFields{Status: "RUNNING", TaskQueue: "tq"},
		TimerTasks: []*persistence.TimerTask{{
			ShardID: HeartbeatShard, TaskID: f.taskIDs.Add(1), Execution: k, TaskTypeID: 1, Singleton: true,
			VisibilityTime: time.Unix(1_700_000_000, prev).UTC(), Payload: []byte("lease-expiry"),
		}},
	}
}

// RunGroupCommitTest checks that many concurrent writers through one GroupCommitter share
// transactions, and that every acknowledged write is durable. open must return a store on the
// same database each time it is called: the test calls it once to write, closes that store, and
// calls it again to read everything back.
func RunGroupCommitTest(t *testing.T, open func(t *testing.T) persistence.Store) {
	t.Helper()
	const writers, heartbeatsEach = 64, 20
	ctx := context.Background()
	f := NewHeartbeatFixture(t, open(t), writers)
	counting := &CountingStore{Store: f.Store}
	g := persistence.NewGroupCommitter(counting, persistence.GroupCommitOptions{}, zaptest.NewLogger(t), nil)
	g.Start()

	var wg sync.WaitGroup
	for _, k := range f.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); v <= heartbeatsEach; v++ {
				if err := g.Write(ctx, f.Heartbeat(k, v)); err != nil {
					t.Errorf("%s heartbeat %d: %v", k.BusinessID, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	g.Stop()
	require.NoError(t, f.Store.Close())

	require.Equal(t, int64(writers*heartbeatsEach), counting.Writes.Load())
	require.Less(t, counting.Batches.Load(), int64(writers*heartbeatsEach), "writes shared transactions")
	t.Logf("%d writes in %d batches", counting.Writes.Load(), counting.Batches.Load())

	s := open(t)
	defer s.Close()
	for _, k := range f.Workers {
		rec, err := s.GetExecution(ctx, HeartbeatShard, k)
		require.NoError(t, err)
		require.Equal(t, int64(heartbeatsEach+1), rec.DBVersion)
		require.Contains(t, string(rec.State), fmt.Sprintf("version %d", heartbeatsEach+1))
	}
	timers, err := s.GetTimerTasks(ctx, persistence.GetTimerTasksRequest{
		ShardID: HeartbeatShard, Before: time.Unix(1_800_000_000, 0), PageSize: 10 * writers,
	})
	require.NoError(t, err)
	require.Len(t, timers, writers, "one singleton lease timer per worker")
}

// The write benchmarks below are shared by every backend. Each backend keeps a top-level
// benchmark of the same name calling them, so figures stay comparable across backends and
// across runs. open must return a fresh, empty store; the benchmark closes it.

// RunSequentialWritesBenchmark: one writer, one heartbeat per transaction (one commit each).
func RunSequentialWritesBenchmark(b *testing.B, open func(b *testing.B) persistence.Store) {
	ctx := context.Background()
	f := NewHeartbeatFixture(b, open(b), 1)
	defer f.Store.Close()
	k := f.Workers[0]
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		results, err := f.Store.WriteBatch(ctx, []*persistence.ExecutionWrite{f.Heartbeat(k, int64(i+1))})
		if err != nil || results[0] != nil {
			b.Fatal(err, results)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}

// RunGroupCommit64WritersBenchmark: 64 concurrent writers, each heartbeating its own worker,
// through a GroupCommitter with default options.
func RunGroupCommit64WritersBenchmark(b *testing.B, open func(b *testing.B) persistence.Store) {
	const writers = 64
	ctx := context.Background()
	f := NewHeartbeatFixture(b, open(b), writers)
	defer f.Store.Close()
	counting := &CountingStore{Store: f.Store}
	g := persistence.NewGroupCommitter(counting, persistence.GroupCommitOptions{}, nil, nil)
	g.Start()
	defer g.Stop()

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, k := range f.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); next.Add(1) <= int64(b.N); v++ {
				if err := g.Write(ctx, f.Heartbeat(k, v)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	if n := counting.Batches.Load(); n > 0 {
		b.ReportMetric(float64(counting.Writes.Load())/float64(n), "writes/batch")
	}
}

// RunStateOnlyWriteBenchmark compares a state-only update of an execution with no collection
// entries and one with 10,000 (sub-benchmarks entries=0 and entries=10000): the cost should
// not depend on the collection.
func RunStateOnlyWriteBenchmark(b *testing.B, open func(b *testing.B) persistence.Store) {
	for _, entries := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			ctx := context.Background()
			f := NewHeartbeatFixture(b, open(b), 1)
			defer f.Store.Close()
			k := f.Workers[0]
			seed := &persistence.ExecutionWrite{
				ShardID: HeartbeatShard, RangeID: f.RangeID, Mode: persistence.WriteModeUpdate, Key: k,
				PrevDBVersion: 1, NextDBVersion: 2, State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
			}
			for i := range entries {
				seed.CollectionPuts = append(seed.CollectionPuts, persistence.CollectionEntry{
					Collection: "bound", Key: fmt.Sprintf("activity-%05d", i), Value: make([]byte, 64),
				})
			}
			results, err := f.Store.WriteBatch(ctx, []*persistence.ExecutionWrite{seed})
			require.NoError(b, err)
			require.NoError(b, results[0])
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := &persistence.ExecutionWrite{
					ShardID: HeartbeatShard, RangeID: f.RangeID, Mode: persistence.WriteModeUpdate, Key: k,
					PrevDBVersion: int64(i + 2), NextDBVersion: int64(i + 3), State: make([]byte, 256),
					Lifecycle: persistence.LifecycleRunning,
				}
				results, err := f.Store.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
				if err != nil || results[0] != nil {
					b.Fatal(err, results)
				}
			}
		})
	}
}

// RunDurableBatchBenchmark: one writer committing batches of heartbeats (sub-benchmarks
// batch=64 and batch=256, one worker per write), each batch one WriteBatch call and one
// commit: what a group-commit batch costs the store under load.
//
// measure, if not nil, is called just before the timed loop; the function it returns is
// called just after, with the number of writes, to report the backend's own metrics.
func RunDurableBatchBenchmark(b *testing.B, open func(b *testing.B) persistence.Store,
	measure func(b *testing.B, s persistence.Store) func(writes int),
) {
	for _, size := range []int{64, 256} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			f := NewHeartbeatFixture(b, open(b), size)
			defer f.Store.Close()
			batch := make([]*persistence.ExecutionWrite, size)
			done := func(int) {}
			if measure != nil {
				done = measure(b, f.Store)
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for j, k := range f.Workers {
					batch[j] = f.Heartbeat(k, int64(i+1))
				}
				results, err := f.Store.WriteBatch(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				for _, err := range results {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			elapsed := time.Since(start)
			done(b.N * size)
			b.ReportMetric(float64(b.N*size)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(elapsed.Seconds()*1000/float64(b.N), "ms/batch")
		})
	}
}
