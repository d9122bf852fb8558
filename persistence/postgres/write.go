package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

// The write path's statements. pgx prepares each once per connection and caches it.
const (
	qSavepoint           = `SAVEPOINT execution_write`
	qRollbackToSavepoint = `ROLLBACK TO SAVEPOINT execution_write`
	qReleaseSavepoint    = `RELEASE SAVEPOINT execution_write`
	qLockShard           = `SELECT range_id FROM shards WHERE shard_id = $1 FOR SHARE`
	qReadExecutionExists = `SELECT db_version FROM executions
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4`
	qReadCurrent = `SELECT run_id, lifecycle FROM current_executions
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3`
	// A create takes the business ID with a conditional write rather than a read and an upsert:
	// a concurrent create of another run waits on the row (or its unique key) and then finds
	// it taken, instead of both passing the read and the later overwriting the earlier.
	qClaimFreeCurrent = `INSERT INTO current_executions (namespace_id, archetype_id, business_id, shard_id, run_id, lifecycle)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (namespace_id, archetype_id, business_id) DO NOTHING`
	qTakeOverCurrent = `UPDATE current_executions SET shard_id = $4, run_id = $5, lifecycle = $6
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $7`
	qInsertExecution = `INSERT INTO executions (namespace_id, archetype_id, business_id, run_id, shard_id,
		db_version, lifecycle, state, idx_status, idx_task_queue)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	qUpdateExecution = `UPDATE executions
		SET db_version = $1, lifecycle = $2, state = $3, idx_status = $4, idx_task_queue = $5
		WHERE namespace_id = $6 AND archetype_id = $7 AND business_id = $8 AND run_id = $9
		AND shard_id = $10 AND db_version = $11`
	qUpdateCurrentLifecycle = `UPDATE current_executions SET lifecycle = $1
		WHERE namespace_id = $2 AND archetype_id = $3 AND business_id = $4 AND run_id = $5 AND lifecycle <> $1`
	qDeleteExecution = `DELETE FROM executions
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4
		AND shard_id = $5 AND db_version = $6`
	qDeleteExecutionCollections = `DELETE FROM collection_entries
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4`
	qDeleteExecutionTimers = `DELETE FROM timer_tasks
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4`
	qDeleteExecutionOutbound = `DELETE FROM outbound_tasks
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4`
	qDeleteCurrentOfRun = `DELETE FROM current_executions
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4`
	qReadExecutionVersion = `SELECT db_version FROM executions
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4 AND shard_id = $5`
	qPutCollectionEntry = `INSERT INTO collection_entries (namespace_id, archetype_id, business_id, run_id, collection, entry_key, value)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
		DO UPDATE SET value = excluded.value`
	qDeleteCollectionEntry = `DELETE FROM collection_entries
		WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4
		AND collection = $5 AND entry_key = $6`
	qInsertTimerTask = `INSERT INTO timer_tasks (shard_id, visibility_time, task_id, namespace_id, archetype_id,
		business_id, run_id, task_type_id, singleton, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false, $9)`
	// A singleton replaces the stored one of its execution and type in place: the upsert's
	// arbiter is the partial unique index timer_tasks_singleton.
	qUpsertSingletonTimerTask = `INSERT INTO timer_tasks (shard_id, visibility_time, task_id, namespace_id, archetype_id,
		business_id, run_id, task_type_id, singleton, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, true, $9)
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id, task_type_id) WHERE singleton
		DO UPDATE SET shard_id = excluded.shard_id, visibility_time = excluded.visibility_time,
			task_id = excluded.task_id, payload = excluded.payload`
	qInsertOutboundTask = `INSERT INTO outbound_tasks (shard_id, task_id, destination, namespace_id, archetype_id,
		business_id, run_id, task_type_id, payload, created_time)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
)

// MaxConcurrentBatches implements persistence.ConcurrentBatchWriter: each WriteBatch is its own
// transaction on its own connection of the write pool, so the group committer may run as many
// at once as the pool has connections (the next batch's pipeline then overlaps the previous
// batch's COMMIT).
func (s *Store) MaxConcurrentBatches() int { return writeConns }

