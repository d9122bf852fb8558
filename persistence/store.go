// Package persistence defines vigil's store contract: executions with optimistic concurrency,
// shard ownership fenced by range_id, and timer and outbound tasks written in the same
// transaction as the state that produced them (a transactional outbox).
//
// The contract speaks bytes and integers only. It knows nothing of components, task types or
// protobuf: the history host encodes and decodes. Every backend passes the suite in
// persistence/persistencetest.
package persistence

import (
	"context"
	"time"

	"github.com/vigilhq/vigil/common/visibility"
)

// Store is a persistence backend. All methods are safe for concurrent use.
type Store interface {
	ClusterStore
	ShardStore
	ExecutionStore
	TaskStore
	SecurityStore
	NamespaceStore
	// Close releases the backend's resources. No method may be called after Close.
	Close() error
}

// ClusterStore keeps facts fixed for the life of a cluster.
type ClusterStore interface {
	// InitClusterMetadata records numShards on the first call and returns the stored value on
	// every call, so a caller can refuse to start with a different shard count.
	InitClusterMetadata(ctx context.Context, numShards int32) (storedNumShards int32, err error)
}

// ShardStore manages shard ownership. A host owns a shard while the range_id it acquired is the
// stored one; every write carries that range_id and is refused once another host has acquired
// the shard since.
type ShardStore interface {
	// AcquireShard creates the shard row if missing, then increments its range_id and records
	// owner. It returns the new range_id, which fences every later write for this shard.
	AcquireShard(ctx context.Context, shardID int32, owner string) (ShardInfo, error)
	// GetShard returns the shard row, or a *NotFoundError.
	GetShard(ctx context.Context, shardID int32) (ShardInfo, error)
}

// ExecutionStore reads and writes executions.
type ExecutionStore interface {
	// GetExecution returns one execution with all of its collection entries, or a
	// *NotFoundError.
	GetExecution(ctx context.Context, shardID int32, key ExecutionKey) (*ExecutionRecord, error)
	// GetCurrentExecution returns the run that currently holds a business ID, or a
	// *NotFoundError.
	GetCurrentExecution(ctx context.Context, shardID int32, key CurrentExecutionKey) (*CurrentExecution, error)
	// WriteBatch applies writes in one database transaction (one fsync). Each write succeeds or
	// fails on its own: results[i] is nil or the error of writes[i], and a failed write leaves
	// no trace. Writes apply in order, so a later write sees an earlier one of the same batch.
	// A malformed write (see ExecutionWrite) fails alone, with a plain error. A non-nil err
	// means the whole batch failed and nothing was applied.
	WriteBatch(ctx context.Context, writes []*ExecutionWrite) (results []error, err error)
	// ListExecutions pages through the executions of one archetype in a namespace, ordered by
	// (BusinessID, RunID), optionally filtered by the indexed fields. With req.Visibility it
	// pages through the executions whose visibility record matches the query instead, in the
	// query's order (keyset pagination: an execution that changes between pages is neither
	// repeated nor skipped for the others).
	ListExecutions(ctx context.Context, req ListExecutionsRequest) (*ListExecutionsResponse, error)
	// CountExecutions counts what ListExecutions with the same filter would return.
	CountExecutions(ctx context.Context, req ListExecutionsRequest) (int64, error)
	// CountVisibility counts the executions whose visibility record matches req.Visibility
	// (required; its order is ignored), in all and by status.
	CountVisibility(ctx context.Context, req ListExecutionsRequest) (total int64, byStatus map[int32]int64, err error)
	// BackfillVisibility gives every execution of an archetype that has no visibility record
	// the one derive returns for its state (nil: none), once per archetype: it records that it
	// ran and returns 0 at once afterwards. It is how a database written before the
	// visibility tables existed gets its records; writes that carry a record meanwhile win.
	BackfillVisibility(ctx context.Context, archetypeID uint32, derive func(state []byte) (*visibility.Record, error)) (int, error)
}

