package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/persistence"
	"github.com/vigilhq/vigil/persistence/internal/sqlcommon"
)

// GetExecution implements persistence.ExecutionStore. The run and its collection entries are
// read in one REPEATABLE READ transaction, so they come from the same snapshot. BEGIN, the two
// reads and COMMIT go in one pipeline: one round trip.
func (s *Store) GetExecution(ctx context.Context, shardID int32, key persistence.ExecutionKey) (*persistence.ExecutionRecord, error) {
	notFound := &persistence.NotFoundError{Msg: fmt.Sprintf("execution %s not found in shard %d", sqlcommon.KeyString(key), shardID)}
	if !storableText(key.NamespaceID, key.BusinessID, key.RunID) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, notFound // no stored run can have this key, and the server would refuse it
	}
	rec := &persistence.ExecutionRecord{Key: key}
	found := false
	err := s.pool.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
		pb := &pgx.Batch{}
		pb.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
		pb.Queue(`SELECT db_version, lifecycle, state, idx_status, idx_task_queue FROM executions
			WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4 AND shard_id = $5`,
			key.NamespaceID, key.ArchetypeID, key.BusinessID, key.RunID, shardID).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&rec.DBVersion, &rec.Lifecycle, &rec.State, &rec.Indexed.Status, &rec.Indexed.TaskQueue)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
		pb.Queue(`SELECT collection, entry_key, value FROM collection_entries
			WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND run_id = $4
			ORDER BY collection, entry_key`,
			keyArgs(key)...).Query(func(rows pgx.Rows) error {
			var err error
			rec.Collections, err = sqlcommon.ScanCollectionEntries(rows)
			return err
		})
		pb.Queue(`COMMIT`)
		err := conn.SendBatch(ctx, pb).Close()
		if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
			// A failed statement skipped the COMMIT. (If this fails too, the pool discards a
			// connection left in a transaction.)
			_, _ = conn.Exec(ctx, `ROLLBACK`)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get execution %s in shard %d: %w", sqlcommon.KeyString(key), shardID, err)
	}
	if !found {
		return nil, notFound
	}
	return rec, nil
}

// GetCurrentExecution implements persistence.ExecutionStore.
func (s *Store) GetCurrentExecution(ctx context.Context, shardID int32, key persistence.CurrentExecutionKey) (*persistence.CurrentExecution, error) {
	notFound := &persistence.NotFoundError{Msg: fmt.Sprintf("no current run of %s/%d/%s in shard %d",
		key.NamespaceID, key.ArchetypeID, key.BusinessID, shardID)}
	if !storableText(key.NamespaceID, key.BusinessID) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, notFound
	}
	var cur persistence.CurrentExecution
	err := s.pool.QueryRow(ctx,
		`SELECT run_id, lifecycle FROM current_executions
		 WHERE namespace_id = $1 AND archetype_id = $2 AND business_id = $3 AND shard_id = $4`,
		key.NamespaceID, key.ArchetypeID, key.BusinessID, shardID).Scan(&cur.RunID, &cur.Lifecycle)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get current execution %s/%d/%s in shard %d: %w",
			key.NamespaceID, key.ArchetypeID, key.BusinessID, shardID, err)
	}
	return &cur, nil
}

// listFilter builds the WHERE clause shared by ListExecutions and CountExecutions.
func listFilter(req persistence.ListExecutionsRequest) (string, []any) {
	var sb strings.Builder
	args := []any{req.NamespaceID, req.ArchetypeID}
	sb.WriteString(`namespace_id = $1 AND archetype_id = $2`)
	if req.Status != "" {
		args = append(args, req.Status)
		sb.WriteString(` AND idx_status = $` + strconv.Itoa(len(args)))
	}
	if req.TaskQueue != "" {
		args = append(args, req.TaskQueue)
		sb.WriteString(` AND idx_task_queue = $` + strconv.Itoa(len(args)))
	}
	return sb.String(), args
}

// matchesNothing reports a filter no stored row can satisfy, because it names text PostgreSQL
// cannot store (and would refuse as a parameter).
func matchesNothing(req persistence.ListExecutionsRequest) bool {
	return !storableText(req.NamespaceID, req.Status, req.TaskQueue)
}

