package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/persistencetest"
)

// TestGroupCommitterOnPostgres: many concurrent writers through one GroupCommitter share
// transactions, and every acknowledged write is readable through a fresh pool.
func TestGroupCommitterOnPostgres(t *testing.T) {
	t.Parallel()
	dsn, schema := newTestSchema(t)
	persistencetest.RunGroupCommitTest(t, func(t *testing.T) persistence.Store {
		return openTestStore(t, dsn, schema)
	})
}

// openBenchStore opens a store on a fresh schema, without logging, for a benchmark.
func openBenchStore(b *testing.B) persistence.Store {
	dsn, schema := newTestSchema(b)
	s, err := Open(context.Background(), Config{DSN: dsn, Schema: schema}, zap.NewNop())
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

func BenchmarkDurableBatch(b *testing.B) {
	open := func(writeByWrite bool) func(b *testing.B) persistence.Store {
		return func(b *testing.B) persistence.Store {
			dsn, schema := newTestSchema(b)
			s, err := Open(context.Background(), Config{DSN: dsn, Schema: schema, MaxConns: 1}, zap.NewNop())
			require.NoError(b, err)
			s.testHooks.writeByWrite = writeByWrite
			return s
		}
	}
	b.Run("pipelined", func(b *testing.B) {
		persistencetest.RunDurableBatchBenchmark(b, open(false), measureServerCPU)
	})
	// The path every batch took before the pipelined one, and that a batch with a failed
	// check still takes: one round trip per write.
	b.Run("write-by-write", func(b *testing.B) {
		persistencetest.RunDurableBatchBenchmark(b, open(true), measureServerCPU)
	})
}

// measureServerCPU reports the CPU time the PostgreSQL server processes behind the store's
// write connections spent per write ("server-µs/write"). Wall-clock figures on a busy machine
// mostly measure the other load; CPU time does not. It reports nothing if the server runs
// elsewhere (no /proc entry for its pids).
func measureServerCPU(b *testing.B, s persistence.Store) func(writes int) {
	ctx := context.Background()
	var pids []int
	var conns []*pgxpool.Conn
	for range writeConns {
		conn, err := s.(*Store).writePool.Acquire(ctx)
		require.NoError(b, err)
		conns = append(conns, conn)
		var pid int
		require.NoError(b, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		pids = append(pids, pid)
	}
	for _, conn := range conns {
		conn.Release()
	}
	total := func() (time.Duration, bool) {
		var sum time.Duration
		for _, pid := range pids {
			cpu, ok := processCPU(pid)
			if !ok {
				return 0, false
			}
			sum += cpu
		}
		return sum, true
	}
	before, ok := total()
	return func(writes int) {
		after, ok2 := total()
		if ok && ok2 && writes > 0 {
			b.ReportMetric(float64((after-before).Microseconds())/float64(writes), "server-µs/write")
		}
	}
}

// processCPU returns a process's user and system CPU time from /proc/PID/stat.
func processCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; the fields after it are plain.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

func BenchmarkVisibilityList(b *testing.B) {
	persistencetest.RunVisibilityListBenchmark(b, openBenchStore)
}
