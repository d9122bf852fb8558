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
type checkpointer struct {
	db       *sql.DB
	interval time.Duration
	logger   *zap.Logger
	stop     chan struct{}
	done     chan struct{}
	// rounds and frames count the checkpoints that copied something and the WAL frames they
	// copied, for tests and the log.
	rounds, frames atomic.Int64
}

func startCheckpointer(db *sql.DB, interval time.Duration, logger *zap.Logger) *checkpointer {
	c := &checkpointer{db: db, interval: interval, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
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
	return nil
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