// WriteBatch implements persistence.ExecutionStore.
//
// All writes share one transaction, so one commit and one WAL flush. A write that fails a check
// (range_id fence, db version, existing run, current run), violates a constraint, carries data
// PostgreSQL refuses, or loses a deadlock leaves no trace and its error goes to results[i]; the
// others commit. Any other error (a lost connection, ctx cancellation, a timeout) aborts the
// transaction, and the batch fails as a whole.
//
// A batch first runs pipelined (writeBatchPipelined): every statement of every write is sent
// in one round trip, without savepoints, and a second round trip commits. If a write's shard
// turns out to be owned by another host, that write is refused and the rest tried pipelined
// once more. If any other check fails, the transaction is rolled back and the batch run again
// write by write (writeBatchBySavepoints), where each write has its own SAVEPOINT and a
// failure is undone alone. Checks fail rarely (a lost race, a duplicate), so a batch usually
// costs two round trips whatever its size.
func (s *Store) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	results := make([]error, len(writes))
	if len(writes) == 0 {
		return results, nil
	}
	err := s.writePool.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
		err := errFallBack
		if !s.testHooks.writeByWrite {
			err = s.writeBatchPipelined(ctx, conn, writes, results)
			if errors.Is(err, errFenced) {
				err = s.writeBatchPipelined(ctx, conn, writes, results)
			}
			if errors.Is(err, errFenced) {
				err = errFallBack // another acquisition in between: no more tries
			}
		}
		if !errors.Is(err, errFallBack) {
			return err
		}
		if s.testHooks.fellBack != nil && !s.testHooks.writeByWrite {
			s.testHooks.fellBack()
		}
		clear(results)
		return s.writeBatchBySavepoints(ctx, conn, writes, results)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: write batch: %w", err)
	}
	return results, nil
}

// writeBatchBySavepoints runs a batch write by write, each write inside its own SAVEPOINT: a
// write that fails is rolled back to its savepoint, which undoes exactly its own statements,
// and its error goes to results[i].
//
// Round trips: a write's statements are pipelined (sent together, answered together) and its
// checks are made on the answers, so a write costs one round trip when it succeeds and two
// when it fails. Statements after a failed check have run by then; rolling back to the
// savepoint undoes them.
func (s *Store) writeBatchBySavepoints(ctx context.Context, conn *pgxpool.Conn, writes []*persistence.ExecutionWrite, results []error) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		b := batch{ctx: ctx, tx: tx, hooks: &s.testHooks, rangeIDs: make(map[int32]int64, 1)}
		// COMMIT releases the last write's savepoint.
		return sqlcommon.ApplyWrites(writes, results, b.apply)
	})
}

// batch is the state of one WriteBatch transaction.
type batch struct {
	ctx   context.Context
	tx    pgx.Tx
	hooks *testHooks
	// rangeIDs caches each shard's stored range_id for the transaction. It cannot change
	// under us: the transaction holds the shard's row FOR SHARE, and AcquireShard must update
	// that row.
	rangeIDs map[int32]int64
	// savepointOpen says the previous write succeeded and its savepoint is still open. The
	// next round trip releases it first, which saves a round trip per write.
	savepointOpen bool
}

func (b *batch) send(pb *pgx.Batch) error {
	return b.tx.SendBatch(b.ctx, pb).Close()
}

// newPipeline returns a pipeline that first closes the previous write's savepoint.
func (b *batch) newPipeline() *pgx.Batch {
	pb := &pgx.Batch{}
	if b.savepointOpen {
		pb.Queue(qReleaseSavepoint)
	}
	return pb
}

// apply runs one write. writeErr is the write's own failure (the batch goes on); err is a
// database failure that must abort the batch.
func (b *batch) apply(w *persistence.ExecutionWrite) (writeErr, err error) {
	if err := sqlcommon.ValidateWrite("postgres", w, storableText); err != nil {
		return err, nil
	}
	if writeErr, err := b.checkRangeID(w.ShardID, w.RangeID); writeErr != nil || err != nil {
		return writeErr, err
	}
	switch w.Mode {
	case persistence.WriteModeCreate:
		return b.create(w)
	case persistence.WriteModeUpdate:
		return b.update(w)
	default: // ValidateWrite admits no other mode
		return b.delete(w)
	}
}

