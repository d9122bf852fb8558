package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

// The write path's statements. Each is prepared once on the write connection at Open and
// reused by every transaction: parsing and planning would otherwise cost more than executing.
var (
	qSavepoint           = writeQuery(`SAVEPOINT execution_write`)
	qRollbackToSavepoint = writeQuery(`ROLLBACK TO SAVEPOINT execution_write`)
	qReleaseSavepoint    = writeQuery(`RELEASE SAVEPOINT execution_write`)
	// The deletes of executed tasks a batch carries run in a savepoint of their own.
	qSavepointTaskDeletes           = writeQuery(`SAVEPOINT task_deletes`)
	qRollbackToSavepointTaskDeletes = writeQuery(`ROLLBACK TO SAVEPOINT task_deletes`)
	qReleaseSavepointTaskDeletes    = writeQuery(`RELEASE SAVEPOINT task_deletes`)
	qReadRangeID                    = writeQuery(`SELECT range_id FROM shards WHERE shard_id = ?`)
	qDataVersion                    = writeQuery(`PRAGMA data_version`)
	qReadExecutionExists            = writeQuery(`SELECT db_version FROM executions
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`)
	qReadCurrent = writeQuery(`SELECT run_id, lifecycle FROM current_executions
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ?`)
	// qInsertExecution inserts nothing when the run exists (RowsAffected 0): a create needs
	// no read of its own run first.
	qInsertExecution = writeQuery(`INSERT INTO executions (namespace_id, archetype_id, business_id, run_id, shard_id,
		db_version, lifecycle, state, idx_status, idx_task_queue)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id) DO NOTHING`)
	qUpsertCurrent = writeQuery(`INSERT INTO current_executions (namespace_id, archetype_id, business_id, shard_id, run_id, lifecycle)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace_id, archetype_id, business_id)
		DO UPDATE SET shard_id = excluded.shard_id, run_id = excluded.run_id, lifecycle = excluded.lifecycle`)
	qUpdateExecution = writeQuery(`UPDATE executions
		SET db_version = ?, lifecycle = ?, state = ?, idx_status = ?, idx_task_queue = ?
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
		AND shard_id = ? AND db_version = ?`)
	// qUpdateExecutionState leaves the indexed columns out of SET: SQLite rewrites the entries
	// of every index whose columns a SET names, changed or not.
	qUpdateExecutionState = writeQuery(`UPDATE executions
		SET db_version = ?, lifecycle = ?, state = ?
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
		AND shard_id = ? AND db_version = ?`)
	qUpdateCurrentLifecycle = writeQuery(`UPDATE current_executions SET lifecycle = ?
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ? AND lifecycle <> ?`)
	qDeleteExecution = writeQuery(`DELETE FROM executions
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
		AND shard_id = ? AND db_version = ?`)
	qDeleteExecutionCollections = writeQuery(`DELETE FROM collection_entries
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`)
	qDeleteExecutionTimers = writeQuery(`DELETE FROM timer_tasks
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`)
	qDeleteExecutionOutbound = writeQuery(`DELETE FROM outbound_tasks
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`)
	qDeleteCurrentOfRun = writeQuery(`DELETE FROM current_executions
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?`)
	qReadExecutionVersion = writeQuery(`SELECT db_version FROM executions
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ? AND shard_id = ?`)
	qPutCollectionEntry = writeQuery(`INSERT INTO collection_entries (namespace_id, archetype_id, business_id, run_id, collection, entry_key, value)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
		DO UPDATE SET value = excluded.value`)
	qDeleteCollectionEntry = writeQuery(`DELETE FROM collection_entries
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
		AND collection = ? AND entry_key = ?`)
	// Chunks of collectionChunk entries go in one statement each, the rest one by one: binding a
	// worker's activities, or dropping them, is then a few statements instead of one per entry.
	qPutCollectionEntries    = writeQuery(putCollectionEntriesSQL(collectionChunk))
	qDeleteCollectionEntries = writeQuery(deleteCollectionEntriesSQL(collectionChunk))
	// qMoveSingletonTimer replaces a singleton timer in place: its row and the two indexes on
	// the execution keep their entries, only the queue's key (shard, time, task ID) and the
	// payload change. A delete and an insert would rewrite the entries of all three indexes.
	qMoveSingletonTimer = writeQuery(`UPDATE timer_tasks
		SET shard_id = ?, visibility_time = ?, task_id = ?, payload = ?
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
		AND task_type_id = ? AND singleton = 1`)
	qInsertTimerTask = writeQuery(`INSERT INTO timer_tasks (shard_id, visibility_time, task_id, namespace_id, archetype_id,
		business_id, run_id, task_type_id, singleton, payload)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	qDeleteTimerTask    = writeQuery(`DELETE FROM timer_tasks WHERE shard_id = ? AND visibility_time = ? AND task_id = ?`)
	qDeleteOutboundTask = writeQuery(`DELETE FROM outbound_tasks WHERE shard_id = ? AND task_id = ?`)
	qInsertOutboundTask = writeQuery(`INSERT INTO outbound_tasks (shard_id, task_id, destination, namespace_id, archetype_id,
		business_id, run_id, task_type_id, payload, created_time)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
)

func init() {
	for _, q := range sqlcommon.VisibilityFixedSQL {
		writeQuery(q)
	}
}

// WriteBatch implements persistence.ExecutionStore.
//
// All writes share one IMMEDIATE transaction, so one commit and one WAL fsync. A write that
// fails a check (range_id fence, db version, existing run, current run) or violates a
// constraint leaves no trace and its error goes to results[i]; the others commit. Any other
// error (I/O, a full disk, ctx cancellation) aborts the transaction, and the batch fails as a
// whole.
//
// Every check a write can fail comes before its first change (applyWrite keeps that order),
// so a batch first runs without savepoints: a heartbeat is then one UPDATE instead of three
// statements. Only a constraint violation can strike a write halfway; that rolls the
// transaction back and the batch runs again with each write in its own SAVEPOINT, which undoes
// exactly the failing write's statements.
func (s *Store) WriteBatch(ctx context.Context, writes []*persistence.ExecutionWrite) ([]error, error) {
	results := make([]error, len(writes))
	if len(writes) == 0 {
		return results, nil
	}
	run := func(savepoints bool) error {
		clear(results)
		var deletes []*taskDelete
		err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
			b := batch{ctx: ctx, tx: tx, stmts: s.writeStmts, fence: &s.fence, savepoints: savepoints}
			if err := sqlcommon.ApplyWrites(writes, results, b.apply); err != nil {
				return err
			}
			deletes = s.carryTaskDeletes(ctx, tx)
			return nil
		})
		if err != nil {
			s.taskDeletes.giveBack(deletes)
			return err
		}
		answer(deletes, nil)
		return nil
	}
	err := run(false)
	if errors.Is(err, errHalfApplied) {
		err = run(true)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: write batch: %w", err)
	}
	return results, nil
}