// TaskStore reads and completes tasks. Tasks are only ever created by WriteBatch.
type TaskStore interface {
	// GetTimerTasks returns up to req.PageSize timer tasks of a shard with
	// req.After < (VisibilityTime, TaskID) and VisibilityTime < req.Before, in that order.
	GetTimerTasks(ctx context.Context, req GetTimerTasksRequest) ([]*TimerTask, error)
	// CompleteTimerTasks deletes timer tasks of a shard in one transaction (one fsync for the
	// batch). Deleting a missing task is not an error.
	CompleteTimerTasks(ctx context.Context, shardID int32, keys []TimerTaskKey) error
	// GetOutboundTasks returns up to pageSize outbound tasks of a shard with TaskID > afterTaskID,
	// ordered by TaskID.
	GetOutboundTasks(ctx context.Context, shardID int32, afterTaskID int64, pageSize int) ([]*OutboundTask, error)
	// CompleteOutboundTasks deletes outbound tasks of a shard in one transaction. Deleting a
	// missing task is not an error.
	CompleteOutboundTasks(ctx context.Context, shardID int32, taskIDs []int64) error
}

// ShardInfo is a shard's ownership row.
type ShardInfo struct {
	ShardID int32
	RangeID int64
	Owner   string
	// Released says the owner that held the shard before released it cleanly
	// (MembershipStore.ReleaseShard) rather than crashing or being fenced off: from
	// AcquireShard, the previous owner; from GetShard, the current row's owner.
	Released bool
}

// ExecutionKey identifies one run of an execution. BusinessIDs are unique per namespace and
// archetype; RunID distinguishes reuses of a BusinessID.
type ExecutionKey struct {
	NamespaceID string
	ArchetypeID uint32
	BusinessID  string
	RunID       string
}

// CurrentKey returns the business-ID part of the key.
func (k ExecutionKey) CurrentKey() CurrentExecutionKey {
	return CurrentExecutionKey{NamespaceID: k.NamespaceID, ArchetypeID: k.ArchetypeID, BusinessID: k.BusinessID}
}

// CurrentExecutionKey identifies a business ID regardless of run.
type CurrentExecutionKey struct {
	NamespaceID string
	ArchetypeID uint32
	BusinessID  string
}

// CurrentExecution says which run holds a business ID.
type CurrentExecution struct {
	RunID     string
	Lifecycle Lifecycle
}

// Lifecycle is an execution's coarse state, kept in its own column so that ID-reuse decisions
// need not decode the state blob.
type Lifecycle int32

const (
	LifecycleRunning   Lifecycle = 1
	LifecycleCompleted Lifecycle = 2
	LifecycleFailed    Lifecycle = 3
)

// IndexedFields are the columns ListExecutions can filter on. Empty means unset.
type IndexedFields struct {
	Status    string
	TaskQueue string
}

// CollectionEntry is one entry of a component's keyed collection (for example one bound
// activity of a worker). Entries are stored as their own rows so that writing the state blob
// never rewrites them.
type CollectionEntry struct {
	Collection string
	Key        string
	Value      []byte
}

// CollectionEntryKey names an entry to delete.
type CollectionEntryKey struct {
	Collection string
	Key        string
}

// ExecutionRecord is a stored execution.
type ExecutionRecord struct {
	Key       ExecutionKey
	DBVersion int64
	State     []byte
	Lifecycle Lifecycle
	Indexed   IndexedFields
	// Collections holds every collection entry, in (Collection, Key) order. Only GetExecution
	// fills it.
	Collections []CollectionEntry
}

// WriteMode says what an ExecutionWrite expects to find.
type WriteMode int

const (
	// WriteModeCreate inserts a new run. It fails with *ExecutionAlreadyExistsError if the run
	// exists, and with *CurrentExecutionConflictError unless the business ID's current run is
	// ExpectedCurrentRunID ("" = no current run). On success the new run becomes current.
	WriteModeCreate WriteMode = iota + 1
	// WriteModeUpdate replaces an existing run's state. It fails with *ConditionFailedError
	// unless the stored DBVersion is PrevDBVersion, and with *NotFoundError if the run does not
	// exist.
	WriteModeUpdate
	// WriteModeDelete removes the run, its collection entries and its timer and outbound
	// tasks, and its current-execution row if it is the current run. Same conditions as
	// WriteModeUpdate. A delete carries no collection changes and no tasks.
	WriteModeDelete
)

