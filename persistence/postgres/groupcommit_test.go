package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/vigilhq/vigil/persistence"
)

// countingStore counts WriteBatch calls and writes.
type countingStore struct {
	persistence.Store
	batches, writes atomic.Int64
}

func (c *countingStore) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	c.batches.Add(1)
	c.writes.Add(int64(len(writes)))
	return c.Store.WriteBatch(ctx, writes)
}

// heartbeatFixture is a shard with workers, each created at db version 1, and a generator of
// heartbeat writes: a new state blob and a replaced lease-expiry timer, like the Worker
// component writes.
type heartbeatFixture struct {
	store   *Store
	rangeID int64
	workers []persistence.ExecutionKey
	taskIDs atomic.Int64
}

const benchShard = int32(1)

func newHeartbeatFixture(tb testing.TB, dsn, schema string, workers int) *heartbeatFixture {
	tb.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{DSN: dsn, Schema: schema}, zap.NewNop())
	require.NoError(tb, err)
	shard, err := s.AcquireShard(ctx, benchShard, "bench-host")
	require.NoError(tb, err)
	f := &heartbeatFixture{store: s, rangeID: shard.RangeID}
	var creates []*persistence.ExecutionWrite
	for i := range workers {
		k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: fmt.Sprintf("worker-%04d", i), RunID: "run-1"}
		f.workers = append(f.workers, k)
		w := f.heartbeat(k, 0)
		w.Mode = persistence.WriteModeCreate
		creates = append(creates, w)
	}
	results, err := s.WriteBatch(ctx, creates)
	require.NoError(tb, err)
	for _, err := range results {
		require.NoError(tb, err)
	}
	return f
}

func (f *heartbeatFixture) heartbeat(k persistence.ExecutionKey, prev int64) *persistence.ExecutionWrite {
	state := make([]byte, 256)
	copy(state, fmt.Sprintf("version %d", prev+1))
	return &persistence.ExecutionWrite{
		ShardID: benchShard, RangeID: f.rangeID, Mode: persistence.WriteModeUpdate, Key: k,
		PrevDBVersion: prev, NextDBVersion: prev + 1,
		State: state, Lifecycle: persistence.LifecycleRunning,
		Indexed: persistence.IndexedFields{Status: "RUNNING", TaskQueue: "tq"},
		TimerTasks: []*persistence.TimerTask{{
			ShardID: benchShard, TaskID: f.taskIDs.Add(1), Execution: k, TaskTypeID: 1, Singleton: true,
			VisibilityTime: time.Unix(1_700_000_000, prev).UTC(), Payload: []byte("lease-expiry"),
		}},
	}
}

