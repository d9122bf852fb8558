package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

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

// TestWALStartsOverUnderWritesThatNeverPause: a checkpoint that cannot copy the whole WAL
// (here a reader held an old snapshot; under load, the writer kept appending) asks the write
// path to finish it, and the next write starts the WAL over and cuts its file back to
// WALSizeLimit. Without that, the WAL only ever grew while writes kept coming.
func TestWALStartsOverUnderWritesThatNeverPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	const limit = 256 << 10
	// The test runs each checkpoint itself.
	s, err := Open(ctx, Config{Path: path, CheckpointInterval: time.Hour, WALSizeLimit: limit}, zaptest.NewLogger(t))
	require.NoError(t, err)
	defer s.Close()
	f := persistencetest.NewHeartbeatFixture(t, s, 200)

	version := int64(1)
	writeRound := func() {
		ws := make([]*persistence.ExecutionWrite, 0, len(f.Workers))
		for _, k := range f.Workers {
			ws = append(ws, f.Heartbeat(k, version))
		}
		results, err := s.WriteBatch(ctx, ws)
		require.NoError(t, err)
		for _, err := range results {
			require.NoError(t, err)
		}
		version++
	}
	for walSize(t, path) < 4*limit {
		writeRound()
	}

	// A reader takes its snapshot, the writer appends past it, and the checkpoint can copy
	// only what the reader's snapshot holds.
	reader, err := s.readDB.BeginTx(ctx, nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, "SELECT count(*) FROM executions").Scan(&n))
	writeRound()
	require.NoError(t, s.checkpoints.checkpoint(ctx))
	require.True(t, s.checkpoints.restartWanted.Load(), "a WAL over the limit that the checkpoint could not finish asks for a restart")
	require.NoError(t, reader.Rollback())
	grown := walSize(t, path)
	require.Greater(t, grown, int64(4*limit))

	writeRound()
	require.EqualValues(t, 1, s.checkpoints.restarts.Load(), "the write path finished the checkpoint")
	require.False(t, s.checkpoints.restartWanted.Load())
	require.LessOrEqual(t, walSize(t, path), int64(limit), "the WAL started over and was cut back to the limit")

	// Nothing written is lost: every worker has its last heartbeat.
	for _, k := range f.Workers {
		rec, err := s.GetExecution(ctx, persistencetest.HeartbeatShard, k)
		require.NoError(t, err)
		require.EqualValues(t, version, rec.DBVersion)
	}
}
