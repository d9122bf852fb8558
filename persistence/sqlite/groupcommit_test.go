package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/persistencetest"
)

// TestGroupCommitterOnSQLite: many concurrent writers through one GroupCommitter share
// transactions, and every acknowledged write is on disk after Close and reopen.
func TestGroupCommitterOnSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "vigil.db")
	persistencetest.RunGroupCommitTest(t, func(t *testing.T) persistence.Store {
		return openTestStore(t, path)
	})
}

// openBenchStore opens a store in a fresh file, without logging, for a benchmark. A commit
// here is an fsync, so SequentialWrites measures one fsync per write.
func openBenchStore(b *testing.B) persistence.Store {
	s, err := Open(context.Background(), Config{Path: filepath.Join(b.TempDir(), "vigil.db")}, zap.NewNop())
	require.NoError(b, err)
	return s
}

func BenchmarkSequentialWrites(b *testing.B) {
	persistencetest.RunSequentialWritesBenchmark(b, openBenchStore)
}

func BenchmarkGroupCommit64Writers(b *testing.B) {
	persistencetest.RunGroupCommit64WritersBenchmark(b, openBenchStore)
}

func BenchmarkStateOnlyWrite(b *testing.B) {
	persistencetest.RunStateOnlyWriteBenchmark(b, openBenchStore)
}

// BenchmarkGroupCommitFleet: 128 concurrent writers heartbeat a fleet of 20,000 workers (each
// writer cycling through its own share) through a GroupCommitter, as history does under load:
// unlike GroupCommit64Writers, whose 64 rows stay in a few hot pages, every write here dirties
// pages of its own, so the WAL writes and the checkpoints cost what they cost in production.
//
// Sub-benchmarks: checkpoint=background (the default) and checkpoint=in-commit (SQLite's own
// auto-checkpoint on the write connection, as before the checkpointer).
func BenchmarkGroupCommitFleet(b *testing.B) {
	for _, v := range []struct {
		name     string
		interval time.Duration
	}{{"background", 0}, {"in-commit", -1}} {
		b.Run("checkpoint="+v.name, func(b *testing.B) {
			s, err := Open(context.Background(), Config{Path: filepath.Join(b.TempDir(), "vigil.db"), CheckpointInterval: v.interval}, zap.NewNop())
			require.NoError(b, err)
			benchmarkGroupCommitFleet(b, s)
		})
	}
}

func benchmarkGroupCommitFleet(b *testing.B, s persistence.Store) {
	const fleet, writers = 20_000, 128
	f := persistencetest.NewHeartbeatFixture(b, s, fleet)
	defer f.Store.Close()
	counting := &persistencetest.CountingStore{Store: f.Store}
	elapsed := runGroupCommitWriters(b, counting, writers, func(w int) func(int64) *persistence.ExecutionWrite {
		mine := f.Workers[w*fleet/writers : (w+1)*fleet/writers]
		versions := make([]int64, len(mine))
		for i := range versions {
			versions[i] = 1
		}
		i := 0
		return func(int64) *persistence.ExecutionWrite {
			hb := f.Heartbeat(mine[i], versions[i])
			versions[i]++
			i = (i + 1) % len(mine)
			return hb
		}
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	if n := counting.Batches.Load(); n > 0 {
		b.ReportMetric(float64(counting.Writes.Load())/float64(n), "writes/batch")
		b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(n), "ms/batch")
	}
}

// runGroupCommitWriters runs b.N writes through a GroupCommitter on store from writers
// goroutines and returns how long they took. newWriter(w) gives writer w its writes; each is
// called with the write's number, 1..b.N across all writers.
func runGroupCommitWriters(b *testing.B, store persistence.Store, writers int, newWriter func(w int) func(n int64) *persistence.ExecutionWrite) time.Duration {
	ctx := context.Background()
	g := persistence.NewGroupCommitter(store, persistence.GroupCommitOptions{}, nil, nil)
	g.Start()
	defer g.Stop()

	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		write := newWriter(w)
		wg.Go(func() {
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				if err := g.Write(ctx, write(n)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkGetCurrentExecution reads the current run of a key a registration asks about (none:
// the common case in a fleet's start) and of a worker that exists, as history does for a key
// it does not hold.
func BenchmarkGetCurrentExecution(b *testing.B) {
	s := openBenchStore(b).(*Store)
	defer s.Close()
	f := persistencetest.NewHeartbeatFixture(b, s, 1)
	ctx := context.Background()
	w := f.Workers[0]
	known := persistence.CurrentExecutionKey{NamespaceID: w.NamespaceID, ArchetypeID: w.ArchetypeID, BusinessID: w.BusinessID}
	unknown := known
	unknown.BusinessID = "not-registered"
	b.Run("unknown", func(b *testing.B) {
		for b.Loop() {
			_, err := s.GetCurrentExecution(ctx, persistencetest.HeartbeatShard, unknown)
			var nf *persistence.NotFoundError
			require.ErrorAs(b, err, &nf)
		}
	})
	b.Run("known", func(b *testing.B) {
		for b.Loop() {
			_, err := s.GetCurrentExecution(ctx, persistencetest.HeartbeatShard, known)
			require.NoError(b, err)
		}
	})
}

// BenchmarkGroupCommitRegistrations: 128 concurrent writers register new workers (a create
// with its lease timer) beside a fleet of 20,000, through a GroupCommitter: a registration
// burst's write path.
func BenchmarkGroupCommitRegistrations(b *testing.B) {
	const fleet, writers = 20_000, 128
	s, err := Open(context.Background(), Config{Path: filepath.Join(b.TempDir(), "vigil.db")}, zap.NewNop())
	require.NoError(b, err)
	f := persistencetest.NewHeartbeatFixture(b, s, fleet)
	defer f.Store.Close()
	elapsed := runGroupCommitWriters(b, f.Store, writers, func(int) func(int64) *persistence.ExecutionWrite {
		return func(n int64) *persistence.ExecutionWrite {
			k := persistence.ExecutionKey{NamespaceID: "ns", ArchetypeID: 1, BusinessID: fmt.Sprintf("new-%08d", n), RunID: "run-1"}
			w := f.Heartbeat(k, 0)
			w.Mode = persistence.WriteModeCreate
			return w
		}
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
}

func BenchmarkVisibilityList(b *testing.B) {
	persistencetest.RunVisibilityListBenchmark(b, openBenchStore)
}
