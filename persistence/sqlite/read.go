package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

// readStmts are the statements of the reads a heartbeat or a describe makes: a heartbeat of a
// worker the host does not hold reads its current run (a registration, or the first beat after
// a restart), a describe or a reload its run. database/sql prepares each once per pooled
// connection; as text, SQLite parsed and planned them on every call, a good share of the cost
// of the reads a 100,000-worker registration makes.
type readStmts struct {
	current, execution, entries *sql.Stmt
}

func prepareReadStatements(ctx context.Context, db *sql.DB) (readStmts, error) {
	var r readStmts
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&r.current, `SELECT run_id, lifecycle FROM current_executions
			WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND shard_id = ?`},
		{&r.execution, `SELECT db_version, lifecycle, state, idx_status, idx_task_queue FROM executions
			WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ? AND shard_id = ?`},
		{&r.entries, `SELECT collection, entry_key, value FROM collection_entries
			WHERE namespace_id = ? AND archetype_id = ? AND business_id = ? AND run_id = ?
			ORDER BY collection, entry_key`},
	} {
		st, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			_ = r.close()
			return readStmts{}, fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.stmt = st
	}
	return r, nil
}

func (r readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{r.current, r.execution, r.entries} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// GetExecution implements persistence.ExecutionStore. The run and its collection entries are
// read in one read transaction, so they come from the same commit.
func (s *Store) GetExecution(ctx context.Context, shardID int32, key persistence.ExecutionKey) (*persistence.ExecutionRecord, error) {
	rec, err := s.getExecution(ctx, shardID, key)
	if err != nil {
		var nf *persistence.NotFoundError
		if errors.As(err, &nf) {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: get execution %s in shard %d: %w", sqlcommon.KeyString(key), shardID, err)
	}
	return rec, nil
}

func (s *Store) getExecution(ctx context.Context, shardID int32, key persistence.ExecutionKey) (_ *persistence.ExecutionRecord, err error) {
	tx, err := s.readDB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	rec := &persistence.ExecutionRecord{Key: key}
	err = tx.StmtContext(ctx, s.reads.execution).QueryRowContext(ctx,
		key.NamespaceID, key.ArchetypeID, key.BusinessID, key.RunID, shardID).
		Scan(&rec.DBVersion, &rec.Lifecycle, &rec.State, &rec.Indexed.Status, &rec.Indexed.TaskQueue)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &persistence.NotFoundError{Msg: fmt.Sprintf("execution %s not found in shard %d", sqlcommon.KeyString(key), shardID)}
	}
	if err != nil {
		return nil, fmt.Errorf("read execution: %w", err)
	}

	rows, err := tx.StmtContext(ctx, s.reads.entries).QueryContext(ctx,
		key.NamespaceID, key.ArchetypeID, key.BusinessID, key.RunID)
	if err != nil {
		return nil, fmt.Errorf("read collection entries: %w", err)
	}
	defer rows.Close()
	if rec.Collections, err = sqlcommon.ScanCollectionEntries(rows); err != nil {
		return nil, fmt.Errorf("read collection entries: %w", err)
	}
	return rec, nil
}

// GetCurrentExecution implements persistence.ExecutionStore.
func (s *Store) GetCurrentExecution(ctx context.Context, shardID int32, key persistence.CurrentExecutionKey) (*persistence.CurrentExecution, error) {
	var cur persistence.CurrentExecution
	err := s.reads.current.QueryRowContext(ctx,
		key.NamespaceID, key.ArchetypeID, key.BusinessID, shardID).Scan(&cur.RunID, &cur.Lifecycle)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &persistence.NotFoundError{Msg: fmt.Sprintf("no current run of %s/%d/%s in shard %d",
			key.NamespaceID, key.ArchetypeID, key.BusinessID, shardID)}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get current execution %s/%d/%s in shard %d: %w",
			key.NamespaceID, key.ArchetypeID, key.BusinessID, shardID, err)
	}
	return &cur, nil
}

