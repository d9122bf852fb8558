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
	caughtUp := func() {
		require.Eventually(t, func() bool {
			var busy, logFrames, copied int64
			require.NoError(t, s.checkpoints.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied))
			return logFrames == copied
		}, 30*time.Second, 10*time.Millisecond, "the checkpointer catches up with the writer")
	}
	caughtUp()
	sizeAfter40 := walSize(t, path)
	// The file never shrinks below the size limit, so it must not grow: each round waits for
	// the checkpoints to keep up, as they do on a host that is not overloaded (on a loaded
	// test machine, rounds written back to back could outrun them and grow it for good).
	for range 40 {
		writeRound()
		caughtUp()
	}
	require.LessOrEqual(t, walSize(t, path), 2*sizeAfter40, "the WAL is reused, not grown, once checkpoints keep up")
}

func walSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return fi.Size()
}

// TestWALStartsOverUnderWritesThatNeverPause: once the background checkpoints have caught up
// with the writer, a WAL over the limit is started over by the write path, which copies only
// the little left, and its file is cut back to WALSizeLimit. While they are behind (here a
// reader held an old snapshot; under load, the writer outwrote them) the write path is not
// asked to copy the backlog: that stalled every commit for seconds.
func TestWALStartsOverUnderWritesThatNeverPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	const limit = 256 << 10
	s, f, writeRound := openWALTestStore(t, path, limit)
	defer s.Close()
	for walSize(t, path) < 4*limit {
		writeRound()
	}

	// A reader takes its snapshot and the writer appends past it: the checkpoints copy only
	// what the snapshot holds, and the rest waits behind the reader.
	reader, err := s.readDB.BeginTx(ctx, nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, reader.QueryRowContext(ctx, "SELECT count(*) FROM executions").Scan(&n))
	for range 3 {
		writeRound()
	}
	checkpointUntilCaughtUp(t, s)
	require.False(t, s.checkpoints.restartWanted.Load(), "with more than the backlog left behind a reader, the write path is not asked to copy it")
	held := s.WAL()
	require.Greater(t, held.Frames, walFrames(4*limit), "WAL reports the WAL's length")
	require.Greater(t, held.Backlog, s.checkpoints.restartBacklog, "the frames held behind the reader are the WAL's backlog")
	writeRound()
	require.Zero(t, s.checkpoints.restarts.Load(), "the write path copied nothing")
	require.Greater(t, walSize(t, path), int64(4*limit))

	// The reader goes; the next rounds copy the rest, and once nothing much is left the write
	// path is asked to finish: the next write starts the WAL over.
	require.NoError(t, reader.Rollback())
	checkpointUntilCaughtUp(t, s)
	require.True(t, s.checkpoints.restartWanted.Load(), "a WAL over the limit whose checkpoints caught up asks for a restart")
	require.LessOrEqual(t, s.WAL().Backlog, s.checkpoints.restartBacklog, "the checkpoints caught up: little or nothing left to copy")
	writeRound()
	require.EqualValues(t, 1, s.checkpoints.restarts.Load(), "the write path finished the checkpoint")
	require.EqualValues(t, 1, s.WAL().Restarts)
	require.False(t, s.checkpoints.restartWanted.Load())
	require.LessOrEqual(t, walSize(t, path), int64(limit), "the WAL started over and was cut back to the limit")
	f.RequireLastVersions(t, s)
}

// TestWALOverItsCapStartsOver: a checkpointer that never catches up (every round copies more
// than the backlog) does not let the WAL grow without bound: past eight times the limit the
// write path copies what is left and the WAL starts over.
func TestWALOverItsCapStartsOver(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "vigil.db")
	const limit = 256 << 10
	s, f, writeRound := openWALTestStore(t, path, limit)
	defer s.Close()
	s.checkpoints.restartBacklog = 1 // every round that copies anything is behind

	// As under a writer that never pauses, every round finds a write round it cannot copy yet:
	// here a reader's snapshot, taken before the round was written, holds it back.
	ctx := context.Background()
	for !s.checkpoints.restartWanted.Load() {
		reader, err := s.readDB.BeginTx(ctx, nil)
		require.NoError(t, err)
		var n int
		require.NoError(t, reader.QueryRowContext(ctx, "SELECT count(*) FROM executions").Scan(&n))
		writeRound()
		behind, err := s.checkpoints.checkpoint(ctx)
		require.NoError(t, err)
		require.NoError(t, reader.Rollback())
		require.True(t, behind, "each round copies the write round before")
		if !s.checkpoints.restartWanted.Load() {
			require.Less(t, walSize(t, path), int64(walCapFactor*limit+limit), "asked at the latest once past the cap")
		}
	}
	require.GreaterOrEqual(t, walSize(t, path), int64(walCapFactor)*(limit/(4096+24))*(4096+24),
		"not asked before the cap while behind")
	require.Zero(t, s.checkpoints.restarts.Load())
	writeRound()
	require.EqualValues(t, 1, s.checkpoints.restarts.Load())
	require.LessOrEqual(t, walSize(t, path), int64(limit), "the WAL started over and was cut back to the limit")
	f.RequireLastVersions(t, s)
}

// openWALTestStore opens a store whose checkpoints the test runs itself, with 200 workers,
// and returns a function that heartbeats all of them in one batch.
func openWALTestStore(t *testing.T, path string, limit int64) (*Store, *walFixture, func()) {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: path, CheckpointInterval: time.Hour, WALSizeLimit: limit}, zaptest.NewLogger(t))
	require.NoError(t, err)
	f := &walFixture{HeartbeatFixture: persistencetest.NewHeartbeatFixture(t, s, 200), version: 1}
	return s, f, func() {
		ws := make([]*persistence.ExecutionWrite, 0, len(f.Workers))
		for _, k := range f.Workers {
			ws = append(ws, f.Heartbeat(k, f.version))
		}
		results, err := s.WriteBatch(context.Background(), ws)
		require.NoError(t, err)
		for _, err := range results {
			require.NoError(t, err)
		}
		f.version++
	}
}

type walFixture struct {
	*persistencetest.HeartbeatFixture
	version int64 // of the next write round
}

// RequireLastVersions checks that nothing written is lost: every worker has its last heartbeat.
func (f *walFixture) RequireLastVersions(t *testing.T, s *Store) {
	t.Helper()
	for _, k := range f.Workers {
		rec, err := s.GetExecution(context.Background(), persistencetest.HeartbeatShard, k)
		require.NoError(t, err)
		require.EqualValues(t, f.version, rec.DBVersion)
	}
}

// checkpointUntilCaughtUp runs checkpoint rounds, as the loop does, until one is not behind.
func checkpointUntilCaughtUp(t *testing.T, s *Store) {
	t.Helper()
	for range 100 {
		behind, err := s.checkpoints.checkpoint(context.Background())
		require.NoError(t, err)
		if !behind {
			return
		}
	}
	t.Fatal("the checkpoints never caught up without writes")
}