// ExecutionWrite is one atomic change to one execution and the tasks it produced.
type ExecutionWrite struct {
	ShardID int32
	// RangeID fences the write: it fails with *ShardOwnershipLostError unless the shard's
	// stored range_id equals it.
	RangeID int64
	Mode    WriteMode
	Key     ExecutionKey

	// ExpectedCurrentRunID is checked by WriteModeCreate.
	ExpectedCurrentRunID string
	// PrevDBVersion is checked by WriteModeUpdate and WriteModeDelete.
	PrevDBVersion int64
	// NextDBVersion is stored on success; it must be greater than PrevDBVersion.
	NextDBVersion int64

	State     []byte
	Lifecycle Lifecycle
	Indexed   IndexedFields
	// PrevIndexed, when set on an update, is what the writer read before: a backend may skip
	// rewriting its indexes when Indexed equals it (a plain heartbeat changes neither the status
	// nor the task queue). nil means unknown: the indexes are written.
	PrevIndexed *IndexedFields
	// PrevLifecycle, when set on an update, is the lifecycle the writer read before: a backend
	// may skip keeping the current-execution row in step when Lifecycle equals it. nil means
	// unknown.
	PrevLifecycle *Lifecycle

	// Visibility, when set on a create or an update, replaces the execution's visibility
	// record (the rows ListExecutions with a visibility query reads), in the same
	// transaction. nil leaves the stored record as it is. A delete removes it.
	Visibility *visibility.Record
	// KeepVisibilityAttributes says Visibility's custom attributes equal the stored ones: the
	// backend need not rewrite them.
	KeepVisibilityAttributes bool

	// CollectionPuts insert or replace entries; CollectionDeletes remove them (a missing entry
	// is not an error). A key must not appear in both.
	CollectionPuts    []CollectionEntry
	CollectionDeletes []CollectionEntryKey

	// TimerTasks and OutboundTasks are the write's tasks; each task's ShardID and Execution
	// must be the write's ShardID and Key.
	TimerTasks    []*TimerTask
	OutboundTasks []*OutboundTask
}

// TimerTaskKey orders and identifies a timer task within a shard.
type TimerTaskKey struct {
	VisibilityTime time.Time
	TaskID         int64
}

// Compare orders keys by (VisibilityTime, TaskID).
func (k TimerTaskKey) Compare(o TimerTaskKey) int {
	if c := k.VisibilityTime.Compare(o.VisibilityTime); c != 0 {
		return c
	}
	switch {
	case k.TaskID < o.TaskID:
		return -1
	case k.TaskID > o.TaskID:
		return 1
	}
	return 0
}

// TimerTask is a task due at a time. Backends store VisibilityTime with nanosecond precision in
// UTC.
type TimerTask struct {
	ShardID        int32
	TaskID         int64
	VisibilityTime time.Time
	Execution      ExecutionKey
	TaskTypeID     uint32
	// Singleton timers exist at most once per (execution, TaskTypeID): writing one replaces the
	// stored one in place instead of adding a row.
	Singleton bool
	Payload   []byte
}

// Key returns the task's ordering key.
func (t *TimerTask) Key() TimerTaskKey {
	return TimerTaskKey{VisibilityTime: t.VisibilityTime, TaskID: t.TaskID}
}

// OutboundTask is a side-effect task addressed to a destination (another shard, a host, a
// queue). The outbound queue groups tasks by Destination.
type OutboundTask struct {
	ShardID     int32
	TaskID      int64
	Destination string
	Execution   ExecutionKey
	TaskTypeID  uint32
	Payload     []byte
	// CreatedTime is when the task was written, for lag metrics.
	CreatedTime time.Time
}

// GetTimerTasksRequest selects a page of timer tasks.
type GetTimerTasksRequest struct {
	ShardID int32
	// After is exclusive; the zero key reads from the start.
	After TimerTaskKey
	// Before bounds VisibilityTime, exclusive.
	Before   time.Time
	PageSize int
}

// ListExecutionsRequest selects a page of executions.
type ListExecutionsRequest struct {
	NamespaceID string
	ArchetypeID uint32
	// Status and TaskQueue filter by equality when non-empty.
	Status    string
	TaskQueue string
	// Visibility, when set, selects and orders by the visibility records instead (Status and
	// TaskQueue must then be empty); NextPageToken is then a position in its order.
	Visibility *visibility.Query
	PageSize   int
	// NextPageToken is the token of the previous page, nil for the first.
	NextPageToken []byte
}

// ListExecutionsResponse is a page of executions (without collections).
type ListExecutionsResponse struct {
	Executions []*ExecutionRecord
	// NextPageToken is nil on the last page.
	NextPageToken []byte
}