// ListExecutions implements persistence.ExecutionStore. Pages are keyed by the last returned
// (business_id, run_id), not by an offset: each page is an index seek, and an execution
// created or deleted between pages neither shifts nor repeats the others. The columns are
// COLLATE "C", so the order is byte order.
func (s *Store) ListExecutions(ctx context.Context, req persistence.ListExecutionsRequest) (*persistence.ListExecutionsResponse, error) {
	if err := sqlcommon.CheckPageSize(req.PageSize); err != nil {
		return nil, fmt.Errorf("postgres: list executions: %w", err)
	}
	if req.Visibility != nil {
		return s.listVisibility(ctx, req)
	}
	where, args := listFilter(req)
	if req.NextPageToken != nil {
		bid, rid, err := sqlcommon.DecodePageToken(pageTokenFormat, req.NextPageToken)
		if err != nil {
			return nil, fmt.Errorf("postgres: list executions: %w", err)
		}
		if !storableText(bid, rid) {
			return nil, fmt.Errorf("postgres: list executions: %w", sqlcommon.ErrInvalidPageToken)
		}
		args = append(args, bid, rid)
		where += fmt.Sprintf(` AND (business_id, run_id) > ($%d, $%d)`, len(args)-1, len(args))
	}
	if matchesNothing(req) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return &persistence.ListExecutionsResponse{}, nil
	}
	args = append(args, sqlcommon.ListLimit(req.PageSize))

	rows, err := s.pool.Query(ctx,
		`SELECT business_id, run_id, db_version, lifecycle, state, idx_status, idx_task_queue
		 FROM executions WHERE `+where+` ORDER BY business_id, run_id LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	defer rows.Close()
	execs, err := sqlcommon.ScanExecutions(rows, req.NamespaceID, req.ArchetypeID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	resp := &persistence.ListExecutionsResponse{Executions: execs}
	sqlcommon.TrimListPage(resp, req.PageSize, pageTokenFormat)
	return resp, nil
}

// listVisibility serves a ListExecutions with a visibility query.
func (s *Store) listVisibility(ctx context.Context, req persistence.ListExecutionsRequest) (*persistence.ListExecutionsResponse, error) {
	resp, err := sqlcommon.ListVisibility(req, s.visibilityDB(ctx))
	if err != nil {
		return nil, fmt.Errorf("postgres: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	return resp, nil
}

// CountVisibility implements persistence.ExecutionStore.
func (s *Store) CountVisibility(ctx context.Context, req persistence.ListExecutionsRequest) (int64, map[int32]int64, error) {
	total, byStatus, err := sqlcommon.CountVisibility(req, s.visibilityDB(ctx))
	if err != nil {
		return 0, nil, fmt.Errorf("postgres: count visibility of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	return total, byStatus, nil
}

// visibilityDB runs the visibility reads on the read pool, renumbering their placeholders.
func (s *Store) visibilityDB(ctx context.Context) sqlcommon.VisibilityDB {
	return sqlcommon.VisibilityDB{Storable: storableText, Query: func(query string, args ...any) (sqlcommon.Rows, func(), error) {
		rows, err := s.pool.Query(ctx, sqlcommon.Dollar(query), args...)
		if err != nil {
			return nil, nil, err
		}
		return rows, rows.Close, nil
	}}
}

// BackfillVisibility implements persistence.ExecutionStore. It runs in one transaction that
// first locks the visibility table against writers (SHARE ROW EXCLUSIVE: reads go on): a
// write that carries a record waits and then replaces the backfilled one, and one that
// carries none changed nothing a record holds. The lock also makes hosts starting together
// backfill once: the later ones find it done.
func (s *Store) BackfillVisibility(ctx context.Context, archetypeID uint32, derive func(state []byte) (*visibility.Record, error)) (int, error) {
	var done int64
	if err := s.pool.QueryRow(ctx, sqlcommon.Dollar(sqlcommon.QBackfillDone), int64(archetypeID)).Scan(&done); err != nil {
		return 0, fmt.Errorf("postgres: backfill visibility of archetype %d: %w", archetypeID, err)
	}
	if done > 0 {
		return 0, nil
	}
	n := 0
	err := pgx.BeginFunc(ctx, s.writePool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE visibility IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, sqlcommon.Dollar(sqlcommon.QBackfillDone), int64(archetypeID)).Scan(&done); err != nil || done > 0 {
			return err
		}
		var err error
		n, err = sqlcommon.Backfill(archetypeID, func(after persistence.ExecutionKey) ([]sqlcommon.BackfillRow, error) {
			rows, err := tx.Query(ctx, sqlcommon.Dollar(sqlcommon.QBackfillScan), after.NamespaceID, int64(archetypeID),
				after.BusinessID, after.RunID, int64(archetypeID), sqlcommon.BackfillChunk)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return sqlcommon.ScanBackfillRows(rows, archetypeID)
		}, func(query string, args ...any) error {
			_, err := tx.Exec(ctx, dollar(query), args...)
			return err
		}, derive)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: backfill visibility of archetype %d: %w", archetypeID, err)
	}
	if n > 0 {
		if err := s.AnalyzeVisibility(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// AnalyzeVisibility refreshes the planner's statistics of the visibility tables and of the
// executions they are joined with. Autovacuum does so as they grow; a backfill that filled
// them at once does it itself, since without statistics the planner takes every predicate for
// one row and joins the tables row by row.
func (s *Store) AnalyzeVisibility(ctx context.Context) error {
	if _, err := s.writePool.Exec(ctx, `ANALYZE visibility, visibility_attributes, executions`); err != nil {
		return fmt.Errorf("postgres: analyze the visibility tables: %w", err)
	}
	return nil
}

// CountExecutions implements persistence.ExecutionStore.
func (s *Store) CountExecutions(ctx context.Context, req persistence.ListExecutionsRequest) (int64, error) {
	if matchesNothing(req) {
		return 0, ctx.Err()
	}
	where, args := listFilter(req)
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM executions WHERE `+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	return n, nil
}

