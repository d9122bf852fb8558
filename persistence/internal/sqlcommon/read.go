package sqlcommon

import (
	"fmt"
	"math"

	"github.com/vigilhq/vigil/persistence"
)

// Rows is the part of a result set the scanners below need; *sql.Rows and pgx.Rows have it.
// The caller still closes the rows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CheckPageSize refuses a page size that could return nothing.
func CheckPageSize(pageSize int) error {
	if pageSize <= 0 {
		return fmt.Errorf("page size must be positive, got %d", pageSize)
	}
	return nil
}

// ListLimit is the LIMIT of a list query: one row more than the page tells whether another page
// exists, so the last page never hands out a token that leads to an empty page. TrimListPage
// drops that row again.
func ListLimit(pageSize int) int64 {
	return min(int64(pageSize), math.MaxInt64-1) + 1
}

// TrimListPage cuts a list response read with ListLimit to pageSize and, if a row was cut, sets
// the token of the next page in the backend's token format.
func TrimListPage(resp *persistence.ListExecutionsResponse, pageSize int, tokenFormat byte) {
	if len(resp.Executions) > pageSize {
		resp.Executions = resp.Executions[:pageSize]
		last := resp.Executions[pageSize-1].Key
		resp.NextPageToken = EncodePageToken(tokenFormat, last.BusinessID, last.RunID)
	}
}

// TimerTaskRange returns a GetTimerTasks request's bounds as stored values: tasks after
// (afterTime, afterID) in (visibility_time, task_id) order, visible before before. A zero
// After starts at the first task.
func TimerTaskRange(req persistence.GetTimerTasksRequest) (afterTime, afterID, before int64) {
	afterTime, afterID = BoundToNanos(req.After.VisibilityTime), req.After.TaskID
	if req.After == (persistence.TimerTaskKey{}) {
		afterTime, afterID = math.MinInt64, math.MinInt64
	}
	return afterTime, afterID, BoundToNanos(req.Before)
}

// ScanCollectionEntries reads rows of (collection, entry_key, value).
func ScanCollectionEntries(rows Rows) ([]persistence.CollectionEntry, error) {
	var entries []persistence.CollectionEntry
	for rows.Next() {
		var e persistence.CollectionEntry
		if err := rows.Scan(&e.Collection, &e.Key, &e.Value); err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, rows.Err()
}

// ScanExecutions reads rows of (business_id, run_id, db_version, lifecycle, state, idx_status,
// idx_task_queue) of one namespace and archetype.
func ScanExecutions(rows Rows, namespaceID string, archetypeID uint32) ([]*persistence.ExecutionRecord, error) {
	var recs []*persistence.ExecutionRecord
	for rows.Next() {
		rec := &persistence.ExecutionRecord{Key: persistence.ExecutionKey{NamespaceID: namespaceID, ArchetypeID: archetypeID}}
		if err := rows.Scan(&rec.Key.BusinessID, &rec.Key.RunID, &rec.DBVersion, &rec.Lifecycle, &rec.State,
			&rec.Indexed.Status, &rec.Indexed.TaskQueue); err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}

// ScanTimerTasks reads rows of (visibility_time, task_id, namespace_id, archetype_id,
// business_id, run_id, task_type_id, singleton, payload) of one shard.
func ScanTimerTasks(rows Rows, shardID int32) ([]*persistence.TimerTask, error) {
	var tasks []*persistence.TimerTask
	for rows.Next() {
		t := &persistence.TimerTask{ShardID: shardID}
		var vis int64
		if err := rows.Scan(&vis, &t.TaskID, &t.Execution.NamespaceID, &t.Execution.ArchetypeID,
			&t.Execution.BusinessID, &t.Execution.RunID, &t.TaskTypeID, &t.Singleton, &t.Payload); err != nil {
			return nil, err
		}
		t.VisibilityTime = NanosToTime(vis)
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}

// ScanOutboundTasks reads rows of (task_id, destination, namespace_id, archetype_id,
// business_id, run_id, task_type_id, payload, created_time) of one shard. A NULL created_time
// leaves CreatedTime zero.
func ScanOutboundTasks(rows Rows, shardID int32) ([]*persistence.OutboundTask, error) {
	var tasks []*persistence.OutboundTask
	for rows.Next() {
		t := &persistence.OutboundTask{ShardID: shardID}
		var created *int64
		if err := rows.Scan(&t.TaskID, &t.Destination, &t.Execution.NamespaceID, &t.Execution.ArchetypeID,
			&t.Execution.BusinessID, &t.Execution.RunID, &t.TaskTypeID, &t.Payload, &created); err != nil {
			return nil, err
		}
		if created != nil {
			t.CreatedTime = NanosToTime(*created)
		}
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}