// errHalfApplied aborts a batch run without savepoints in which a write failed after it had
// changed something.
var errHalfApplied = errors.New("a write failed after its first change; retrying the batch with savepoints")

// batch is the state of one WriteBatch transaction.
type batch struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	// bound are the statements of stmts this transaction ran, bound to it (prepared).
	bound map[string]*sql.Stmt
	// fence holds the shards' stored range_ids; fenceChecked is set once this transaction has
	// made sure it is current (rangeFence.check).
	fence        *rangeFence
	fenceChecked bool
	// savepoints runs each write in its own SAVEPOINT, so a write that fails halfway can be
	// undone alone.
	savepoints bool
}

// writeQueries lists the statements Open prepares on the write connection.
var writeQueries []string

func writeQuery(query string) string {
	writeQueries = append(writeQueries, query)
	return query
}

// prepareWriteStatements prepares every write-path statement on the write connection. It must
// run while no transaction holds that (only) connection.
func prepareWriteStatements(ctx context.Context, db *sql.DB) (map[string]*sql.Stmt, error) {
	stmts := make(map[string]*sql.Stmt, len(writeQueries))
	for _, q := range writeQueries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range stmts {
				_ = st.Close()
			}
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		stmts[q] = st
	}
	return stmts, nil
}

// exec runs a write statement in the batch's transaction, prepared when it is one of
// writeQueries.
func (b *batch) exec(query string, args ...any) (sql.Result, error) {
	if st := b.prepared(query); st != nil {
		return st.ExecContext(b.ctx, args...)
	}
	return b.tx.ExecContext(b.ctx, query, args...)
}