// GetTimerTasks implements persistence.TaskStore.
func (s *Store) GetTimerTasks(ctx context.Context, req persistence.GetTimerTasksRequest) ([]*persistence.TimerTask, error) {
	if err := sqlcommon.CheckPageSize(req.PageSize); err != nil {
		return nil, fmt.Errorf("postgres: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	afterTime, afterID, before := sqlcommon.TimerTaskRange(req)
	rows, err := s.pool.Query(ctx,
		`SELECT visibility_time, task_id, namespace_id, archetype_id, business_id, run_id,
		     task_type_id, singleton, payload
		 FROM timer_tasks
		 WHERE shard_id = $1 AND (visibility_time, task_id) > ($2, $3) AND visibility_time < $4
		 ORDER BY visibility_time, task_id
		 LIMIT $5`,
		req.ShardID, afterTime, afterID, before, req.PageSize)
	if err != nil {
		return nil, fmt.Errorf("postgres: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	defer rows.Close()
	tasks, err := sqlcommon.ScanTimerTasks(rows, req.ShardID)
	if err != nil {
		return nil, fmt.Errorf("postgres: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	return tasks, nil
}

// CompleteTimerTasks implements persistence.TaskStore: one statement for the batch.
func (s *Store) CompleteTimerTasks(ctx context.Context, shardID int32, keys []persistence.TimerTaskKey) error {
	vis := make([]int64, 0, len(keys))
	ids := make([]int64, 0, len(keys))
	for _, key := range keys {
		v, err := sqlcommon.TimeToNanos(key.VisibilityTime)
		if err != nil {
			continue // no stored task can have this key
		}
		vis, ids = append(vis, v), append(ids, key.TaskID)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx,
		`DELETE FROM timer_tasks t USING unnest($2::bigint[], $3::bigint[]) AS k(vis, id)
		 WHERE t.shard_id = $1 AND t.visibility_time = k.vis AND t.task_id = k.id`,
		shardID, vis, ids); err != nil {
		return fmt.Errorf("postgres: complete %d timer tasks in shard %d: %w", len(ids), shardID, err)
	}
	return nil
}

// GetOutboundTasks implements persistence.TaskStore.
func (s *Store) GetOutboundTasks(ctx context.Context, shardID int32, afterTaskID int64, pageSize int) ([]*persistence.OutboundTask, error) {
	if err := sqlcommon.CheckPageSize(pageSize); err != nil {
		return nil, fmt.Errorf("postgres: get outbound tasks of shard %d: %w", shardID, err)
	}
	rows, err := s.pool.Query(ctx,
		`SELECT task_id, destination, namespace_id, archetype_id, business_id, run_id,
		     task_type_id, payload, created_time
		 FROM outbound_tasks
		 WHERE shard_id = $1 AND task_id > $2
		 ORDER BY task_id
		 LIMIT $3`,
		shardID, afterTaskID, pageSize)
	if err != nil {
		return nil, fmt.Errorf("postgres: get outbound tasks of shard %d: %w", shardID, err)
	}
	defer rows.Close()
	tasks, err := sqlcommon.ScanOutboundTasks(rows, shardID)
	if err != nil {
		return nil, fmt.Errorf("postgres: get outbound tasks of shard %d: %w", shardID, err)
	}
	return tasks, nil
}

// CompleteOutboundTasks implements persistence.TaskStore: one statement for the batch.
func (s *Store) CompleteOutboundTasks(ctx context.Context, shardID int32, taskIDs []int64) error {
	if len(taskIDs) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM outbound_tasks WHERE shard_id = $1 AND task_id = ANY($2)`, shardID, taskIDs); err != nil {
		return fmt.Errorf("postgres: complete %d outbound tasks in shard %d: %w", len(taskIDs), shardID, err)
	}
	return nil
}