// listFilter builds the WHERE clause shared by ListExecutions and CountExecutions.
func listFilter(req persistence.ListExecutionsRequest) (string, []any) {
	var sb strings.Builder
	args := []any{req.NamespaceID, req.ArchetypeID}
	sb.WriteString(`namespace_id = ? AND archetype_id = ?`)
	if req.Status != "" {
		sb.WriteString(` AND idx_status = ?`)
		args = append(args, req.Status)
	}
	if req.TaskQueue != "" {
		sb.WriteString(` AND idx_task_queue = ?`)
		args = append(args, req.TaskQueue)
	}
	return sb.String(), args
}

// ListExecutions implements persistence.ExecutionStore. Pages are keyed by the last returned
// (business_id, run_id), not by an offset: each page is an index seek, and an execution
// created or deleted between pages neither shifts nor repeats the others.
func (s *Store) ListExecutions(ctx context.Context, req persistence.ListExecutionsRequest) (*persistence.ListExecutionsResponse, error) {
	if err := sqlcommon.CheckPageSize(req.PageSize); err != nil {
		return nil, fmt.Errorf("sqlite: list executions: %w", err)
	}
	if req.Visibility != nil {
		return s.listVisibility(ctx, req)
	}
	where, args := listFilter(req)
	if req.NextPageToken != nil {
		bid, rid, err := sqlcommon.DecodePageToken(pageTokenVersion, req.NextPageToken)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list executions: %w", err)
		}
		where += ` AND (business_id, run_id) > (?, ?)`
		args = append(args, bid, rid)
	}
	args = append(args, sqlcommon.ListLimit(req.PageSize))

	rows, err := s.readDB.QueryContext(ctx,
		`SELECT business_id, run_id, db_version, lifecycle, state, idx_status, idx_task_queue
		 FROM executions WHERE `+where+` ORDER BY business_id, run_id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	defer rows.Close()
	execs, err := sqlcommon.ScanExecutions(rows, req.NamespaceID, req.ArchetypeID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	resp := &persistence.ListExecutionsResponse{Executions: execs}
	sqlcommon.TrimListPage(resp, req.PageSize, pageTokenVersion)
	return resp, nil
}

// CountExecutions implements persistence.ExecutionStore.
func (s *Store) CountExecutions(ctx context.Context, req persistence.ListExecutionsRequest) (int64, error) {
	where, args := listFilter(req)
	var n int64
	if err := s.readDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM executions WHERE `+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	return n, nil
}

// listVisibility serves a ListExecutions with a visibility query.
func (s *Store) listVisibility(ctx context.Context, req persistence.ListExecutionsRequest) (*persistence.ListExecutionsResponse, error) {
	resp, err := sqlcommon.ListVisibility(req, s.visibilityDB(ctx))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	return resp, nil
}