func (b *batch) queryRow(query string, args ...any) *sql.Row {
	if st := b.prepared(query); st != nil {
		return st.QueryRowContext(b.ctx, args...)
	}
	return b.tx.QueryRowContext(b.ctx, query, args...)
}

// prepared returns the statement Open prepared for query, bound to the batch's transaction, or
// nil when query is not one of writeQueries. Tx.StmtContext reuses the statement prepared on
// the write connection, but makes a new binding each time: a batch of heartbeats runs the same
// few statements many times, so it binds each once.
func (b *batch) prepared(query string) *sql.Stmt {
	if st, ok := b.bound[query]; ok {
		return st
	}
	st, ok := b.stmts[query]
	if !ok {
		return nil
	}
	st = b.tx.StmtContext(b.ctx, st)
	if b.bound == nil {
		b.bound = make(map[string]*sql.Stmt)
	}
	b.bound[query] = st
	return st
}

// apply runs one write. writeErr is the write's own failure (the batch goes on); err is a
// database failure that must abort the batch.
func (b *batch) apply(w *persistence.ExecutionWrite) (writeErr, err error) {
	if err := sqlcommon.ValidateWrite("sqlite", w, nil); err != nil {
		return err, nil
	}
	if !b.savepoints {
		writeErr, err = b.applyWrite(w)
		if err != nil && isConstraint(err) {
			return nil, errHalfApplied
		}
		return writeErr, err
	}
	if _, err := b.exec(qSavepoint); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	writeErr, err = b.applyWrite(w)
	if err != nil && isConstraint(err) {
		writeErr, err = fmt.Errorf("sqlite: write shard %d, execution %s: %w", w.ShardID, sqlcommon.KeyString(w.Key), err), nil
	}
	if err != nil {
		return nil, err
	}
	if writeErr != nil {
		if _, err := b.exec(qRollbackToSavepoint); err != nil {
			return nil, fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	// ROLLBACK TO keeps the savepoint open; RELEASE closes it either way.
	if _, err := b.exec(qReleaseSavepoint); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return writeErr, nil
}

// applyWrite runs one write's statements. Every writeErr it returns comes before the write's
// first change (a conditional UPDATE or DELETE that matched no row changed nothing), so
// without a savepoint such a write leaves no trace. Its other errors may come halfway.
func (b *batch) applyWrite(w *persistence.ExecutionWrite) (writeErr, err error) {
	if writeErr, err := b.checkRangeID(w.ShardID, w.RangeID); writeErr != nil || err != nil {
		return writeErr, err
	}
	switch w.Mode {
	case persistence.WriteModeCreate:
		writeErr, err = b.create(w)
	case persistence.WriteModeUpdate:
		writeErr, err = b.update(w)
	case persistence.WriteModeDelete:
		return b.delete(w)
	}
	if writeErr != nil || err != nil {
		return writeErr, err
	}
	if w.Visibility != nil {
		for _, st := range sqlcommon.VisibilityWriteStmts(w) {
			if _, err := b.exec(st.SQL, st.Args...); err != nil {
				return nil, fmt.Errorf("write visibility: %w", err)
			}
		}
	}
	if err := b.writeCollections(w); err != nil {
		return nil, err
	}
	return nil, b.writeTasks(w)
}

func (b *batch) checkRangeID(shardID int32, rangeID int64) (writeErr, err error) {
	if !b.fenceChecked {
		var version int64
		if err := b.queryRow(qDataVersion).Scan(&version); err != nil {
			return nil, fmt.Errorf("read data_version: %w", err)
		}
		b.fence.check(version)
		b.fenceChecked = true
	}
	stored, ok := b.fence.rangeIDs[shardID]
	if !ok {
		err := b.queryRow(qReadRangeID, shardID).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			stored = 0 // never acquired: no range_id can match
		case err != nil:
			return nil, fmt.Errorf("read range_id: %w", err)
		}
		b.fence.rangeIDs[shardID] = stored
	}
	if stored != rangeID {
		return &persistence.ShardOwnershipLostError{ShardID: shardID, RangeID: rangeID, StoredRangeID: stored}, nil
	}
	return nil, nil
}

// rangeFence keeps each shard's stored range_id between write transactions, so that a batch
// checks its writes' fences without reading the shards table (one read per shard and batch
// was most of a batch's reads).
//
// The copy is current while nothing but this store's write connection has written the
// database: PRAGMA data_version, read once per transaction, changes exactly when another
// connection (of this process or another) committed, and then the copy is dropped. This
// store's own AcquireShard, the one writer of range_id on this connection, drops its shard's
// entry inside its transaction. Both happen inside write transactions, which the single write
// connection runs one at a time, so the fence needs no lock of its own. The versions compared
// are always that one connection's: database/sql replaces a connection only once the driver
// reports it bad, which modernc.org/sqlite does only for a closed one.
type rangeFence struct {
	version int64
	// rangeIDs is nil until the first transaction has read data_version.
	rangeIDs map[int32]int64
}

// check drops the copy unless version, the write connection's data_version now, is the one it
// was read at.
func (f *rangeFence) check(version int64) {
	if f.rangeIDs != nil && f.version == version {
		return
	}
	f.version, f.rangeIDs = version, make(map[int32]int64)
}

// forget drops a shard's entry: its range_id is being written on the write connection.
func (f *rangeFence) forget(shardID int32) { delete(f.rangeIDs, shardID) }

func (b *batch) create(w *persistence.ExecutionWrite) (writeErr, err error) {
	k := w.Key
	var current persistence.CurrentExecution
	err = b.queryRow(qReadCurrent,
		k.NamespaceID, k.ArchetypeID, k.BusinessID).Scan(&current.RunID, &current.Lifecycle)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read current execution: %w", err)
	}
	if current.RunID != w.ExpectedCurrentRunID {
		// A run that exists already is the answer before a conflict (a create retried after
		// it committed). Read only here: on the common path the insert below tells.
		var version int64
		err = b.queryRow(qReadExecutionExists,
			k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID).Scan(&version)
		switch {
		case err == nil:
			return &persistence.ExecutionAlreadyExistsError{Key: k}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("read execution: %w", err)
		}
		return &persistence.CurrentExecutionConflictError{
			Key: k.CurrentKey(), CurrentRunID: current.RunID, Lifecycle: current.Lifecycle,
		}, nil
	}

	// An existing run makes the insert a no-op, so this check too comes before any change.
	res, err := b.exec(qInsertExecution,
		k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID,
		w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue)
	if err != nil {
		return nil, fmt.Errorf("insert execution: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("insert execution: %w", err)
	} else if n == 0 {
		return &persistence.ExecutionAlreadyExistsError{Key: k}, nil
	}
	if _, err := b.exec(qUpsertCurrent,
		k.NamespaceID, k.ArchetypeID, k.BusinessID, w.ShardID, k.RunID, w.Lifecycle); err != nil {
		return nil, fmt.Errorf("upsert current execution: %w", err)
	}
	return nil, nil
}

func (b *batch) update(w *persistence.ExecutionWrite) (writeErr, err error) {
	k := w.Key
	// The version check is in the UPDATE itself: the common case is one statement.
	var res sql.Result
	if w.PrevIndexed != nil && *w.PrevIndexed == w.Indexed {
		res, err = b.exec(qUpdateExecutionState,
			w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State),
			k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion)
	} else {
		res, err = b.exec(qUpdateExecution,
			w.NextDBVersion, w.Lifecycle, sqlcommon.NonNil(w.State), w.Indexed.Status, w.Indexed.TaskQueue,
			k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("update execution: %w", err)
	}
	if writeErr, err := b.checkConditionalChange(res, w); writeErr != nil || err != nil {
		return writeErr, err
	}
	// Keep the current row's lifecycle in step, so ID-reuse decisions need not read the run.
	// The lifecycle <> ? guard makes an unneeded call a read, not a write; a writer that says
	// the lifecycle did not change saves even that.
	if w.PrevLifecycle != nil && *w.PrevLifecycle == w.Lifecycle {
		return nil, nil
	}
	if _, err := b.exec(qUpdateCurrentLifecycle,
		w.Lifecycle, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.Lifecycle); err != nil {
		return nil, fmt.Errorf("update current execution: %w", err)
	}
	return nil, nil
}

func (b *batch) delete(w *persistence.ExecutionWrite) (writeErr, err error) {
	k := w.Key
	res, err := b.exec(qDeleteExecution,
		k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID, w.PrevDBVersion)
	if err != nil {
		return nil, fmt.Errorf("delete execution: %w", err)
	}
	if writeErr, err := b.checkConditionalChange(res, w); writeErr != nil || err != nil {
		return writeErr, err
	}
	keyArgs := []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID}
	for _, stmt := range []struct{ what, sql string }{
		{"collection entries", qDeleteExecutionCollections},
		{"timer tasks", qDeleteExecutionTimers},
		{"outbound tasks", qDeleteExecutionOutbound},
		// Only if it still points at this run: a newer run of the business ID keeps its row.
		{"current execution", qDeleteCurrentOfRun},
	} {
		if _, err := b.exec(stmt.sql, keyArgs...); err != nil {
			return nil, fmt.Errorf("delete %s: %w", stmt.what, err)
		}
	}
	for _, st := range sqlcommon.VisibilityDeleteStmts(k) {
		if _, err := b.exec(st.SQL, st.Args...); err != nil {
			return nil, fmt.Errorf("delete visibility: %w", err)
		}
	}
	return nil, nil
}