// checkRangeID fences a write. The shard's row is locked outside any write's savepoint: a
// lock taken inside one would be dropped if that write rolled back, and AcquireShard could
// then slip in under the writes that follow it in the batch.
func (b *batch) checkRangeID(shardID int32, rangeID int64) (writeErr, err error) {
	stored, ok := b.rangeIDs[shardID]
	if !ok {
		pb := b.newPipeline()
		pb.Queue(qLockShard, shardID).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&stored)
			if errors.Is(err, pgx.ErrNoRows) {
				stored = 0 // never acquired: no range_id can match
				return nil
			}
			return err
		})
		if err := b.send(pb); err != nil {
			return nil, fmt.Errorf("lock shard %d: %w", shardID, err)
		}
		b.savepointOpen = false
		b.rangeIDs[shardID] = stored
		if b.hooks.afterFence != nil {
			b.hooks.afterFence(shardID)
		}
	}
	if stored != rangeID {
		return &persistence.ShardOwnershipLostError{ShardID: shardID, RangeID: rangeID, StoredRangeID: stored}, nil
	}
	return nil, nil
}

// openWrite returns the pipeline of a write: it opens the write's savepoint.
func (b *batch) openWrite() *pgx.Batch {
	pb := b.newPipeline()
	pb.Queue(qSavepoint)
	return pb
}

// sendWrite sends a write's pipeline. It returns the server's error for a statement that
// failed the write alone (stmtErr), or an error that must abort the batch (err). Either way
// the previous write's savepoint was released: it came first in the pipeline.
func (b *batch) sendWrite(pb *pgx.Batch) (stmtErr *pgconn.PgError, err error) {
	err = b.send(pb)
	if err == nil {
		b.savepointOpen = true
		return nil, nil
	}
	if pgErr, ok := statementError(err); ok {
		b.savepointOpen = false
		return pgErr, nil
	}
	return nil, err
}

// rollbackWrite undoes the write's statements and closes its savepoint. Reads queued by
// explain run after it, to say why the write failed.
func (b *batch) rollbackWrite(explain func(pb *pgx.Batch)) error {
	// Without arguments, Exec uses the simple protocol, so the statements need no preparing,
	// which a transaction aborted by the write's failure would refuse.
	if _, err := b.tx.Exec(b.ctx, qRollbackToSavepoint+"; "+qReleaseSavepoint); err != nil {
		return fmt.Errorf("roll back write: %w", err)
	}
	b.savepointOpen = false
	if explain == nil {
		return nil
	}
	pb := &pgx.Batch{}
	explain(pb)
	if err := b.send(pb); err != nil {
		return fmt.Errorf("read why the write failed: %w", err)
	}
	return nil
}

func keyArgs(k persistence.ExecutionKey) []any {
	return []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID}
}

func (b *batch) create(w *persistence.ExecutionWrite) (writeErr, err error) {
	k := w.Key
	pb := b.openWrite()
	exists := false
	pb.Queue(qReadExecutionExists, keyArgs(k)...).QueryRow(scanExists(&exists))
	claimed := int64(-1)
	if w.ExpectedCurrentRunID == "" {
		pb.Queue(qClaimFreeCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle).
			Exec(rowsAffected(&claimed))
	} else {
		pb.Queue(qTakeOverCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle,
			w.ExpectedCurrentRunID).Exec(rowsAffected(&claimed))
	}
	pb.Queue(qInsertExecution, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID,
		w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue)
	queueVisibility(pb, w)
	queueCollections(pb, w)
	queueTasks(pb, w)

	stmtErr, err := b.sendWrite(pb)
	if err != nil {
		return nil, err
	}
	if exists {
		if err := b.rollbackWrite(nil); err != nil {
			return nil, err
		}
		return &persistence.ExecutionAlreadyExistsError{Key: k}, nil
	}
	if claimed == 0 || (stmtErr != nil && stmtErr.ConstraintName == executionsPrimaryKey) {
		// Lost the business ID, or the run itself, to a batch that committed after our read.
		// Read both again: if the run now exists, it is the error a serial order would give.
		var current persistence.CurrentExecution
		err := b.rollbackWrite(func(pb *pgx.Batch) {
			pb.Queue(qReadExecutionExists, keyArgs(k)...).QueryRow(scanExists(&exists))
			pb.Queue(qReadCurrent, k.NamespaceID, k.ArchetypeID, k.BusinessID).QueryRow(func(row pgx.Row) error {
				err := row.Scan(&current.RunID, &current.Lifecycle)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return err
			})
		})
		if err != nil {
			return nil, err
		}
		if exists {
			return &persistence.ExecutionAlreadyExistsError{Key: k}, nil
		}
		return &persistence.CurrentExecutionConflictError{
			Key: k.CurrentKey(), CurrentRunID: current.RunID, Lifecycle: current.Lifecycle,
		}, nil
	}
	if stmtErr != nil {
		if err := b.rollbackWrite(nil); err != nil {
			return nil, err
		}
		return fmt.Errorf("postgres: write shard %d, execution %s: %w", w.ShardID, sqlcommon.KeyString(k), stmtErr), nil
	}
	return nil, nil
}

