package postgres

import (
	"context"
	"testing"

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
	b.Run("pipelined", func(b *testing.B) {
		persistencetest.RunDurableBatchBenchmark(b, openBenchStore)
	})
	// The path every batch took before the pipelined one, and that a batch with a failed
	// check still takes: one round trip per write.
	b.Run("write-by-write", func(b *testing.B) {
		persistencetest.RunDurableBatchBenchmark(b, func(b *testing.B) persistence.Store {
			s := openBenchStore(b).(*Store)
			s.testHooks.writeByWrite = true
			return s
		})
	})
}