// checkConditionalChange turns a conditional UPDATE/DELETE that touched no row into the
// reason: the run is missing (*NotFoundError) or its version moved (*ConditionFailedError).
func (b *batch) checkConditionalChange(res sql.Result, w *persistence.ExecutionWrite) (writeErr, err error) {
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("rows affected: %w", err)
	}
	if n == 1 {
		return nil, nil
	}
	k := w.Key
	var actual int64
	err = b.queryRow(qReadExecutionVersion,
		k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, w.ShardID).Scan(&actual)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &persistence.NotFoundError{
			Msg: fmt.Sprintf("execution %s not found in shard %d", sqlcommon.KeyString(k), w.ShardID),
		}, nil
	case err != nil:
		return nil, fmt.Errorf("read execution version: %w", err)
	}
	return &persistence.ConditionFailedError{Key: k, ExpectedVersion: w.PrevDBVersion, ActualVersion: actual}, nil
}

// collectionChunk is how many collection entries one multi-row statement writes. 64 rows of
// 7 values stay far below SQLite's limit of 32,766 bound parameters.
const collectionChunk = 64

func putCollectionEntriesSQL(n int) string {
	return `INSERT INTO collection_entries (namespace_id, archetype_id, business_id, run_id, collection, entry_key, value)
		VALUES ` + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", n), ", ") + `
		ON CONFLICT (namespace_id, archetype_id, business_id, run_id, collection, entry_key)
		DO UPDATE SET value = excluded.value`
}

func deleteCollectionEntriesSQL(n int) string {
	return `DELETE FROM collection_entries
		WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
		AND collection = ? AND entry_key IN (` + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`
}

func (b *batch) writeCollections(w *persistence.ExecutionWrite) error {
	k := w.Key
	puts := w.CollectionPuts
	for len(puts) >= collectionChunk {
		args := make([]any, 0, 7*collectionChunk)
		for _, e := range puts[:collectionChunk] {
			args = append(args, k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, e.Collection, e.Key, sqlcommon.NonNil(e.Value))
		}
		if _, err := b.exec(qPutCollectionEntries, args...); err != nil {
			return fmt.Errorf("put collection entries %s/%s…: %w", puts[0].Collection, puts[0].Key, err)
		}
		puts = puts[collectionChunk:]
	}
	for _, e := range puts {
		if _, err := b.exec(qPutCollectionEntry,
			k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, e.Collection, e.Key, sqlcommon.NonNil(e.Value)); err != nil {
			return fmt.Errorf("put collection entry %s/%s: %w", e.Collection, e.Key, err)
		}
	}

	// Deletes go by runs of one collection (a write usually touches one).
	deletes := w.CollectionDeletes
	for len(deletes) > 0 {
		run := 1
		for run < len(deletes) && run < collectionChunk && deletes[run].Collection == deletes[0].Collection {
			run++
		}
		if run == collectionChunk {
			args := []any{k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, deletes[0].Collection}
			for _, d := range deletes[:run] {
				args = append(args, d.Key)
			}
			if _, err := b.exec(qDeleteCollectionEntries, args...); err != nil {
				return fmt.Errorf("delete collection entries %s/%s…: %w", deletes[0].Collection, deletes[0].Key, err)
			}
		} else {
			for _, d := range deletes[:run] {
				if _, err := b.exec(qDeleteCollectionEntry,
					k.NamespaceID, k.ArchetypeID, k.BusinessID, k.RunID, d.Collection, d.Key); err != nil {
					return fmt.Errorf("delete collection entry %s/%s: %w", d.Collection, d.Key, err)
				}
			}
		}
		deletes = deletes[run:]
	}
	return nil
}

func (b *batch) writeTasks(w *persistence.ExecutionWrite) error {
	for _, t := range w.TimerTasks {
		e := t.Execution
		vis, _ := sqlcommon.TimeToNanos(t.VisibilityTime) // range checked by ValidateWrite
		if t.Singleton {
			// Replace in place: the previous singleton of this execution and type becomes this
			// one in the same transaction, so there is never more than one row. A heartbeat
			// moves its worker's lease timer this way: one row and one index entry rewritten.
			res, err := b.exec(qMoveSingletonTimer, w.ShardID, vis, t.TaskID, sqlcommon.NonNil(t.Payload),
				e.NamespaceID, e.ArchetypeID, e.BusinessID, e.RunID, t.TaskTypeID)
			if err != nil {
				return fmt.Errorf("replace singleton timer task type %d: %w", t.TaskTypeID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("replace singleton timer task type %d: rows affected: %w", t.TaskTypeID, err)
			} else if n == 1 {
				continue
			}
		}
		if _, err := b.exec(qInsertTimerTask,
			w.ShardID, vis, t.TaskID, e.NamespaceID, e.ArchetypeID, e.BusinessID, e.RunID,
			t.TaskTypeID, boolToInt(t.Singleton), sqlcommon.NonNil(t.Payload)); err != nil {
			return fmt.Errorf("insert timer task %d: %w", t.TaskID, err)
		}
	}
	for _, t := range w.OutboundTasks {
		e := t.Execution
		var created sql.NullInt64
		if !t.CreatedTime.IsZero() {
			created.Int64, _ = sqlcommon.TimeToNanos(t.CreatedTime) // range checked by ValidateWrite
			created.Valid = true
		}
		if _, err := b.exec(qInsertOutboundTask,
			w.ShardID, t.TaskID, t.Destination, e.NamespaceID, e.ArchetypeID, e.BusinessID, e.RunID,
			t.TaskTypeID, sqlcommon.NonNil(t.Payload), created); err != nil {
			return fmt.Errorf("insert outbound task %d: %w", t.TaskID, err)
		}
	}
	return nil
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