// TestGroupCommitterOnPostgres: many concurrent writers through one GroupCommitter share
// transactions, and every acknowledged write is readable through a fresh pool.
func TestGroupCommitterOnPostgres(t *testing.T) {
	t.Parallel()
	const writers, heartbeatsEach = 64, 20
	ctx := context.Background()
	dsn, schema := newTestSchema(t)
	f := newHeartbeatFixture(t, dsn, schema, writers)
	counting := &countingStore{Store: f.store}
	g := persistence.NewGroupCommitter(counting, persistence.GroupCommitOptions{}, zaptest.NewLogger(t), nil)
	g.Start()

	var wg sync.WaitGroup
	for _, k := range f.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); v <= heartbeatsEach; v++ {
				if err := g.Write(ctx, f.heartbeat(k, v)); err != nil {
					t.Errorf("%s heartbeat %d: %v", k.BusinessID, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	g.Stop()
	require.NoError(t, f.store.Close())

	require.Equal(t, int64(writers*heartbeatsEach), counting.writes.Load())
	require.Less(t, counting.batches.Load(), int64(writers*heartbeatsEach), "writes shared transactions")
	t.Logf("%d writes in %d batches", counting.writes.Load(), counting.batches.Load())

	s := openTestStore(t, dsn, schema)
	defer s.Close()
	for _, k := range f.workers {
		rec, err := s.GetExecution(ctx, benchShard, k)
		require.NoError(t, err)
		require.Equal(t, int64(heartbeatsEach+1), rec.DBVersion)
		require.Contains(t, string(rec.State), fmt.Sprintf("version %d", heartbeatsEach+1))
	}
	timers, err := s.GetTimerTasks(ctx, persistence.GetTimerTasksRequest{
		ShardID: benchShard, Before: time.Unix(1_800_000_000, 0), PageSize: 10 * writers,
	})
	require.NoError(t, err)
	require.Len(t, timers, writers, "one singleton lease timer per worker")
}

// BenchmarkSequentialWrites: one writer, one heartbeat per transaction (one commit each).
func BenchmarkSequentialWrites(b *testing.B) {
	ctx := context.Background()
	dsn, schema := newTestSchema(b)
	f := newHeartbeatFixture(b, dsn, schema, 1)
	defer f.store.Close()
	k := f.workers[0]
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		results, err := f.store.WriteBatch(ctx, []*persistence.ExecutionWrite{f.heartbeat(k, int64(i+1))})
		if err != nil || results[0] != nil {
			b.Fatal(err, results)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}

// BenchmarkGroupCommit64Writers: 64 concurrent writers, each heartbeating its own worker,
// through a GroupCommitter with default options.
func BenchmarkGroupCommit64Writers(b *testing.B) {
	const writers = 64
	ctx := context.Background()
	dsn, schema := newTestSchema(b)
	f := newHeartbeatFixture(b, dsn, schema, writers)
	defer f.store.Close()
	counting := &countingStore{Store: f.store}
	g := persistence.NewGroupCommitter(counting, persistence.GroupCommitOptions{}, nil, nil)
	g.Start()
	defer g.Stop()

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, k := range f.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); next.Add(1) <= int64(b.N); v++ {
				if err := g.Write(ctx, f.heartbeat(k, v)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	if n := counting.batches.Load(); n > 0 {
		b.ReportMetric(float64(counting.writes.Load())/float64(n), "writes/batch")
	}
}

// BenchmarkStateOnlyWrite compares a state-only update of an execution with no collection
// entries and one with 10,000: the cost should not depend on the collection.
func BenchmarkStateOnlyWrite(b *testing.B) {
	for _, entries := range []int{0, 10_000} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			ctx := context.Background()
			dsn, schema := newTestSchema(b)
			f := newHeartbeatFixture(b, dsn, schema, 1)
			defer f.store.Close()
			k := f.workers[0]
			seed := &persistence.ExecutionWrite{
				ShardID: benchShard, RangeID: f.rangeID, Mode: persistence.WriteModeUpdate, Key: k,
				PrevDBVersion: 1, NextDBVersion: 2, State: []byte("s"), Lifecycle: persistence.LifecycleRunning,
			}
			for i := range entries {
				seed.CollectionPuts = append(seed.CollectionPuts, persistence.CollectionEntry{
					Collection: "bound", Key: fmt.Sprintf("activity-%05d", i), Value: make([]byte, 64),
				})
			}
			results, err := f.store.WriteBatch(ctx, []*persistence.ExecutionWrite{seed})
			require.NoError(b, err)
			require.NoError(b, results[0])
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := &persistence.ExecutionWrite{
					ShardID: benchShard, RangeID: f.rangeID, Mode: persistence.WriteModeUpdate, Key: k,
					PrevDBVersion: int64(i + 2), NextDBVersion: int64(i + 3), State: make([]byte, 256),
					Lifecycle: persistence.LifecycleRunning,
				}
				results, err := f.store.WriteBatch(ctx, []*persistence.ExecutionWrite{w})
				if err != nil || results[0] != nil {
					b.Fatal(err, results)
				}
			}
		})
	}
}
