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

// restartFrames ÷ restartBacklogShare is the most WAL frames the write path is left to copy
// before a restart (16 MiB at the default limit), and walCapFactor × restartFrames the WAL
// size past which it copies whatever is left.
const (
	restartBacklogShare = 4
	walCapFactor        = 8
)

// walFrames is how many WAL frames (a 4 KiB page and its 24-byte header) make size bytes.
func walFrames(size int64) int64 { return max(1, size/(4096+24)) }

// checkpointer copies the WAL into the database file from a connection of its own, so that the
// write connection only ever appends to the WAL and fsyncs it.
//
// SQLite's default (wal_autocheckpoint=1000) runs the checkpoint inside the commit that crosses
// 1,000 WAL pages, on the committing connection: that commit then also copies every page to
// the database file and fsyncs it. Under a heartbeat load that is a large share of the group
// committer's time (BenchmarkGroupCommitFleet shows it), and every heartbeat in the next batch
// waited for it.
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
// transaction: with the writer waiting, that copies the frames the background checkpoints
// left, and the transaction that follows starts the WAL over (cut back to
// journal_size_limit).
//
// It asks only once the background checkpoints have caught up: when its last round copied
// at most restartBacklog frames, and no more than that is left behind readers, the write
// path has that little to copy too. While the checkpointer is behind (creates and heartbeats
// together outwrote it) the WAL grows instead: before, the write path was asked anyway, copied
// hundreds of megabytes and every commit stalled for seconds in a large fleet's start. Past
// capFrames (eight times the limit) it asks whatever is left, so
// that the file stays bounded when the checkpointer never catches up.
type checkpointer struct {
	db       *sql.DB
	interval time.Duration
	logger   *zap.Logger
	stop     chan struct{}
	done     chan struct{}
	// restartFrames is the WAL size, in frames, beyond which restartWanted is set once the
	// checkpoints have caught up to within restartBacklog frames, and capFrames the size
	// beyond which it is set regardless.
	restartFrames, restartBacklog, capFrames int64
	// backfilled is the WAL frames copied as of the last round, to tell what a round copied,
	// and capped is set while the WAL is past capFrames, for one log line each time: both
	// only the loop's rounds touch.
	backfilled    int64
	capped        bool
	restartWanted atomic.Bool
	// rounds and frames count the checkpoints that copied something and the WAL frames they
	// copied, and restarts the checkpoints the write path ran, for tests and the log.
	rounds, frames, restarts atomic.Int64
	// walFrames and walCopied are the WAL's length and the frames of it in the database file,
	// as of the last round, for WAL.
	walFrames, walCopied atomic.Int64
}

func startCheckpointer(db *sql.DB, interval time.Duration, restartFrames int64, logger *zap.Logger) *checkpointer {
	c := &checkpointer{db: db, interval: interval, logger: logger,
		restartFrames: restartFrames, restartBacklog: max(1, restartFrames/restartBacklogShare),
		capFrames: restartFrames * walCapFactor,
		stop:      make(chan struct{}), done: make(chan struct{})}
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
		_, err := c.checkpoint(context.Background())
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

// checkpoint runs one PASSIVE checkpoint: it copies what no reader still needs and returns,
// and says whether the checkpoints are behind the writer (this round copied more than
// restartBacklog frames).
func (c *checkpointer) checkpoint(ctx context.Context) (behind bool, err error) {
	var busy, logFrames, copied int64
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied); err != nil {
		return false, fmt.Errorf("wal_checkpoint: %w", err)
	}
	c.walFrames.Store(logFrames)
	c.walCopied.Store(copied)
	round := copied - c.backfilled
	if round < 0 {
		round = copied // the WAL started over since the last round
	}
	c.backfilled = copied
	if round > 0 {
		c.rounds.Add(1)
		c.frames.Add(round)
	}
	behind = round > c.restartBacklog
	if c.wantRestart(logFrames, copied, behind) {
		c.restartWanted.Store(true)
	}
	return behind, nil
}

// wantRestart says whether the write path should finish the checkpoint so that the WAL starts
// over: it holds logFrames frames, of which copied are in the database file, and the last
// round copied more than restartBacklog of them if behind.
func (c *checkpointer) wantRestart(logFrames, copied int64, behind bool) bool {
	if logFrames < c.restartFrames {
		c.capped = false // it started over: the next episode over the cap is logged again
		return false
	}
	if logFrames >= c.capFrames {
		if !c.capped {
			c.capped = true
			c.logger.Warn("sqlite WAL passed its cap with the checkpointer behind; the write path copies what is left",
				zap.Int64("wal_frames", logFrames), zap.Int64("left_frames", logFrames-copied))
		}
		return true
	}
	return !behind && logFrames-copied <= c.restartBacklog
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

// WALStats is the WAL as the background checkpointer last saw it (every
// CheckpointInterval).
type WALStats struct {
	// Frames is the WAL's length in frames (a 4 KiB page and its header each); Backlog is how
	// many of them are not in the database file yet. A backlog that keeps growing is a
	// checkpointer outwritten by the write path: every read then looks further into the WAL,
	// and the WAL cannot start over.
	Frames, Backlog int64
	// Restarts counts the times the write path let the WAL start over.
	Restarts int64
}

// WAL returns the WAL as of the checkpointer's last round; zero when checkpoints are left to
// SQLite (a negative CheckpointInterval).
func (s *Store) WAL() WALStats {
	c := s.checkpoints
	if c == nil {
		return WALStats{}
	}
	frames := c.walFrames.Load()
	return WALStats{Frames: frames, Backlog: max(0, frames-c.walCopied.Load()), Restarts: c.restarts.Load()}
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
