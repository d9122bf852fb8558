package sqlite

import (
	"context"
	"path/filepath"
	"testing"

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