// CountVisibility implements persistence.ExecutionStore.
func (s *Store) CountVisibility(ctx context.Context, req persistence.ListExecutionsRequest) (int64, map[int32]int64, error) {
	total, byStatus, err := sqlcommon.CountVisibility(req, s.visibilityDB(ctx))
	if err != nil {
		return 0, nil, fmt.Errorf("sqlite: count visibility of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	return total, byStatus, nil
}

// visibilityDB runs the visibility reads on the read connections.
func (s *Store) visibilityDB(ctx context.Context) sqlcommon.VisibilityDB {
	return sqlcommon.VisibilityDB{Query: func(query string, args ...any) (sqlcommon.Rows, func(), error) {
		rows, err := s.readDB.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() { _ = rows.Close() }, nil
	}}
}

// BackfillVisibility implements persistence.ExecutionStore, in one write transaction: no
// other write interleaves, so every execution it reads gets the record of its latest state.
func (s *Store) BackfillVisibility(ctx context.Context, archetypeID uint32, derive func(state []byte) (*visibility.Record, error)) (int, error) {
	var done int64
	if err := s.readDB.QueryRowContext(ctx, sqlcommon.QBackfillDone, int64(archetypeID)).Scan(&done); err != nil {
		return 0, fmt.Errorf("sqlite: backfill visibility of archetype %d: %w", archetypeID, err)
	}
	if done > 0 {
		return 0, nil
	}
	n := 0
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = sqlcommon.Backfill(archetypeID, func(after persistence.ExecutionKey) ([]sqlcommon.BackfillRow, error) {
			rows, err := tx.QueryContext(ctx, sqlcommon.QBackfillScan, after.NamespaceID, int64(archetypeID),
				after.BusinessID, after.RunID, int64(archetypeID), sqlcommon.BackfillChunk)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return sqlcommon.ScanBackfillRows(rows, archetypeID)
		}, func(query string, args ...any) error {
			_, err := tx.ExecContext(ctx, query, args...)
			return err
		}, derive)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: backfill visibility of archetype %d: %w", archetypeID, err)
	}
	return n, nil
}

// GetTimerTasks implements persistence.TaskStore.
func (s *Store) GetTimerTasks(ctx context.Context, req persistence.GetTimerTasksRequest) ([]*persistence.TimerTask, error) {
	if err := sqlcommon.CheckPageSize(req.PageSize); err != nil {
		return nil, fmt.Errorf("sqlite: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	afterTime, afterID, before := sqlcommon.TimerTaskRange(req)
	rows, err := s.readDB.QueryContext(ctx,
		`SELECT visibility_time, task_id, namespace_id, archetype_id, business_id, run_id,
		     task_type_id, singleton, payload
		 FROM timer_tasks
		 WHERE shard_id = ? AND (visibility_time, task_id) > (?, ?) AND visibility_time < ?
		 ORDER BY visibility_time, task_id
		 LIMIT ?`,
		req.ShardID, afterTime, afterID, before, req.PageSize)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	defer rows.Close()
	tasks, err := sqlcommon.ScanTimerTasks(rows, req.ShardID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	return tasks, nil
}

// CompleteTimerTasks implements persistence.TaskStore.
func (s *Store) CompleteTimerTasks(ctx context.Context, shardID int32, keys []persistence.TimerTaskKey) error {
	if len(keys) == 0 {
		return nil
	}
	err := s.taskDeletes.do(ctx, len(keys), func(ctx context.Context, tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.writeStmts[qDeleteTimerTask])
		for _, key := range keys {
			vis, err := sqlcommon.TimeToNanos(key.VisibilityTime)
			if err != nil {
				continue // no stored task can have this key
			}
			if _, err := stmt.ExecContext(ctx, shardID, vis, key.TaskID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: complete %d timer tasks in shard %d: %w", len(keys), shardID, err)
	}
	return nil
}

// GetOutboundTasks implements persistence.TaskStore.
func (s *Store) GetOutboundTasks(ctx context.Context, shardID int32, afterTaskID int64, pageSize int) ([]*persistence.OutboundTask, error) {
	if err := sqlcommon.CheckPageSize(pageSize); err != nil {
		return nil, fmt.Errorf("sqlite: get outbound tasks of shard %d: %w", shardID, err)
	}
	rows, err := s.readDB.QueryContext(ctx,
		`SELECT task_id, destination, namespace_id, archetype_id, business_id, run_id,
		     task_type_id, payload, created_time
		 FROM outbound_tasks
		 WHERE shard_id = ? AND task_id > ?
		 ORDER BY task_id
		 LIMIT ?`,
		shardID, afterTaskID, pageSize)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get outbound tasks of shard %d: %w", shardID, err)
	}
	defer rows.Close()
	tasks, err := sqlcommon.ScanOutboundTasks(rows, shardID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get outbound tasks of shard %d: %w", shardID, err)
	}
	return tasks, nil
}

// CompleteOutboundTasks implements persistence.TaskStore.
func (s *Store) CompleteOutboundTasks(ctx context.Context, shardID int32, taskIDs []int64) error {
	if len(taskIDs) == 0 {
		return nil
	}
	err := s.taskDeletes.do(ctx, len(taskIDs), func(ctx context.Context, tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.writeStmts[qDeleteOutboundTask])
		for _, id := range taskIDs {
			if _, err := stmt.ExecContext(ctx, shardID, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: complete %d outbound tasks in shard %d: %w", len(taskIDs), shardID, err)
	}
	return nil
}
