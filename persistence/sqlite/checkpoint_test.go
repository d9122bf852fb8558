package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/persistencetest"
)

// TestCheckpointerCopiesTheWAL: commits only append to the WAL, the background checkpointer
// copies it into the database file, and the WAL is reused rather than growing without bound.
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := openTestStore(t, path)
	defer s.Close()
	f := persistencetest.NewHeartbeatFixture(t, s, 200)

	// Enough heartbeats for SQLite's own auto-checkpoint (1,000 pages) several times over.
	version := int64(1)
	writeRound := func() {
		for i := 0; i < len(f.Workers); i += 50 {
			writes := f.Workers[i : i+50]
			ws := make([]*persistence.ExecutionWrite, 0, len(writes))
			for _, k := range writes {
				ws = append(ws, f.Heartbeat(k, version))
			}
			results, err := s.WriteBatch(ctx, ws)
			require.NoError(t, err)
			for _, err := range results {
				require.NoError(t, err)
			}
		}
		version++
	}
	for range 20 {
		writeRound()
	}
	require.Eventually(t, func() bool { return s.checkpoints.frames.Load() > 0 }, 30*time.Second, 10*time.Millisecond,
		"the checkpointer copied WAL frames into the database file")

	// Once a checkpoint has caught up, later commits reuse the WAL from its start: its size
	// stays what a few rounds need however many rounds are written.
	for range 20 {
		writeRound()
	}
	require.Eventually(t, func() bool {
		var busy, logFrames, copied int64
		require.NoError(t, s.checkpoints.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied))
		return logFrames == copied
	}, 30*time.Second, 10*time.Millisecond, "the checkpointer catches up with the writer")
	sizeAfter40 := walSize(t, path)
	for range 40 {
		writeRound()
	}
	require.Eventually(t, func() bool { return walSize(t, path) <= 2*sizeAfter40 }, 30*time.Second, 50*time.Millisecond,
		"the WAL is reused, not grown, once checkpoints keep up")
}

func walSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return fi.Size()
}