func (b *batch) update(w *persistence.ExecutionWrite) (writeErr, err error) {
	k := w.Key
	pb := b.openWrite()
	changed := int64(-1)
	pb.Queue(qUpdateExecution,
		w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue,
		k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion).
		Exec(rowsAffected(&changed))
	// Keep the current row's lifecycle in step, so ID-reuse decisions need not read the run.
	// The lifecycle <> $1 guard makes the usual case (no lifecycle change) a read, not a write.
	pb.Queue(qUpdateCurrentLifecycle, w.Lifecycle, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID)
	queueVisibility(pb, w)
	queueCollections(pb, w)
	queueTasks(pb, w)
	return b.finishConditionalWrite(w, pb, &changed)
}

func (b *batch) delete(w *persistence.ExecutionWrite) (writeErr, err error) {
	pb := b.openWrite()
	deleted := int64(-1)
	queueDelete(pb, w, &deleted)
	return b.finishConditionalWrite(w, pb, &deleted)
}

// queueDelete queues a delete's statements; *deleted gets the row count of the first, the
// DELETE conditional on db_version.
func queueDelete(pb *pgx.Batch, w *persistence.ExecutionWrite, deleted *int64) {
	k := w.Key
	pb.Queue(qDeleteExecution, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion).
		Exec(rowsAffected(deleted))
	pb.Queue(qDeleteExecutionCollections, keyArgs(k)...)
	pb.Queue(qDeleteExecutionTimers, keyArgs(k)...)
	pb.Queue(qDeleteExecutionOutbound, keyArgs(k)...)
	// Only if it still points at this run: a newer run of the business ID keeps its row.
	pb.Queue(qDeleteCurrentOfRun, keyArgs(k)...)
	for _, st := range sqlcommon.VisibilityDeleteStmts(k) {
		pb.Queue(dollar(st.SQL), st.Args...)
	}
}

// queueVisibility queues the statements that store a create's or an update's visibility
// record, if it carries one.
func queueVisibility(pb *pgx.Batch, w *persistence.ExecutionWrite) {
	if w.Visibility == nil {
		return
	}
	for _, st := range sqlcommon.VisibilityWriteStmts(w) {
		pb.Queue(dollar(st.SQL), st.Args...)
	}
}

// dollarCache holds the renumbered text of the statements whose text never varies.
var dollarCache = func() map[string]string {
	m := make(map[string]string, len(sqlcommon.VisibilityFixedSQL))
	for _, q := range sqlcommon.VisibilityFixedSQL {
		m[q] = sqlcommon.Dollar(q)
	}
	return m
}()

// dollar renumbers a statement compiled with "?" placeholders for PostgreSQL.
func dollar(q string) string {
	if d, ok := dollarCache[q]; ok {
		return d
	}
	return sqlcommon.Dollar(q)
}

