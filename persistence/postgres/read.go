package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/vigilhq/vigil/persistence"
)

// GetExecution implements persistence.ExecutionStore. The run and its collection entries are
// read in one REPEATABLE READ transaction, so they come from the same snapshot.
func (s *Store) GetExecution(ctx context.Context, shardID int32, key persistence.ExecutionKey) (*persistence.ExecutionRecord, error) {
	notFound := &persistence.NotFoundError{Msg: fmt.Sprintf("execution %s not found in shard %d", keyString(key), shardID)}
	if !storableText(key.NamespaceID, key.BusinessID, key.RunID) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, notFound // no stored run can have this key, and the server would refuse it
	}
	rec := &persistence.ExecutionRecord{Key: key}
	found := false
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		pb := &pgx.Batch{}
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
			for rows.Next() {
				var e persistence.CollectionEntry
				if err := rows.Scan(&e.Collection, &e.Key, &e.Value); err != nil {
					return err
				}
				rec.Collections = append(rec.Collections, e)
			}
			return rows.Err()
		})
		return tx.SendBatch(ctx, pb).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get execution %s in shard %d: %w", keyString(key), shardID, err)
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
	if req.PageSize <= 0 {
		return nil, fmt.Errorf("postgres: list executions: page size must be positive, got %d", req.PageSize)
	}
	where, args := listFilter(req)
	if req.NextPageToken != nil {
		bid, rid, err := decodePageToken(req.NextPageToken)
		if err != nil {
			return nil, fmt.Errorf("postgres: list executions: %w", err)
		}
		if !storableText(bid, rid) {
			return nil, fmt.Errorf("postgres: list executions: %w", errInvalidPageToken)
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
	// One row more than the page tells whether another page exists, so the last page never
	// hands out a token that leads to an empty page.
	limit := min(int64(req.PageSize), math.MaxInt64-1) + 1
	args = append(args, limit)

	rows, err := s.pool.Query(ctx,
		`SELECT business_id, run_id, db_version, lifecycle, state, idx_status, idx_task_queue
		 FROM executions WHERE `+where+` ORDER BY business_id, run_id LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	defer rows.Close()
	resp := &persistence.ListExecutionsResponse{}
	for rows.Next() {
		rec := &persistence.ExecutionRecord{Key: persistence.ExecutionKey{NamespaceID: req.NamespaceID, ArchetypeID: req.ArchetypeID}}
		if err := rows.Scan(&rec.Key.BusinessID, &rec.Key.RunID, &rec.DBVersion, &rec.Lifecycle, &rec.State,
			&rec.Indexed.Status, &rec.Indexed.TaskQueue); err != nil {
			return nil, fmt.Errorf("postgres: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
		}
		resp.Executions = append(resp.Executions, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list executions of %s/%d: %w", req.NamespaceID, req.ArchetypeID, err)
	}
	if len(resp.Executions) > req.PageSize {
		resp.Executions = resp.Executions[:req.PageSize]
		last := resp.Executions[req.PageSize-1].Key
		resp.NextPageToken = encodePageToken(last.BusinessID, last.RunID)
	}
	return resp, nil
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
	if req.PageSize <= 0 {
		return nil, fmt.Errorf("postgres: get timer tasks of shard %d: page size must be positive, got %d", req.ShardID, req.PageSize)
	}
	afterTime, afterID := boundToNanos(req.After.VisibilityTime), req.After.TaskID
	if req.After == (persistence.TimerTaskKey{}) {
		afterTime, afterID = math.MinInt64, math.MinInt64
	}
	rows, err := s.pool.Query(ctx,
		`SELECT visibility_time, task_id, namespace_id, archetype_id, business_id, run_id,
		     task_type_id, singleton, payload
		 FROM timer_tasks
		 WHERE shard_id = $1 AND (visibility_time, task_id) > ($2, $3) AND visibility_time < $4
		 ORDER BY visibility_time, task_id
		 LIMIT $5`,
		req.ShardID, afterTime, afterID, boundToNanos(req.Before), req.PageSize)
	if err != nil {
		return nil, fmt.Errorf("postgres: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	defer rows.Close()
	var tasks []*persistence.TimerTask
	for rows.Next() {
		t := &persistence.TimerTask{ShardID: req.ShardID}
		var vis int64
		if err := rows.Scan(&vis, &t.TaskID, &t.Execution.NamespaceID, &t.Execution.ArchetypeID,
			&t.Execution.BusinessID, &t.Execution.RunID, &t.TaskTypeID, &t.Singleton, &t.Payload); err != nil {
			return nil, fmt.Errorf("postgres: get timer tasks of shard %d: %w", req.ShardID, err)
		}
		t.VisibilityTime = nanosToTime(vis)
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: get timer tasks of shard %d: %w", req.ShardID, err)
	}
	return tasks, nil
}

// CompleteTimerTask implements persistence.TaskStore.
func (s *Store) CompleteTimerTask(ctx context.Context, shardID int32, key persistence.TimerTaskKey) error {
	vis, err := timeToNanos(key.VisibilityTime)
	if err != nil {
		return nil // no stored task can have this key
	}
	if _, err := s.pool.Exec(ctx,
		`DELETE FROM timer_tasks WHERE shard_id = $1 AND visibility_time = $2 AND task_id = $3`,
		shardID, vis, key.TaskID); err != nil {
		return fmt.Errorf("postgres: complete timer task %d in shard %d: %w", key.TaskID, shardID, err)
	}
	return nil
}

// GetOutboundTasks implements persistence.TaskStore.
func (s *Store) GetOutboundTasks(ctx context.Context, shardID int32, afterTaskID int64, pageSize int) ([]*persistence.OutboundTask, error) {
	if pageSize <= 0 {
		return nil, fmt.Errorf("postgres: get outbound tasks of shard %d: page size must be positive, got %d", shardID, pageSize)
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
	var tasks []*persistence.OutboundTask
	for rows.Next() {
		t := &persistence.OutboundTask{ShardID: shardID}
		var created *int64
		if err := rows.Scan(&t.TaskID, &t.Destination, &t.Execution.NamespaceID, &t.Execution.ArchetypeID,
			&t.Execution.BusinessID, &t.Execution.RunID, &t.TaskTypeID, &t.Payload, &created); err != nil {
			return nil, fmt.Errorf("postgres: get outbound tasks of shard %d: %w", shardID, err)
		}
		if created != nil {
			t.CreatedTime = nanosToTime(*created)
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: get outbound tasks of shard %d: %w", shardID, err)
	}
	return tasks, nil
}

// CompleteOutboundTask implements persistence.TaskStore.
func (s *Store) CompleteOutboundTask(ctx context.Context, shardID int32, taskID int64) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM outbound_tasks WHERE shard_id = $1 AND task_id = $2`, shardID, taskID); err != nil {
		return fmt.Errorf("postgres: complete outbound task %d in shard %d: %w", taskID, shardID, err)
	}
	return nil
}
