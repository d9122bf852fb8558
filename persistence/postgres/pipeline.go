package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

// The pipelined path's statements, besides the ones it shares with the write-by-write path.
const (
	qBegin    = `BEGIN`
	qCommit   = `COMMIT`
	qRollback = `ROLLBACK`
	// qLockShards locks the row of every shard the batch writes to, in one statement. Shard
	// rows are only ever locked FOR SHARE by writers, so the order does not matter for
	// deadlocks; ORDER BY keeps it stable anyway.
	qLockShards = `SELECT shard_id, range_id FROM shards WHERE shard_id = ANY($1) ORDER BY shard_id FOR SHARE`
)

// errFallBack says the pipelined attempt found a check that failed, or a statement that a
// single write made fail; its transaction was rolled back and the batch must run write by
// write.
var errFallBack = errors.New("a write failed a check; running the batch write by write")

// writeBatchPipelined tries the whole batch in one round trip: BEGIN, the shard locks and
// every write's statements go in one pipeline, without savepoints, and the checks are made on
// the answers. If all pass, a second round trip commits. If any fails, the transaction is
// rolled back and errFallBack returned, with nothing applied: the caller then runs the batch
// write by write, which gives each failure its precise error and keeps the other writes.
//
// Malformed writes get their error in results and are left out of the pipeline.
//
// Fencing is the same as write by write: the shard rows are locked FOR SHARE before any
// write's statement runs (the lock is the pipeline's first statement after BEGIN), and stay
// locked until COMMIT. A write whose RangeID is not the stored one has run inside the
// pipeline by then, but the check on the answer rolls it back before anything commits.
func (s *Store) writeBatchPipelined(ctx context.Context, conn *pgxpool.Conn, writes []*persistence.ExecutionWrite, results []error) error {
	p := pipeline{writes: writes, results: results}
	shards := make([]int32, 0, 1)
	for i, w := range writes {
		if err := sqlcommon.ValidateWrite("postgres", w, storableText); err != nil {
			results[i] = err
			continue
		}
		if !slices.Contains(shards, w.ShardID) {
			shards = append(shards, w.ShardID)
		}
	}
	if len(shards) == 0 {
		return nil // every write was malformed
	}

	pb := &pgx.Batch{}
	pb.Queue(qBegin)
	stored := make(map[int32]int64, len(shards))
	pb.Queue(qLockShards, shards).Query(func(rows pgx.Rows) error {
		var shardID int32
		var rangeID int64
		_, err := pgx.ForEachRow(rows, []any{&shardID, &rangeID}, func() error {
			stored[shardID] = rangeID
			return nil
		})
		return err
	})
	p.changed = make([]int64, len(writes))
	for i, w := range writes {
		if results[i] != nil {
			continue
		}
		p.queue(pb, i, w)
	}

	err := conn.SendBatch(ctx, pb).Close()
	if err != nil {
		if _, ok := statementError(err); !ok {
			// The connection, the context or the server failed: the batch fails as a whole.
			// The pool discards a connection left inside a transaction.
			return fmt.Errorf("pipeline: %w", err)
		}
		// A statement failed the way a single write can make it fail (bad data, a constraint,
		// a lost race): the transaction is aborted, and write by write finds out which.
		return s.rollBack(ctx, conn)
	}
	for i, w := range writes {
		if results[i] != nil {
			continue
		}
		// A shard without a row was never acquired: no range_id can match it (a missing key
		// reads as 0, as on the write-by-write path).
		if stored[w.ShardID] != w.RangeID || p.changed[i] == 0 {
			return s.rollBack(ctx, conn)
		}
	}
	if s.testHooks.afterFence != nil {
		for _, shardID := range shards {
			s.testHooks.afterFence(shardID)
		}
	}
	ct, err := conn.Exec(ctx, qCommit)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if ct.String() != qCommit {
		// PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK, not an error.
		return fmt.Errorf("commit: the transaction was rolled back (%s)", ct.String())
	}
	return nil
}

// rollBack ends a pipelined attempt whose check failed and asks for the write-by-write path.
func (s *Store) rollBack(ctx context.Context, conn *pgxpool.Conn) error {
	// Without arguments, Exec uses the simple protocol, which an aborted transaction accepts.
	if _, err := conn.Exec(ctx, qRollback); err != nil {
		return fmt.Errorf("roll back pipelined attempt: %w", err)
	}
	return errFallBack
}

// pipeline is the state of one pipelined attempt.
type pipeline struct {
	writes  []*persistence.ExecutionWrite
	results []error
	// changed[i] is the row count of write i's conditional statement: the claim of the
	// business ID for a create, the UPDATE or DELETE conditional on db_version otherwise. It
	// must be 1.
	changed []int64
}

// queue appends write i's statements: the same as the write-by-write path's, without the
// savepoint and without the reads that only explain a failure.
func (p *pipeline) queue(pb *pgx.Batch, i int, w *persistence.ExecutionWrite) {
	k := w.Key
	changed := &p.changed[i]
	switch w.Mode {
	case persistence.WriteModeCreate:
		// A run that exists already fails the insert (its primary key); a business ID held by
		// another run than the expected one fails the claim.
		if w.ExpectedCurrentRunID == "" {
			pb.Queue(qClaimFreeCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle).
				Exec(rowsAffected(changed))
		} else {
			pb.Queue(qTakeOverCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle,
				w.ExpectedCurrentRunID).Exec(rowsAffected(changed))
		}
		pb.Queue(qInsertExecution, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID,
			w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue)
	case persistence.WriteModeUpdate:
		pb.Queue(qUpdateExecution,
			w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue,
			k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion).
			Exec(rowsAffected(changed))
		// A writer that says the lifecycle did not change saves keeping the current row in step.
		if w.PrevLifecycle == nil || *w.PrevLifecycle != w.Lifecycle {
			pb.Queue(qUpdateCurrentLifecycle, w.Lifecycle, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID)
		}
	default: // ValidateWrite admits no other mode
		queueDelete(pb, w, changed)
		return
	}
	queueCollections(pb, w)
	queueTasks(pb, w)
}