// finishConditionalWrite sends an update's or delete's pipeline, whose first statement after
// the savepoint is the UPDATE/DELETE conditional on db_version, and turns the outcome into the
// write's result. *changed is that statement's row count once the pipeline ran, -1 if it
// failed.
func (b *batch) finishConditionalWrite(w *persistence.ExecutionWrite, pb *pgx.Batch, changed *int64) (writeErr, err error) {
	stmtErr, err := b.sendWrite(pb)
	switch {
	case err != nil:
		return nil, err
	case *changed == 0:
		return b.explainConditionFailure(w, nil)
	case stmtErr != nil && isConcurrencyConflict(stmtErr):
		// A deadlock is a race on the execution: report it as the condition failing, which
		// callers already handle by re-reading and retrying.
		return b.explainConditionFailure(w, stmtErr)
	case stmtErr != nil:
		if err := b.rollbackWrite(nil); err != nil {
			return nil, err
		}
		return fmt.Errorf("postgres: write shard %d, execution %s: %w", w.ShardID, sqlcommon.KeyString(w.Key), stmtErr), nil
	}
	return nil, nil
}

// explainConditionFailure rolls back a conditional write that changed nothing and finds the
// reason: the run is missing (*NotFoundError) or its version moved (*ConditionFailedError).
func (b *batch) explainConditionFailure(w *persistence.ExecutionWrite, cause *pgconn.PgError) (writeErr, err error) {
	k := w.Key
	var actual int64
	found := false
	err = b.rollbackWrite(func(pb *pgx.Batch) {
		pb.Queue(qReadExecutionVersion, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID).
			QueryRow(func(row pgx.Row) error {
				err := row.Scan(&actual)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				found = err == nil
				return err
			})
	})
	if err != nil {
		return nil, err
	}
	if !found {
		writeErr = &persistence.NotFoundError{Msg: fmt.Sprintf("execution %s not found in shard %d", sqlcommon.KeyString(k), w.ShardID)}
	} else {
		writeErr = &persistence.ConditionFailedError{Key: k, ExpectedVersion: w.PrevDBVersion, ActualVersion: actual}
	}
	if cause != nil {
		return fmt.Errorf("postgres: write shard %d, execution %s lost a race with a concurrent transaction (%s): %w",
			w.ShardID, sqlcommon.KeyString(k), cause.Message, writeErr), nil
	}
	return writeErr, nil
}

func queueCollections(pb *pgx.Batch, w *persistence.ExecutionWrite) {
	k := w.Key
	for _, e := range w.CollectionPuts {
		pb.Queue(qPutCollectionEntry, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, e.Collection, e.Key, sqlcommon.NonNil(e.Value))
	}
	for _, d := range w.CollectionDeletes {
		pb.Queue(qDeleteCollectionEntry, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, d.Collection, d.Key)
	}
}

func queueTasks(pb *pgx.Batch, w *persistence.ExecutionWrite) {
	for _, t := range w.TimerTasks {
		e := t.Execution
		vis, _ := sqlcommon.TimeToNanos(t.VisibilityTime) // range checked by ValidateWrite
		q := qInsertTimerTask
		if t.Singleton {
			q = qUpsertSingletonTimerTask
		}
		pb.Queue(q, w.ShardID, vis, t.TaskID, e.NamespaceID, e.ArchetypeID, e.BusinessID, e.RunID, t.TaskTypeID, sqlcommon.NonNil(t.Payload))
	}
	queueOutboundTasks(pb, w)
}

func queueOutboundTasks(pb *pgx.Batch, w *persistence.ExecutionWrite) {
	for _, t := range w.OutboundTasks {
		e := t.Execution
		var created *int64
		if !t.CreatedTime.IsZero() {
			n, _ := sqlcommon.TimeToNanos(t.CreatedTime) // range checked by ValidateWrite
			created = &n
		}
		pb.Queue(qInsertOutboundTask, w.ShardID, t.TaskID, t.Destination, e.NamespaceID, e.ArchetypeID, e.BusinessID, e.RunID,
			t.TaskTypeID, sqlcommon.NonNil(t.Payload), created)
	}
}

func rowsAffected(n *int64) func(pgconn.CommandTag) error {
	return func(ct pgconn.CommandTag) error {
		*n = ct.RowsAffected()
		return nil
	}
}

func scanExists(exists *bool) func(pgx.Row) error {
	return func(row pgx.Row) error {
		var version int64
		err := row.Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			*exists = false
			return nil
		}
		*exists = err == nil
		return err
	}
}

// storableText reports whether every s fits a TEXT column of a UTF-8 database. SQLite would
// store any bytes; PostgreSQL refuses invalid UTF-8 and NUL.
func storableText(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}
