package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// CheckpointIntervalDefault is how often the checkpointer copies committed WAL frames into the
// database file when Config.CheckpointInterval is zero.
const CheckpointIntervalDefault = 100 * time.Millisecond

// WALSizeLimitDefault is Config.WALSizeLimit's default: 64 MiB, about a second of WAL at
// the heaviest heartbeat load measured.
const WALSizeLimitDefault = 64 << 20

// walFrames is how many WAL frames (a 4 KiB page and its 24-byte header) make size bytes.
func walFrames(size int64) int64 { return max(1, size/(4096+24)) }

// checkpointer copies the WAL into the database file from a connection of its own, so that the
// write connection only ever appends to the WAL and fsyncs it.
//
// SQLite's default (wal_autocheckpoint=1000) runs the checkpoint inside the commit that crosses
// 1,000 WAL pages, on the committing connection: that commit then also copies every page to
// the database file and fsyncs it. Under a heartbeat load this was 45 % of the group
// committer's time (BenchmarkGroupCommitFleet; a server profile under overload showed 1.1 s of
// 2.5 s of commit CPU in the checkpoint), and every heartbeat in the next batch waited for it.
// A PASSIVE checkpoint on another connection runs beside the writer (SQLite allows one
// checkpointer and one writer at once): it takes no write lock and never waits for one.
//
// Durability does not change: a commit is acknowledged after its WAL fsync, as before; the
// checkpoint's own fsync of the database file orders the copy before the WAL is reused.
//
// The WAL starts over from its beginning only when a write transaction begins while every
// frame has been copied. Beside a writer that never pauses, a checkpoint never finishes
// before the next commit appends, so the WAL would grow without end (2 GB after a
// 20,000-worker run). Once it holds more than restartFrames, the checkpointer asks the write
// path (restartWanted) to run one PASSIVE checkpoint on the write connection before its next
// transaction: with the writer waiting, that copies the few frames the background
// checkpoints left, and the transaction that follows starts the WAL over (cut back to
// journal_size_limit). The writer waits for one short copy and one fsync of the database
// file, every WALSizeLimit of writes; a reader holding an old snapshot only postpones it.
type checkpointer struct {
	db       *sql.DB
	interval time.Duration
	logger   *zap.Logger
	stop     chan struct{}
	done     chan struct{}
	// restartFrames is the WAL size, in frames, beyond which restartWanted is set.
	restartFrames int64
	restartWanted atomic.Bool
	// rounds and frames count the checkpoints that copied something and the WAL frames they
	// copied, and restarts the checkpoints the write path ran, for tests and the log.
	rounds, frames, restarts atomic.Int64
}

func startCheckpointer(db *sql.DB, interval time.Duration, restartFrames int64, logger *zap.Logger) *checkpointer {
	c := &checkpointer{db: db, interval: interval, restartFrames: restartFrames, logger: logger,
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *checkpointer) loop() {
	defer close(c.done)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		err := c.checkpoint(context.Background())
		switch {
		case err != nil && !failing:
			// Not fatal: the WAL grows until a checkpoint succeeds, and reads stay correct.
			c.logger.Warn("sqlite WAL checkpoint failed; the WAL grows until one succeeds", zap.Error(err))
			failing = true
		case err == nil && failing:
			c.logger.Info("sqlite WAL checkpoints succeed again")
			failing = false
		}
	}
}

// checkpoint runs one PASSIVE checkpoint: it copies what no reader still needs and returns.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	var busy, logFrames, copied int64
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied); err != nil {
		return fmt.Errorf("wal_checkpoint: %w", err)
	}
	if copied > 0 {
		c.rounds.Add(1)
		c.frames.Add(copied)
	}
	if logFrames >= c.restartFrames && copied < logFrames {
		c.restartWanted.Store(true)
	}
	return nil
}

// letWALRestart runs a PASSIVE checkpoint on the write connection, which no write
// transaction holds meanwhile, so that the next one starts the WAL over. A failure is only
// logged: the WAL grows a little longer, and the next checkpoint asks again.
func (s *Store) letWALRestart(ctx context.Context) {
	var busy, logFrames, copied int64
	if err := s.writeDB.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied); err != nil {
		s.logger.Debug("sqlite: checkpoint before the WAL restart failed", zap.Error(err))
		return
	}
	s.checkpoints.restarts.Add(1)
}

// close stops the loop and closes the connection.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}

func checkpointDSN(cfg Config) string {
	return cfg.Path + "?" + checkpointQuery(cfg)
}
